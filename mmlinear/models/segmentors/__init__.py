"""mmseg's EncoderDecoder run over bands of rows, registered only where mmseg is installed
(mmlinear itself does not need it)."""
import importlib.util

__all__ = []

if importlib.util.find_spec('mmseg') is not None:
    from .streamed_encoder_decoder import StreamedEncoderDecoder  # noqa: F401
    from .streamed_segmentation import StreamedSegmentation  # noqa: F401
    from .streamed_segmentation import StreamedSegmentationMemory
    __all__ += ['StreamedEncoderDecoder', 'StreamedSegmentation', 'StreamedSegmentationMemory']
