"""mmseg's UPerHead whose pyramid pooling may see a window around each position instead of
the whole map."""
from typing import List, Optional, Tuple

import torch
from mmseg.models.decode_heads import UPerHead
from torch import Tensor, nn

from mmlinear.registry import MODELS
from mmlinear.utils.ext_loader import exporting
from ..utils.windowed_pyramid_pooling import (ContextWindow, check_context_window,
                                              windowed_pyramid_pooling)


@MODELS.register_module()
class ContextWindowUPerHead(UPerHead):
    """mmseg's ``UPerHead`` with a context window for its pyramid pooling module (PPM).

    UPerHead pools its top input level into 1 x 1, 2 x 2, 3 x 3 and 6 x 6 bins of the whole
    map. Trained on crops, the bins are a crop's; on an image many times larger they become
    the image's, which no training has seen. With ``context_window`` each position takes the
    value the PPM gives it on the window of that size around it (centred, shifted inside the
    map at its borders), exactly, in linear time
    (:func:`~mmlinear.models.utils.windowed_pyramid_pooling.windowed_pyramid_pooling`):
    a window of the training crop's size gives every position the context it was trained
    with. Same modules and checkpoint keys as ``UPerHead``; the default (None) is UPerHead.

    Args:
        context_window (None | str | int | tuple[int, int]): None (default) or 'whole': the
            whole map, as UPerHead. Otherwise the window's (rows, columns), or one side for
            both, in cells of the top input level (for the training context: the crop size
            over that level's stride, e.g. 128 px / 16 = 8). A window at least the map's size
            is the whole map. Settable on a built head too.
        **kwargs: ``pool_scales`` and the rest of mmseg's ``UPerHead``.
    """

    def __init__(self, context_window: ContextWindow = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.context_window = context_window

    @property
    def context_window(self) -> Optional[Tuple[int, int]]:
        """tuple[int, int] | None: The window's (rows, columns) in cells of the top input
        level, or None for the whole map."""
        return self._context_window

    @context_window.setter
    def context_window(self, window: ContextWindow) -> None:
        self._context_window = check_context_window(window)

    def psp_forward(self, inputs: List[Tensor]) -> Tensor:
        """The PPM over the context window, then the bottleneck.

        Args:
            inputs (list[Tensor]): The selected levels; the last, (B, C, H, W), is pooled.

        Returns:
            Tensor: (B, channels, H, W).
        """
        x = inputs[-1]
        H, W = x.shape[2:]
        window = self.context_window
        # While exporting, the windowed pooling at every size (a window at least the map's size
        # is the whole map): a choice by the size would keep the traced size's in the graph.
        if window is None or (not exporting() and window[0] >= H and window[1] >= W):
            return super().psp_forward(inputs)
        pooled = windowed_pyramid_pooling(self.psp_modules, x, 0, (0, H), (H, W), window,
                                          self.align_corners)
        return self.bottleneck(torch.cat([x, *pooled], 1))


def context_window_of(head: nn.Module,
                      context_window: ContextWindow = None) -> Optional[Tuple[int, int]]:
    """The pyramid pooling window a whole-image run of ``head`` takes: ``context_window``
    when given, else the head's own (``ContextWindowUPerHead.context_window``; None, the
    whole map, for any other head).

    Args:
        head (nn.Module): The decode head.
        context_window (None | str | int | tuple[int, int]): An explicit window overriding
            the head's: 'whole' for the whole map, or the window's sides; None takes the
            head's own.

    Returns:
        tuple[int, int] | None: (rows, columns) in cells of the head's top input level.
    """
    if context_window is not None:
        return check_context_window(context_window)
    return head.context_window if isinstance(head, ContextWindowUPerHead) else None
