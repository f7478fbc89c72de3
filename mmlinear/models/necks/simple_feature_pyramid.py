"""A feature pyramid from one stride-16 map (ViTDet's simple pyramid)."""
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch.nn.functional as F
from mmengine.model import BaseModule
from torch import Tensor, nn

from mmlinear.registry import MODELS
from ..layers import LayerNorm2d
from ..streaming.band_resize import Span, check_span, crop_band, expand_span


def _rescale_branch(channels: int, scale: float) -> Tuple[nn.Module, int]:
    """Return the resampling branch for one scale factor and its output channel count."""
    if scale == 4.0:
        return nn.Sequential(
            nn.ConvTranspose2d(channels, channels // 2, 2, stride=2), LayerNorm2d(channels // 2),
            nn.GELU(), nn.ConvTranspose2d(channels // 2, channels // 4, 2, stride=2)), channels // 4
    if scale == 2.0:
        return nn.ConvTranspose2d(channels, channels // 2, 2, stride=2), channels // 2
    if scale == 1.0:
        return nn.Identity(), channels
    if scale == 0.5:
        return nn.MaxPool2d(2, ceil_mode=True), channels
    raise ValueError(f'unsupported scale factor {scale}; allowed: 4.0, 2.0, 1.0, 0.5')


@MODELS.register_module()
class SimpleFeaturePyramid(BaseModule):
    """Turn the single map of a plain backbone into a multi-scale pyramid.

    From a stride-16 map, the default scales (4, 2, 1, 0.5) give strides 4/8/16/32:
    x4 = two 2x2 transposed convs with LayerNorm and GELU between (C/4 channels), x2 = one
    transposed conv (C/2), x1 = identity, x0.5 = 2x2 max-pool. With ``out_channels`` each level
    then gets a 1x1 and a 3x3 conv with LayerNorm to ``out_channels`` (ViTDet), so the neck can
    feed RPN/RoI heads directly; ``num_outs`` above the number of scales adds levels by
    stride-2 max-pooling of the last one (Mask R-CNN needs 5). Without ``out_channels`` the
    resampled maps are returned as they are (for UperNet, which has its own lateral convs).
    Odd-sized maps work: a 0.5 level rounds up.

    Args:
        in_channels (int): Channels C of the backbone map.
        out_channels (int, optional): Channels of every output level. Defaults to None.
        scale_factors (Sequence[float]): Resampling factors, each one of 4.0, 2.0, 1.0, 0.5.
            Defaults to (4.0, 2.0, 1.0, 0.5).
        num_outs (int, optional): Number of outputs; defaults to ``len(scale_factors)``.
        in_index (int): Which entry of the backbone's tuple to use. Defaults to -1.
        init_cfg (dict | list[dict], optional): Initialisation config.
    """

    def __init__(self,
                 in_channels: int,
                 out_channels: Optional[int] = None,
                 scale_factors: Sequence[float] = (4.0, 2.0, 1.0, 0.5),
                 num_outs: Optional[int] = None,
                 in_index: int = -1,
                 init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        if in_channels % 4 != 0:
            raise ValueError(f'in_channels must be divisible by 4, got {in_channels}')
        self.num_outs = len(scale_factors) if num_outs is None else num_outs
        if self.num_outs < len(scale_factors):
            raise ValueError(f'num_outs ({self.num_outs}) must be at least the number of scale '
                             f'factors ({len(scale_factors)})')
        if self.num_outs > len(scale_factors) and out_channels is None:
            raise ValueError('extra levels (num_outs > len(scale_factors)) need out_channels')
        self.in_index = in_index
        self.scale_factors = tuple(float(scale) for scale in scale_factors)
        self.rescales = nn.ModuleList()
        self.out_convs = nn.ModuleList()
        for scale in scale_factors:
            branch, channels = _rescale_branch(in_channels, float(scale))
            self.rescales.append(branch)
            if out_channels is not None:
                self.out_convs.append(
                    nn.Sequential(
                        nn.Conv2d(channels, out_channels, 1, bias=False), LayerNorm2d(out_channels),
                        nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False),
                        LayerNorm2d(out_channels)))

    def forward(self, inputs: Union[Tensor, Sequence[Tensor]]) -> Tuple[Tensor, ...]:
        """Args:
            inputs (Tensor | Sequence[Tensor]): The backbone's (B, C, H, W) map, or its tuple
                of maps (``in_index`` picks one).

        Returns:
            tuple[Tensor, ...]: ``num_outs`` contiguous maps, finest first.
        """
        x = inputs if isinstance(inputs, Tensor) else inputs[self.in_index]
        outs = [branch(x) for branch in self.rescales]
        if len(self.out_convs):
            outs = [conv(out) for conv, out in zip(self.out_convs, outs)]
        while len(outs) < self.num_outs:
            outs.append(F.max_pool2d(outs[-1], 1, stride=2))
        # The backbone's token map and LayerNorm2d's output are permuted views (channels-last
        # memory). mmcv's RoIAlign reads its input as raw NCHW memory, so on such views Mask
        # R-CNN's box and mask heads would pool scrambled features.
        return tuple(out.contiguous() for out in outs)

    def level_shapes(self, map_shape: Tuple[int, int]) -> List[Tuple[int, int]]:
        """The (H, W) of every output level for a backbone map of ``map_shape`` (H, W).

        Returns:
            list[tuple[int, int]]: ``num_outs`` shapes, finest first.
        """
        shapes = []
        for scale in self.scale_factors:
            if scale >= 1:
                factor = int(scale)
                shapes.append((map_shape[0] * factor, map_shape[1] * factor))
            else:  # the 2 x 2 max-pool rounds up
                shapes.append((-(-map_shape[0] // 2), -(-map_shape[1] // 2)))
        while len(shapes) < self.num_outs:
            shapes.append((-(-shapes[-1][0] // 2), -(-shapes[-1][1] // 2)))
        return shapes

    def forward_rows(self, read_map: Callable[[Span], Tensor], map_shape: Tuple[int, int],
                     level: int, span: Span) -> Tensor:
        """Rows ``span`` of output ``level`` of :meth:`forward`, from the backbone map rows
        they need (for inference over bands of rows).

        Each resampling branch is local in rows: a transposed 2 x 2 convolution of stride 2
        makes output rows 2r and 2r + 1 from row r alone, the 2 x 2 max-pool output row r from
        rows 2r and 2r + 1, so a band starting on the branch's stride gives exactly the whole
        map's rows; the 3 x 3 convolution of ``out_channels`` reads one row of halo.

        Args:
            read_map (Callable[[Span], Tensor]): Returns rows (start, stop) of the backbone map
                as (B, C, stop - start, W).
            map_shape (tuple[int, int]): (H, W) of the whole backbone map.
            level (int): The output level, in [0, num_outs).
            span (Span): Its rows.

        Returns:
            Tensor: (B, C_level, span rows, W_level), contiguous.
        """
        if not 0 <= level < self.num_outs:
            raise ValueError(f'level must be in [0, {self.num_outs}), got {level}')
        shapes = self.level_shapes(map_shape)
        check_span(span, shapes[level][0])
        return self._level_rows(read_map, map_shape, shapes, level, span).contiguous()

    def _level_rows(self, read_map: Callable[[Span], Tensor], map_shape: Tuple[int, int],
                    shapes: List[Tuple[int, int]], level: int, span: Span) -> Tensor:
        if level >= len(self.scale_factors):  # an extra level: stride-2 pick of the one above
            start, stop = span
            above = self._level_rows(read_map, map_shape, shapes, level - 1,
                                     (2 * start, min(2 * stop - 1, shapes[level - 1][0])))
            return above[:, :, ::2, ::2]
        if not len(self.out_convs):
            return self._resampled_rows(read_map, map_shape, level, span)
        # The 3 x 3 convolution after the resampling reads one row on each side.
        wide = expand_span(span, 1, shapes[level][0])
        rows = self.out_convs[level](self._resampled_rows(read_map, map_shape, level, wide))
        return crop_band(rows, wide[0], span)

    def _resampled_rows(self, read_map: Callable[[Span], Tensor], map_shape: Tuple[int, int],
                        level: int, span: Span) -> Tensor:
        """Rows ``span`` of a resampling branch's output (before ``out_convs``)."""
        scale, branch = self.scale_factors[level], self.rescales[level]
        start, stop = span
        if scale < 1:
            return branch(read_map((2 * start, min(2 * stop, map_shape[0]))))
        factor = int(scale)
        first = start // factor
        rows = branch(read_map((first, -(-stop // factor))))
        return crop_band(rows, first * factor, span)
