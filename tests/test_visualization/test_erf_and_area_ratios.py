"""Effective receptive fields on backbones whose reach is known from their structure."""
import pytest
import torch

from mmlinear.models import VECA, InfViT, WeightFormer
from mmlinear.visualization import area_ratios, effective_receptive_field

SIDE, PATCH = 48, 8  # a 6 x 6 token grid: the centre token is (3, 3), pixels 24-31


def images(n: int = 2) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(n, 3, SIDE, SIDE)


def built(backbone):
    backbone.init_weights()
    backbone.eval()  # mmpretrain's ViT returns None from it
    return backbone


def support(erf: torch.Tensor):
    """The rows and columns of the smallest box holding every non-zero pixel."""
    nonzero = erf.nonzero()
    return nonzero.min(0).values.tolist(), nonzero.max(0).values.tolist()


def test_without_token_mixing_only_the_centre_patch_counts():
    torch.manual_seed(0)
    backbone = built(
        InfViT(arch='test', attn_type='none', img_size=SIDE, patch_size=PATCH, out_type='featmap'))
    erf = effective_receptive_field(backbone, images())
    assert erf.shape == (SIDE, SIDE)
    centre = slice(3 * PATCH, 4 * PATCH)
    assert bool((erf[centre, centre] > 0).all())
    assert support(erf) == ([24, 24], [31, 31])
    # All the contribution is in one patch of the 36.
    assert area_ratios(erf, [1.0])[1.0] <= 1 / 36


def test_local_mixing_reaches_one_patch_per_convolution():
    # Static WeightFormer blocks mix through one 3 x 3 depthwise conv each: two blocks reach
    # two patches around the centre and no further.
    torch.manual_seed(0)
    backbone = built(
        WeightFormer(arch='test', patch_size=PATCH, dynamic_indices=(), out_type='featmap'))
    erf = effective_receptive_field(backbone, images())
    assert support(erf) == ([(3 - 2) * PATCH] * 2, [(3 + 3) * PATCH - 1] * 2)


@pytest.mark.parametrize(
    'make', [
        lambda: InfViT(arch='test', img_size=SIDE, patch_size=PATCH, out_type='featmap'),
        lambda: WeightFormer(arch='test', patch_size=PATCH, out_type='featmap'),
        lambda: VECA(arch='test', patch_size=PATCH, out_type='featmap'),
    ],
    ids=['linear-infvit', 'weightformer-dynamic', 'veca'])
def test_global_mixing_reaches_every_pixel(make):
    torch.manual_seed(0)
    erf = effective_receptive_field(built(make()), images())
    assert bool((erf > 0).all()), 'a corner pixel does not move the centre output'
    ratios = area_ratios(erf)
    assert list(ratios) == [0.2, 0.3, 0.5, 0.99]
    assert list(ratios.values()) == sorted(ratios.values()) and 0 < ratios[0.2] < ratios[0.99]


def test_the_map_is_non_negative_and_sums_over_images_of_a_chosen_map():
    from mmpretrain.models import VisionTransformer
    torch.manual_seed(0)
    deit = built(
        VisionTransformer(
            arch=dict(embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64),
            img_size=SIDE,
            patch_size=PATCH,
            out_indices=(0, 1),
            out_type='featmap'))
    x = images(3)
    for out_index in (0, -1):
        erf = effective_receptive_field(deit, x, out_index)
        assert bool((erf >= 0).all())
        one_by_one = sum(effective_receptive_field(deit, x[i:i + 1], out_index) for i in range(3))
        torch.testing.assert_close(erf, one_by_one)
    # The first block's map differs from the last's.
    assert not torch.allclose(
        effective_receptive_field(deit, x, 0), effective_receptive_field(deit, x, 1))


def test_bad_backbones_and_indices_are_refused():
    torch.manual_seed(0)
    backbone = InfViT(arch='test', img_size=SIDE, patch_size=PATCH, out_type='featmap')
    with pytest.raises(ValueError, match=r'must be in eval mode \(call .eval\(\)\)'):
        effective_receptive_field(backbone.train(), images())
    with pytest.raises(ValueError, match=r'out_index 1 names no output: .* in \[-1, 0\]'):
        effective_receptive_field(backbone.eval(), images(), out_index=1)
    pooled = InfViT(arch='test', img_size=SIDE, patch_size=PATCH, out_type='cls_token').eval()
    with pytest.raises(ValueError, match=r"out_type='featmap'\), got an output of shape \(2, 32\)"):
        effective_receptive_field(pooled, images())


def test_area_ratio_counts_the_largest_pixels_first():
    erf = torch.tensor([[1., 4.], [2., 3.]])  # total 10
    assert area_ratios(erf, [0.3, 0.4, 0.5, 0.7, 0.95, 1.0]) == {
        0.3: 0.25,  # 4 alone
        0.4: 0.25,  # exactly reached by 4
        0.5: 0.5,  # 4 + 3
        0.7: 0.5,  # exactly reached by 4 + 3
        0.95: 1.0,
        1.0: 1.0
    }
    one_hot = torch.zeros(10, 10)
    one_hot[5, 5] = 2.
    assert set(area_ratios(one_hot).values()) == {0.01}
    uniform = torch.ones(10, 10)
    assert area_ratios(uniform, [0.2, 0.99]) == {0.2: 0.2, 0.99: 0.99}


def test_area_ratio_refuses_what_is_no_receptive_field():
    with pytest.raises(ValueError, match=r'shares in \(0, 1\], got \[0, 1.5\]'):
        area_ratios(torch.ones(2, 2), [0, 0.5, 1.5])
    with pytest.raises(ValueError, match='non-negative; this map has values down to -1.0'):
        area_ratios(torch.tensor([[1., -1.]]))
    with pytest.raises(ValueError, match='all zero'):
        area_ratios(torch.zeros(3, 3))
