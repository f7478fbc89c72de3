"""Decode heads for mmseg (registered only where mmseg is installed): the linear probes of the
frozen-backbone dense evaluations, and UPerHead with a context window for its pyramid pooling
(mmseg's UPerHead over bands of rows is streaming code:
``mmlinear.models.streaming.uper_head_bands``)."""
import importlib.util

__all__ = []

if importlib.util.find_spec('mmseg') is not None:
    from .context_window_uper_head import ContextWindowUPerHead, context_window_of  # noqa: F401
    from .linear_depth_head import LinearDepthHead  # noqa: F401
    from .linear_head import LinearHead  # noqa: F401
    __all__ += ['ContextWindowUPerHead', 'LinearDepthHead', 'LinearHead', 'context_window_of']
