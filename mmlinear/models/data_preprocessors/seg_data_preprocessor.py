"""mmseg's data preprocessor, plus the padding mask for mmlinear backbones."""
from mmseg.models.data_preprocessor import SegDataPreProcessor

from mmlinear.registry import MODELS
from .padding_mask_mixin import PaddingMaskMixin


@MODELS.register_module()
class PaddingMaskSegDataPreprocessor(PaddingMaskMixin, SegDataPreProcessor):
    """``SegDataPreProcessor`` that also attaches the batch's padding mask to the inputs.

    Same arguments as mmseg's ``SegDataPreProcessor``; use it in segmentation configs as
    ``data_preprocessor=dict(type='mmlinear.PaddingMaskSegDataPreprocessor', ...)``.
    """
