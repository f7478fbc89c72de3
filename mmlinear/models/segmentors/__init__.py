"""mmseg's EncoderDecoder run over bands of rows, registered only where mmseg is installed
(mmlinear itself does not need it)."""
import importlib.util

__all__ = []

if importlib.util.find_spec('mmseg') is not None:
    from ..streaming.segmentation import StreamedSegmentation  # noqa: F401
    from ..streaming.segmentation import StreamedSegmentationMemory
    from .streamed_encoder_decoder import StreamedEncoderDecoder  # noqa: F401
    __all__ += ['StreamedEncoderDecoder', 'StreamedSegmentation', 'StreamedSegmentationMemory']
