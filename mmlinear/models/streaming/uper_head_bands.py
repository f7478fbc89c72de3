"""mmseg's UPerHead evaluated over bands of rows of its finest level, for images of any size."""
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
from mmseg.models.decode_heads import UPerHead
from torch import Tensor, nn

from ..utils import AdaptivePoolSums
from ..utils.windowed_pyramid_pooling import (ContextWindow, check_context_window, window_span,
                                              windowed_pyramid_pooling)
from .band_resize import (Span, check_span, crop_band, expand_span, resize_band, source_span,
                          union_span)
from .token_stream import row_bands

#: Reads rows ``span`` of pyramid level ``level``: ``read(level, span) -> (B, C, rows, W)``.
LevelReader = Callable[[int, Span], Tensor]


def conv_band(conv: nn.Module, band: Tensor, band_start: int, span: Span) -> Tensor:
    """Rows ``span`` of a stride-1 convolution (with its norm and activation) of a map, from a
    band of its input that holds the convolution's halo around ``span``."""
    return crop_band(conv(band), band_start, span)


def check_uper_head(head: nn.Module) -> None:
    """Raise a TypeError / ValueError unless ``head`` is a UPerHead that runs over bands."""
    if not isinstance(head, UPerHead):
        raise TypeError(f'the decode head runs over bands of rows for UPerHead only, got '
                        f'{type(head).__name__}')
    if head.input_transform != 'multiple_select':
        raise ValueError(f"UPerHead over bands takes input_transform='multiple_select', got "
                         f'{head.input_transform!r}')


