"""mmdet's dense heads over bands of rows, defined only where mmdet is installed (mmlinear
itself does not need it)."""
import importlib.util

__all__ = []

if importlib.util.find_spec('mmdet') is not None:
    from .rpn_head_bands import RPNHeadBands, check_rpn_head  # noqa: F401
    __all__ += ['RPNHeadBands', 'check_rpn_head']
