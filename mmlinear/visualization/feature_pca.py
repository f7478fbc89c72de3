"""Dense features as colours: their first three principal components as RGB (as DINO shows)."""
import torch
from torch import Tensor


def pca_rgb(features: Tensor, quantile: float = 0.01) -> Tensor:
    """The first three principal components of every feature vector, as RGB in [0, 1].

    One PCA is fitted over all the vectors of the batch, so a colour means the same
    direction in every image; each component is scaled between its ``quantile`` and
    ``1 - quantile`` values over the batch and clipped (so a few outliers do not wash out
    the rest). The sign of a component is arbitrary, so colours compare within one call.

    Args:
        features (Tensor): (B, C, H, W) dense features, C >= 3.
        quantile (float): Share of the values clipped at each end. Defaults to 0.01.

    Returns:
        Tensor: (B, 3, H, W) float32 colours.
    """
    B, C, H, W = features.shape
    if C < 3:
        raise ValueError(f'three components need at least 3 channels, got {C}')
    vectors = features.float().permute(0, 2, 3, 1).reshape(-1, C)
    vectors = vectors - vectors.mean(dim=0)
    # The right singular vectors are the principal directions.
    _, _, directions = torch.linalg.svd(vectors, full_matrices=False)
    components = vectors @ directions[:3].T
    low = torch.quantile(components, quantile, dim=0)
    high = torch.quantile(components, 1 - quantile, dim=0)
    colours = ((components - low) / (high - low).clamp(min=1e-12)).clamp(0, 1)
    return colours.reshape(B, H, W, 3).permute(0, 3, 1, 2)
