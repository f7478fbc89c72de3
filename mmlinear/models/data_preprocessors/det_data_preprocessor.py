"""mmdet's data preprocessor, plus the padding mask for mmlinear backbones."""
from mmdet.models.data_preprocessors import DetDataPreprocessor

from mmlinear.registry import MODELS
from .padding_mask_mixin import PaddingMaskMixin


@MODELS.register_module()
class PaddingMaskDetDataPreprocessor(PaddingMaskMixin, DetDataPreprocessor):
    """``DetDataPreprocessor`` that also attaches the batch's padding mask to the inputs.

    Same arguments as mmdet's ``DetDataPreprocessor``; use it in detection configs as
    ``data_preprocessor=dict(type='mmlinear.PaddingMaskDetDataPreprocessor', ...)``.
    """
