import math

import pytest
import torch

from mmlinear.visualization import (foreground_background_cosine, global_patch_cosine,
                                    map_correlation)


def test_global_patch_cosine_matches_the_plain_formula():
    torch.manual_seed(0)
    global_token, patches = torch.randn(2, 5), torch.randn(2, 5, 3, 4)
    cosine = global_patch_cosine(global_token, patches)
    assert cosine.shape == (2, 3, 4)
    for b in range(2):
        for i in range(3):
            for j in range(4):
                g, p = global_token[b], patches[b, :, i, j]
                plain = float(g @ p) / math.sqrt(float(g @ g) * float(p @ p))
                assert float(cosine[b, i, j]) == pytest.approx(plain, abs=1e-6)
    # The same direction scores 1, the opposite -1, whatever the lengths.
    same = global_patch_cosine(
        torch.tensor([[1.0, 2.0]]), torch.tensor([[[[3.0, -2.0]], [[6.0, -4.0]]]]))
    assert same.flatten().tolist() == pytest.approx([1.0, -1.0])


def test_object_and_background_means_follow_the_patches_majority_label():
    cosine = torch.tensor([[[0.9, 0.1], [0.5, -0.3]]])  # 2 x 2 patches of 2 x 2 pixels
    labels = torch.zeros(1, 4, 4, dtype=torch.long)
    labels[0, :2, :2] = 3  # patch (0, 0) wholly an object
    labels[0, 2:, :2] = 1
    labels[0, 2, 0] = 0  # patch (1, 0): 3 of 4 pixels an object
    labels[0, :1, 2:] = 2  # patch (0, 1): 2 of 4 pixels, not more than half: background
    objects, background = foreground_background_cosine(cosine, labels)
    assert objects.tolist() == pytest.approx([(0.9 + 0.5) / 2])
    assert background.tolist() == pytest.approx([(0.1 - 0.3) / 2])
    # Another background label; an image with no object patch gives NaN for them.
    objects, background = foreground_background_cosine(cosine, torch.full((1, 4, 4), 7), 7)
    assert math.isnan(float(objects)) and float(background) == pytest.approx(0.3)
    # A map that is not a whole number of patches is padded with background: 3 x 3 pixels
    # in 2 x 2 patches of 2 x 2 pixels.
    labels = torch.zeros(1, 3, 3, dtype=torch.long)
    labels[0, :2, :2] = 1  # patch (0, 0) wholly an object
    labels[0, 2, 2] = 1  # patch (1, 1): 1 object pixel of 4 after padding: background
    objects, background = foreground_background_cosine(cosine, labels)
    assert objects.tolist() == pytest.approx([0.9])
    assert background.tolist() == pytest.approx([(0.1 + 0.5 - 0.3) / 3])
    with pytest.raises(ValueError, match=r'at least as large as their grid \(2, 2\), got'):
        foreground_background_cosine(cosine, torch.zeros(1, 1, 4, dtype=torch.long))


def test_map_correlation_is_pearson_per_image_across_grids():
    torch.manual_seed(0)
    maps, others = torch.randn(3, 4, 4), torch.randn(3, 4, 4)
    expected = [
        float(torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1])
        for a, b in zip(maps, others)
    ]
    assert map_correlation(maps, others).tolist() == pytest.approx(expected, abs=1e-6)
    assert map_correlation(maps, 2 * maps + 1).tolist() == pytest.approx([1.0] * 3)
    # A coarser grid is resampled to the first one's: a constant-per-half map stays perfectly
    # correlated with its finer copy.
    coarse = torch.tensor([[[0.0, 1.0], [0.0, 1.0]]])
    fine = coarse.repeat_interleave(2, 1).repeat_interleave(2, 2)
    assert float(map_correlation(fine, coarse)) > 0.9
    with pytest.raises(ValueError, match='of the same B'):
        map_correlation(maps, others[:2])
