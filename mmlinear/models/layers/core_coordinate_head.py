"""The coordinate head that moves the VECA cores from layer to layer (VECA paper, Fig. 2)."""
from typing import Tuple

import torch
from torch import Tensor, nn


def build_coordinate_head(embed_dims: int,
                          num_layers: int,
                          alpha_init: float = 0.01) -> Tuple[nn.ModuleList, nn.Parameter]:
    """One ``Linear(C, 2)`` per layer after the first, and one gain per such layer.

    Args:
        embed_dims (int): Token width C.
        num_layers (int): Blocks L.
        alpha_init (float): Initial gains. Defaults to 0.01.

    Returns:
        tuple[ModuleList, Parameter]: ``pos_linears`` (L - 1 linears) and ``pos_alpha``
        (L - 1, ), the released key names.
    """
    linears = nn.ModuleList(nn.Linear(embed_dims, 2) for _ in range(num_layers - 1))
    alpha = nn.Parameter(torch.full((num_layers - 1, ), float(alpha_init)))
    return linears, alpha


def move_cores(raw_coords: Tensor, cores: Tensor, linear: nn.Linear, alpha: Tensor) -> Tensor:
    """``raw + alpha * linear(cores)``: one coordinate update, before the next block.

    The update accumulates in pre-tanh space across layers (a residual path for positions);
    callers take ``tanh`` of the result, which keeps the cores inside (-1, 1).

    Args:
        raw_coords (Tensor): (B, K, 2) raw coordinates used by the previous block.
        cores (Tensor): (B, K, C) the cores' residual stream after the previous block (not
            normalised, as the reference).
        linear (nn.Linear): This layer's ``Linear(C, 2)``.
        alpha (Tensor): () this layer's gain.

    Returns:
        Tensor: (B, K, 2) updated raw coordinates.
    """
    delta = linear(cores)
    return raw_coords + alpha.to(delta.dtype) * delta
