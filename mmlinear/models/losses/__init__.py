"""Losses for mmseg (registered only where mmseg is installed)."""
import importlib.util

__all__ = []

if importlib.util.find_spec('mmseg') is not None:
    from .padded_cross_entropy_loss import PaddedCrossEntropyLoss  # noqa: F401
    __all__.append('PaddedCrossEntropyLoss')
