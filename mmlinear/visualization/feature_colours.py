"""Dense features as colours: each feature vector projected to three components, shown as RGB
(as DINO shows its features): by PCA, the three directions of largest variance, or by UMAP
(umap-learn), a 3-D embedding that keeps each vector's nearest neighbours near."""
import torch
from torch import Tensor


def feature_vectors(features: Tensor) -> Tensor:
    """(B, C, H, W) dense features as (B * H * W, C) float32 vectors, image by image and row
    by row."""
    return features.float().permute(0, 2, 3, 1).reshape(-1, features.shape[1])


def components_rgb(components: Tensor, shape: torch.Size, quantile: float) -> Tensor:
    """Three components per vector as colours in [0, 1], back on the feature map.

    Each component is scaled between its ``quantile`` and ``1 - quantile`` values over all the
    vectors and clipped, so a few outliers do not wash out the rest.

    Args:
        components (Tensor): (B * H * W, 3), in the order of :func:`feature_vectors`.
        shape (torch.Size): The features' (B, C, H, W).
        quantile (float): Share of the values clipped at each end.

    Returns:
        Tensor: (B, 3, H, W) float32 colours.
    """
    B, _, H, W = shape
    low = torch.quantile(components, quantile, dim=0)
    high = torch.quantile(components, 1 - quantile, dim=0)
    colours = ((components - low) / (high - low).clamp(min=1e-12)).clamp(0, 1)
    return colours.reshape(B, H, W, 3).permute(0, 3, 1, 2)


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
    C = features.shape[1]
    if C < 3:
        raise ValueError(f'three components need at least 3 channels, got {C}')
    vectors = feature_vectors(features)
    vectors = vectors - vectors.mean(dim=0)
    # The right singular vectors are the principal directions.
    _, _, directions = torch.linalg.svd(vectors, full_matrices=False)
    return components_rgb(vectors @ directions[:3].T, features.shape, quantile)


def umap_rgb(features: Tensor,
             n_neighbors: int = 15,
             min_dist: float = 0.1,
             seed: int = 0,
             quantile: float = 0.01) -> Tensor:
    """A 3-D UMAP embedding (umap-learn) of every feature vector, as RGB in [0, 1].

    One embedding of all the vectors of the batch, so a colour means the same neighbourhood
    in every image. Where PCA keeps the directions of largest variance, UMAP keeps each
    vector's ``n_neighbors`` nearest neighbours (Euclidean) near: vectors of one kind get
    one colour even where the kinds differ along more than three directions. The axes of an
    embedding mean nothing, so colours compare within one call; each is scaled as in
    :func:`pca_rgb`. With a seed umap-learn runs on one thread and gives the same embedding
    every time; its first call in a process compiles its kernels with numba (tens of seconds).

    Args:
        features (Tensor): (B, C, H, W) dense features; B * H * W > ``n_neighbors``.
        n_neighbors (int): The neighbourhood UMAP keeps, in vectors. Defaults to 15.
        min_dist (float): How tightly UMAP packs neighbours. Defaults to 0.1.
        seed (int): UMAP's random state. Defaults to 0.
        quantile (float): Share of the values clipped at each end. Defaults to 0.01.

    Returns:
        Tensor: (B, 3, H, W) float32 colours.
    """
    vectors = feature_vectors(features)
    if n_neighbors < 2:
        raise ValueError(f'n_neighbors must be at least 2, got {n_neighbors}')
    if len(vectors) <= n_neighbors:
        raise ValueError(f'UMAP with n_neighbors={n_neighbors} needs more than {n_neighbors} '
                         f'feature vectors, got {len(vectors)} (B * H * W): give more images or '
                         'a smaller n_neighbors')
    # Imported here: umap-learn's import loads numba, seconds that the PCA path never needs.
    import umap
    embedding = umap.UMAP(
        n_components=3, n_neighbors=n_neighbors, min_dist=min_dist, random_state=seed,
        n_jobs=1).fit_transform(vectors.numpy())
    return components_rgb(torch.from_numpy(embedding).float(), features.shape, quantile)