class UPerHeadBands:
    """An mmseg ``UPerHead`` run over bands of rows of its finest input level.

    Everything UPerHead computes is local in rows except the pyramid pooling module, whose
    adaptive average pools see the whole top level: :meth:`pool` accumulates them band by band
    (:class:`~mmlinear.models.utils.AdaptivePoolSums`) once per image. With a context window
    (:class:`~mmlinear.models.decode_heads.ContextWindowUPerHead`) the pooling is local in
    rows too: each band reads the rows its positions' windows cover and pools them there
    (:func:`~mmlinear.models.utils.windowed_pyramid_pooling.windowed_pyramid_pooling`),
    and :meth:`pool` has nothing to do. :meth:`logits` then
    gives any band of rows of the head's output: it plans the rows each intermediate map
    needs (one row of halo per 3 x 3 convolution, the two source rows per bilinear row), reads
    those rows of the levels and runs UPerHead's own modules on them, so only bands are ever
    held, and the rows equal the whole map's up to rounding.

    Args:
        head (UPerHead): An mmseg UPerHead, in eval mode.
        level_shapes (Sequence[tuple[int, int]]): (H, W) of every level the neck gives.
        read_level (LevelReader): Rows of a neck level (indexed as ``head.in_index`` indexes
            the neck's outputs).
        context_window (None | int | tuple[int, int]): The pyramid pooling's window (rows,
            columns) in cells of the top level, as ``ContextWindowUPerHead`` takes it; None
            (default) pools the whole top level. A window at least the top level's size is
            the whole level.
    """

    def __init__(self,
                 head: nn.Module,
                 level_shapes: Sequence[Tuple[int, int]],
                 read_level: LevelReader,
                 context_window: ContextWindow = None) -> None:
        check_uper_head(head)
        self.head = head
        self.levels = list(head.in_index)
        self.shapes = [tuple(level_shapes[level]) for level in self.levels]
        self._read_level = read_level
        self._pooled: Optional[List[Tensor]] = None
        window = check_context_window(context_window)
        top = self.shapes[-1]
        # A window that holds the whole top level is the whole-level pooling, done once.
        self.context_window = None if window is None or (window[0] >= top[0]
                                                         and window[1] >= top[1]) else window

    def read(self, index: int, span: Span) -> Tensor:
        """Rows ``span`` of the head's input ``index`` (its ``in_index``-th neck level)."""
        return self._read_level(self.levels[index], span)

    @property
    def pool_scales(self) -> List[int]:
        """The output sizes of the pyramid pooling's adaptive pools."""
        return [int(scale[0].output_size) for scale in self.head.psp_modules]

    def pool(self, head_rows: int) -> None:
        """Pool the whole top level (the pyramid pooling module's pools and 1 x 1
        convolutions), reading it in bands of ``head_rows`` rows; nothing with a context
        window (each band pools its own windows)."""
        if self.context_window is not None:
            return
        top = len(self.levels) - 1
        sums = [AdaptivePoolSums(self.shapes[top], scale) for scale in self.pool_scales]
        dtype = None
        for span in row_bands(self.shapes[top][0], head_rows):
            band = self.read(top, span)
            dtype = band.dtype
            for pool_sums in sums:
                pool_sums.add(band, span[0])
        self._pooled = [
            scale[1](pool_sums.result().to(dtype))
            for scale, pool_sums in zip(self.head.psp_modules, sums)
        ]

    def plan(self, span: Span) -> Dict[str, List[Span]]:
        """The rows of every intermediate map that output rows ``span`` need.

        Returns:
            dict[str, list[Span]]: Per level: 'fpn' (the FPN outputs, before their resize to
            the finest level), 'top_down' (laterals plus the top-down path), and 'psp' (one
            entry: the top level's rows around the bottleneck), 'window' (one entry: the top
            level's rows read, those of 'psp' and, with a context window, the rows their
            windows cover); 'output' and 'concat' (one entry each, on the finest level).
        """
        align, heights = self.head.align_corners, [h for h, _ in self.shapes]
        num_levels = len(heights)
        check_span(span, heights[0])
        concat = expand_span(span, 1, heights[0])  # fpn_bottleneck is 3 x 3
        fpn = [concat] + [
            source_span(concat, heights[i], heights[0], align) for i in range(1, num_levels)
        ]
        top_down = [expand_span(fpn[0], 1, heights[0])]  # fpn_convs are 3 x 3
        for i in range(1, num_levels):
            own = expand_span(fpn[i], 1, heights[i]) if i < num_levels - 1 else fpn[i]
            coarser = source_span(top_down[i - 1], heights[i], heights[i - 1], align)
            top_down.append(union_span(own, coarser))
        psp = expand_span(top_down[-1], 1, heights[-1])  # the bottleneck is 3 x 3
        window = psp if self.context_window is None else window_span(psp, heights[-1],
                                                                     self.context_window[0])
        return dict(
            output=[span], concat=[concat], fpn=fpn, top_down=top_down, psp=[psp], window=[window])

    def band_elements(self, span: Span) -> int:
        """Values per image held at once by :meth:`logits` for ``span`` (every intermediate
        band, for the memory model)."""
        head, plan = self.head, self.plan(span)
        widths = [w for _, w in self.shapes]
        rows = lambda s: s[1] - s[0]  # noqa: E731
        channels, num_levels = head.channels, len(self.shapes)
        total = rows(plan['psp'][0]) * widths[-1] * (
            head.in_channels[-1] * 2 + len(self.pool_scales) * channels)
        if self.context_window is not None:
            # The band of the windows, its float64 running sums (two values each), and a
            # branch's four float64 corner reads of the running sums with its box means.
            total += rows(plan['window'][0]) * widths[-1] * head.in_channels[-1] * 3
            total += rows(plan['psp'][0]) * widths[-1] * (head.in_channels[-1] * 10 + channels)
        for i in range(num_levels):
            total += rows(plan['top_down'][i]) * widths[i] * (head.in_channels[i] + 2 * channels)
            total += rows(plan['fpn'][i]) * widths[i] * channels
        concat = rows(plan['concat'][0]) * widths[0]
        total += concat * channels * num_levels * 2 + rows(span) * widths[0] * (
            channels + head.out_channels)
        return total

    def logits(self, span: Span) -> Tensor:
        """Rows ``span`` of ``head.forward(levels)``, the finest level's class scores.

        Returns:
            Tensor: (B, num_classes, span rows, W of the finest level).
        """
        if self._pooled is None and self.context_window is None:
            raise RuntimeError('call pool() first: the pyramid pooling sees the whole top map')
        head, plan = self.head, self.plan(span)
        align, num_levels = head.align_corners, len(self.shapes)
        # The top level through the pyramid pooling module.
        psp_span, window = plan['psp'][0], plan['window'][0]
        top = self.read(num_levels - 1, window)
        if self.context_window is None:
            pooled = [
                resize_band(p, 0, psp_span, p.shape[2], self.shapes[-1], align)
                for p in self._pooled
            ]
        else:
            pooled = windowed_pyramid_pooling(head.psp_modules, top, window[0], psp_span,
                                              self.shapes[-1], self.context_window, align)
            top = crop_band(top, window[0], psp_span)
        top_down: List[Optional[Tensor]] = [None] * num_levels
        top_down[-1] = conv_band(head.bottleneck, torch.cat([top, *pooled], 1), psp_span[0],
                                 plan['top_down'][-1])
        del top, pooled
        # The top-down path: each lateral plus the resized coarser level.
        for i in range(num_levels - 2, -1, -1):
            span_i, coarser = plan['top_down'][i], plan['top_down'][i + 1]
            top_down[i] = head.lateral_convs[i](self.read(i, span_i)) + resize_band(
                top_down[i + 1], coarser[0], span_i, self.shapes[i + 1][0], self.shapes[i], align)
        fpn = [
            conv_band(head.fpn_convs[i], top_down[i], plan['top_down'][i][0], plan['fpn'][i])
            for i in range(num_levels - 1)
        ]
        fpn.append(crop_band(top_down[-1], plan['top_down'][-1][0], plan['fpn'][-1]))
        del top_down
        concat = plan['concat'][0]
        ups = [fpn[0]] + [
            resize_band(fpn[i], plan['fpn'][i][0], concat, self.shapes[i][0], self.shapes[0], align)
            for i in range(1, num_levels)
        ]
        del fpn
        feats = conv_band(head.fpn_bottleneck, torch.cat(ups, 1), concat[0], span)
        return head.cls_seg(feats)
