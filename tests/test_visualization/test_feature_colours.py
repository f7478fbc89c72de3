"""Dense features as colours: PCA's three main directions and UMAP's 3-D embedding, both scaled
to RGB."""
import sys
from types import ModuleType

import numpy as np
import pytest
import torch

from mmlinear.visualization import pca_rgb, umap_rgb


def test_pca_colours_follow_the_main_directions():
    torch.manual_seed(0)
    features = torch.randn(2, 16, 6, 6) * 0.01
    features[:, 3] += torch.linspace(-5, 5, 6)  # the dominant variation runs along W
    colours = pca_rgb(features, quantile=0.0)
    assert colours.shape == (2, 3, 6, 6)
    assert float(colours.min()) == 0. and float(colours.max()) == 1.
    first = colours[:, 0]
    # The first component orders the columns (up to its arbitrary sign).
    profile = first.mean(dim=(0, 1))
    assert bool((profile.diff() > 0).all() or (profile.diff() < 0).all())
    with pytest.raises(ValueError, match='at least 3 channels, got 2'):
        pca_rgb(torch.randn(1, 2, 4, 4))


def two_kinds_of_patch(seed: int = 0):
    """Two 8 x 8 maps of 32-channel features, the left half of each of one kind and the right
    half of another (the kinds differ in every channel), with noise; and the mask of the right
    half, (2, 8, 8)."""
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(2, 32, generator=generator) * 3
    right = torch.zeros(2, 8, 8, dtype=torch.bool)
    right[..., 4:] = True
    features = centres[right.long()].permute(0, 3, 1, 2)  # (2, 32, 8, 8)
    return features + 0.3 * torch.randn(features.shape, generator=generator), right


def test_umap_colours_are_the_embedding_scaled_with_the_settings_given(monkeypatch):
    """The function's own part, without numba's compilation: umap-learn gets every vector in
    image, row, column order with three components and the settings, and its embedding comes
    back as colours on the map."""
    calls = []

    class FakeUMAP:

        def __init__(self, **settings):
            calls.append(settings)

        def fit_transform(self, vectors):
            calls.append(vectors)
            return vectors[:, :3] * 10

    fake = ModuleType('umap')
    fake.UMAP = FakeUMAP
    monkeypatch.setitem(sys.modules, 'umap', fake)
    features, _ = two_kinds_of_patch()
    colours = umap_rgb(features, n_neighbors=7, min_dist=0.2, seed=3, quantile=0.0)
    assert calls[0] == dict(n_components=3, n_neighbors=7, min_dist=0.2, random_state=3, n_jobs=1)
    np.testing.assert_array_equal(calls[1], features.permute(0, 2, 3, 1).reshape(-1, 32).numpy())
    low, high = features[:, :3].amin(dim=(0, 2, 3)), features[:, :3].amax(dim=(0, 2, 3))
    torch.testing.assert_close(colours,
                               (features[:, :3] - low[:, None, None]) / (high - low)[:, None, None])


@pytest.mark.parametrize('shape,n_neighbors,message', [
    ((1, 8, 3, 5), 15, r'n_neighbors=15 needs more than 15 feature vectors, got 15'),
    ((2, 8, 4, 4), 1, 'n_neighbors must be at least 2, got 1'),
])
def test_umap_refuses_too_few_vectors_before_loading_umap_learn(shape, n_neighbors, message):
    with pytest.raises(ValueError, match=message):
        umap_rgb(torch.randn(shape), n_neighbors=n_neighbors)


@pytest.mark.slow
def test_umap_gives_each_kind_of_patch_its_own_colour_and_the_same_every_time():
    """umap-learn itself (numba compiles it on the first call: tens of seconds)."""
    features, right = two_kinds_of_patch()
    colours = umap_rgb(features, n_neighbors=10)
    assert colours.shape == (2, 3, 8, 8) and colours.dtype == torch.float32
    assert float(colours.min()) >= 0 and float(colours.max()) <= 1
    pixels = colours.permute(0, 2, 3, 1)  # (2, 8, 8, 3)
    left_mean, right_mean = pixels[~right].mean(0), pixels[right].mean(0)
    spread = max(float(pixels[~right].std(0).max()), float(pixels[right].std(0).max()))
    assert float((left_mean - right_mean).norm()) > 4 * spread
    torch.testing.assert_close(umap_rgb(features, n_neighbors=10), colours)
