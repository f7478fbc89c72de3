"""mmdet's two-stage detectors run over bands of rows, defined only where mmdet is installed
(mmlinear itself does not need it)."""
import importlib.util

__all__ = []

if importlib.util.find_spec('mmdet') is not None:
    from ..streaming.detection import StreamedDetection, StreamedDetectionMemory  # noqa: F401
    from .streamed_two_stage import StreamedTwoStageDetector  # noqa: F401
    __all__ += ['StreamedDetection', 'StreamedDetectionMemory', 'StreamedTwoStageDetector']
