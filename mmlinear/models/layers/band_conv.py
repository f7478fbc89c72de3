"""A 3 x 3 same-padded convolution over a band of rows of a map, from the band and its halo."""
from typing import Callable, Optional

import torch
from torch import Tensor


def band_conv3x3(conv: Callable[[Tensor], Tensor],
                 band: Tensor,
                 above: Optional[Tensor] = None,
                 below: Optional[Tensor] = None) -> Tensor:
    """The rows of a band of a 3 x 3 convolution's output (stride 1, zero padding 1).

    Output row r reads the input rows r - 1 to r + 1, so the band's first and last output
    rows need the input row above and the one below the band: its halo. At the map's top or
    bottom border there is no such row and the convolution's own zero padding stands in for
    it. ``conv`` therefore runs on the band stacked between its halo rows, and the halo rows'
    own outputs (whose outer neighbours are missing) are dropped. With a padding mask, the
    halo rows must have their padded tokens zero-filled as the band's are.

    Args:
        conv (callable): The convolution of a whole (B, C, h, W) map, same-size output, e.g.
            ``WeightFormerBlock._static_dwconv`` or
            ``functools.partial(dynamic_dwconv2d, weight=kernels, bias=bias)``.
        band (Tensor): (B, C, rows, W), the input rows [r0, r1).
        above (Tensor, optional): (B, C, 1, W), the input row r0 - 1; None when r0 = 0.
        below (Tensor, optional): (B, C, 1, W), the input row r1; None when r1 is the map's
            last row + 1.

    Returns:
        Tensor: (B, C, rows, W), the rows [r0, r1) of ``conv`` of the whole map.
    """
    if band.dim() != 4 or band.shape[2] < 1:
        raise ValueError(f'band must be (B, C, rows, W) with rows >= 1, got {tuple(band.shape)}')
    expected_halo = (*band.shape[:2], 1, band.shape[3])
    for name, halo in (('above', above), ('below', below)):
        if halo is not None and tuple(halo.shape) != expected_halo:
            raise ValueError(f'the halo row {name} must be one row (B, C, 1, W) = '
                             f'{expected_halo} for a 3 x 3 convolution, got {tuple(halo.shape)}')
    rows = [t for t in (above, band, below) if t is not None]
    stacked = torch.cat(rows, dim=2) if len(rows) > 1 else band
    out = conv(stacked)
    if out.shape[2:] != stacked.shape[2:]:
        raise ValueError(f'conv must keep the map size (a 3 x 3 kernel with padding 1): a '
                         f'{tuple(stacked.shape[2:])} map gave {tuple(out.shape[2:])}')
    first = 0 if above is None else 1
    return out[:, :, first:first + band.shape[2]]
