"""How large the region a VECA core attends to is, and which core each patch belongs to."""
from torch import Tensor


def _per_core_distribution(attention: Tensor) -> Tensor:
    """Each core's non-negative weights over the patches, scaled to sum to 1."""
    if attention.ndim < 2:
        raise ValueError(f'attention must be (..., K, N) core rows over the patches, got shape '
                         f'{tuple(attention.shape)}')
    if bool((attention < 0).any()):
        raise ValueError('attention weights must be non-negative')
    attention = attention.float()
    return attention / attention.sum(dim=-1, keepdim=True).clamp(min=1e-12)


def half_mass_area(attention: Tensor, mass: float = 0.5) -> Tensor:
    """The fewest patches that hold ``mass`` of a core's attention over the patches.

    Each core's row is restricted to the patches and scaled to sum to 1 (a core also attends
    to the cores, which have no place in the image); its patches are taken from the most to
    the least attended until their weights reach ``mass``. A core that spreads evenly over
    ``A`` patches has area ``mass * A`` (rounded up); one that looks at a single patch has
    area 1. Larger, coarser regions give larger areas.

    Args:
        attention (Tensor): (..., K, N) non-negative attention of K cores over N patches
            (e.g. a block's (B, K, N) core rows of
            :meth:`~mmlinear.models.VECA.forward_attention_maps`, averaged over the heads, the
            core columns removed).
        mass (float): The share of the attention to hold, in (0, 1]. Defaults to 0.5.

    Returns:
        Tensor: (..., K) float32 number of patches per core, in [1, N].
    """
    if not 0 < mass <= 1:
        raise ValueError(f'mass must lie in (0, 1], got {mass}')
    weights = _per_core_distribution(attention).sort(dim=-1, descending=True).values
    held = weights.cumsum(dim=-1)
    # The patches before the one that reaches the mass, plus that one; the tolerance keeps a
    # rounding error of the cumulative sum from counting one patch too many.
    return (held < mass - 1e-6).sum(dim=-1).float() + 1


def core_partition(attention: Tensor) -> Tensor:
    """Every patch assigned to the core that gives it the largest share of its attention.

    Each core's weights over the patches are first scaled to sum to 1, so a core that
    spreads over a large region does not lose every patch to a core that looks at a few: a
    patch goes to the core for which it weighs most. The regions drawn per budget show how
    the image is divided among the cores.

    Args:
        attention (Tensor): (..., K, N) non-negative attention of K cores over N patches.

    Returns:
        Tensor: (..., N) int64 core index per patch.
    """
    return _per_core_distribution(attention).argmax(dim=-2)
