"""Data preprocessors for the dense toolboxes; each is registered only where its toolbox is
installed (mmlinear itself needs neither mmdet nor mmseg)."""
import importlib.util

from .normalized_rows import NormalizedRows

__all__ = ['NormalizedRows']

if importlib.util.find_spec('mmdet') is not None:
    from .det_data_preprocessor import PaddingMaskDetDataPreprocessor  # noqa: F401
    __all__.append('PaddingMaskDetDataPreprocessor')
if importlib.util.find_spec('mmseg') is not None:
    from .nchannel_seg_data_preprocessor import NChannelSegDataPreprocessor  # noqa: F401
    from .seg_data_preprocessor import PaddingMaskSegDataPreprocessor  # noqa: F401
    __all__ += ['NChannelSegDataPreprocessor', 'PaddingMaskSegDataPreprocessor']
