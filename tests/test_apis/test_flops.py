import pytest
from torch import nn

from mmlinear.apis import build_backbone, count_block_flops, count_flops, count_params

RESOLUTIONS = (64, 128, 192, 256)  # multiples of 32: WeightFormer's 2x2 pooling is exact


def flops_by_tokens(model):
    backbone = build_backbone(model)
    backbone.eval()
    return {(r // 16)**2: count_flops(backbone, r) for r in RESOLUTIONS}


@pytest.mark.parametrize('model', ['infvit-test-linear', 'weightformer-test'])
def test_linear_backbones_cost_is_affine_in_tokens(model):
    flops = flops_by_tokens(model)
    tokens = sorted(flops)
    slopes = [(flops[b] - flops[a]) / (b - a) for a, b in zip(tokens, tokens[1:])]
    assert slopes[0] > 0
    assert slopes == pytest.approx([slopes[0]] * len(slopes), rel=1e-12)


def test_softmax_cost_is_quadratic_and_matches_mmpretrain_vit():
    flops = flops_by_tokens('infvit-test-softmax')
    # Same width and depth as vit-test-sdpa: the same matmuls, counted through the math SDPA.
    assert flops == flops_by_tokens('vit-test-sdpa')
    # f = a + b T + c T^2 over T = N + 1 tokens (CLS); the attention adds 4 C T^2 FLOPs per
    # layer (Q K^T and A V), C = 32, 2 layers: c = 256 exactly.
    (t1, f1), (t2, f2), (t3, f3), (t4, f4) = ((n + 1, f) for n, f in sorted(flops.items()))
    d1, d2, d3 = (f2 - f1) / (t2 - t1), (f3 - f2) / (t3 - t2), (f4 - f3) / (t4 - t3)
    c = ((d2 - d1) / (t3 - t1))
    assert c == pytest.approx(256)
    assert (d3 - d2) / (t4 - t2) == pytest.approx(256)


def test_counts_match_the_reference_measurements():
    """WeightFormer-T MACs as counted on the official code with the same counter, and DeiT-T's
    summed by hand over its matmul shapes (heads excluded here: 0.0002 G)."""
    wf = build_backbone('weightformer-t')
    deit = build_backbone('deit-t-sdpa')
    assert count_flops(wf, 224) / 2e9 == pytest.approx(1.124, abs=1e-3)
    assert count_flops(wf, 1248) / 2e9 == pytest.approx(34.78, abs=1e-2)
    assert count_flops(deit, 512) / 2e9 == pytest.approx(10.43, abs=1e-2)
    assert count_params(wf) == 6_881_184


def test_one_block_and_its_attention_are_counted_within_the_forward():
    """mmpretrain's ViT at width C = 32 (MLP hidden 2 C) on T = N + 1 = 17 tokens: the
    attention's four projections 8 T C^2 and its scores and weighted sums 4 T^2 C, the MLP
    8 T C^2; the blocks and the patch projection make up the whole pass."""
    vit = build_backbone('vit-test-sdpa')
    vit.eval()
    C, T = 32, 17
    attention = 8 * T * C**2 + 4 * T**2 * C
    assert count_block_flops(vit, 64) == (attention + 8 * T * C**2, attention)
    assert count_block_flops(vit, 64, index=1) == count_block_flops(vit, 64)
    patch_projection = 2 * 16 * 3 * 16 * 16 * C
    assert count_flops(vit, 64) == 2 * count_block_flops(vit, 64)[0] + patch_projection


def test_a_block_without_attention_or_out_of_range_is_told():
    weightformer = build_backbone('weightformer-test')
    weightformer.eval()
    flops, attention = count_block_flops(weightformer, 64)
    assert flops > 0 and attention is None
    with pytest.raises(ValueError, match='it has 2 blocks, 0 to 1'):
        count_block_flops(weightformer, 64, index=2)
    with pytest.raises(ValueError, match='Linear has no blocks'):
        count_block_flops(nn.Linear(2, 2), 64)
