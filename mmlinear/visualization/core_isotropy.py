"""How isotropic a set of core tokens is: the effective rank of their spread, per layer."""
import torch
from torch import Tensor


def core_isotropy(cores: Tensor) -> Tensor:
    """Isotropy of K core tokens: the effective rank of their centred matrix over its maximum.

    The K tokens are centred on their mean; their singular values s give
    ``p = s / sum(s)`` and the effective rank ``exp(-sum p log p)`` (Roy and Vetterli, 2007):
    min(K - 1, C), the most K centred vectors can span, when the cores spread equally in
    every direction (isotropic, as randomly initialised ones), 1 when they all lie on one
    line. The result is that rank divided by min(K - 1, C), so it lies in (0, 1].

    Args:
        cores (Tensor): (..., K, C) core tokens, K >= 2 (e.g. (L, B, K, C) from
            :meth:`~mmlinear.models.VECA.core_tokens`).

    Returns:
        Tensor: (...) float32 isotropy per set of cores.
    """
    K, C = cores.shape[-2:]
    if K < 2:
        raise ValueError(f'isotropy needs at least 2 cores, got {K}')
    centred = cores.float() - cores.float().mean(dim=-2, keepdim=True)
    singular = torch.linalg.svdvals(centred)
    p = singular / singular.sum(dim=-1, keepdim=True).clamp(min=1e-12)
    entropy = -(p * p.clamp(min=1e-12).log()).sum(dim=-1)
    return entropy.exp() / min(K - 1, C)
