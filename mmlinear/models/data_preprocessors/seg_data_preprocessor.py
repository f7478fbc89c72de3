"""mmlinear's segmentation data preprocessor, plus the padding mask for mmlinear backbones."""
from mmlinear.registry import MODELS
from .nchannel_seg_data_preprocessor import NChannelSegDataPreprocessor
from .padding_mask_mixin import PaddingMaskMixin


@MODELS.register_module()
class PaddingMaskSegDataPreprocessor(PaddingMaskMixin, NChannelSegDataPreprocessor):
    """``NChannelSegDataPreprocessor`` (mmseg's ``SegDataPreProcessor`` for any number of
    channels) that also attaches the batch's padding mask to the inputs.

    Same arguments as mmseg's ``SegDataPreProcessor``, ``mean`` and ``std`` of one value or one
    per channel; use it in segmentation configs as
    ``data_preprocessor=dict(type='mmlinear.PaddingMaskSegDataPreprocessor', ...)``.
    """
