"""``attention_interactions``: the query-key pairs each block scores, checked against the
attention weights the blocks really compute and against the papers' formulas."""
import pytest
import torch

from mmlinear.models import VECA, InfViT, WeightFormer


def infvit(attn_type):
    return InfViT(arch='test', img_size=64, attn_type=attn_type).eval()


@pytest.mark.parametrize('attn_type', ['softmax', 'pure', 'linear'])
def test_infvit_counts_the_scores_its_attention_weights_hold(attn_type):
    model = infvit(attn_type)
    x = torch.randn(1, 3, 48, 64)  # a 3 x 4 grid: N = 12, T = 13 with the CLS token
    with torch.no_grad():
        maps = model.forward_attention_maps(x)
    # Per head: softmax / pure score a (T, T) matrix, Linear-InfSA one key weight per token.
    per_head = [weights[0, 0].numel() for weights in maps]
    assert model.attention_interactions(x.shape) == per_head
    assert per_head == [{'linear': 13}.get(attn_type, 13**2)] * 2


def test_infvit_none_scores_nothing():
    assert infvit('none').attention_interactions((1, 3, 64, 64)) == [0, 0]


@pytest.mark.parametrize('budget', [8, 24, 64])
def test_veca_counts_2nk_plus_k_squared_as_its_core_and_patch_rows(budget):
    model = VECA(arch='test').eval()
    x = torch.randn(1, 3, 160, 160)  # N = 100 patches
    with torch.no_grad():
        maps = model.forward_attention_maps(x, active_cores=budget)
    # The K core rows over all K + N tokens, then N patch rows over the K cores.
    core_rows = maps[0][0, 0].numel()
    assert core_rows == budget * (budget + 100)
    expected = core_rows + 100 * budget
    assert expected == 2 * 100 * budget + budget**2
    assert model.attention_interactions(x.shape, active_cores=budget) == [expected] * 2


def test_veca_default_budget_and_the_papers_87_percent_at_512px():
    model = VECA(arch='test')
    assert model.attention_interactions((1, 3, 160, 160)) == [2 * 100 * 64 + 64**2] * 2
    model.active_cores = 16
    assert model.num_extra_tokens == 16
    assert model.attention_interactions((1, 3, 160, 160)) == [2 * 100 * 16 + 16**2] * 2
    # 512 px: N = 1024 patches, K = 64 cores, against a dense ViT with a class token.
    (veca, *_), dense = model.attention_interactions((1, 3, 512, 512), active_cores=64), 1025**2
    assert veca == 135_168
    assert 1 - veca / dense == pytest.approx(0.871, abs=5e-4)


def test_veca_refuses_a_budget_that_is_not_a_multiple_of_8():
    with pytest.raises(ValueError, match='8, 16, 24'):
        VECA(arch='test').attention_interactions((1, 3, 64, 64), active_cores=12)


def test_weightformer_scores_no_pair():
    model = WeightFormer(arch='test')
    assert model.num_extra_tokens == 0
    assert model.attention_interactions((1, 3, 96, 128)) == [0, 0]
