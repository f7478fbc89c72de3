"""The SwiGLU gate of a gated feed-forward network."""
import torch.nn.functional as F
from torch import Tensor, nn


class SwiGLU(nn.Module):
    """Split the last axis into halves (u, g), in that order, and return ``SiLU(u) * g``.

    Placed between ``fc1: Linear(C, 2 h)`` and ``fc2: Linear(h, C)`` it makes the SwiGLU MLP
    of VECA: the first h rows of ``fc1`` feed the SiLU, the last h the linear branch. It has
    no parameters, so a block keeps ``fc1`` / ``fc2`` as its own (the released key layout).
    """

    def forward(self, x: Tensor) -> Tensor:
        """x (Tensor): (..., 2 h) -> (..., h)."""
        if x.shape[-1] % 2:
            raise ValueError(f'SwiGLU needs an even last dimension, got {x.shape[-1]}')
        u, g = x.chunk(2, dim=-1)
        return F.silu(u) * g
