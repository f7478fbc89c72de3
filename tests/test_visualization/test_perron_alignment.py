"""The spectral alignment of Linear-InfSA: the Perron vector, the rank correlation, and the
per-layer measures of an InfViT."""
import math

import pytest
import torch

from mmlinear.models.backbones import InfViT
from mmlinear.ops import linear_infsa_key_weights
from mmlinear.visualization import (left_perron_vector, perron_alignment, spearman,
                                    spectral_alignment)


def test_left_perron_vector_of_a_rank_one_matrix_is_its_right_factor():
    """u v^T has the single non-zero eigenvalue v . u, with left eigenvector v."""
    g = torch.Generator().manual_seed(0)
    u, v = torch.rand(2, 7, generator=g, dtype=torch.float64) + 0.1
    perron = left_perron_vector(torch.outer(u, v))
    torch.testing.assert_close(perron, v / v.sum())
    # A batch of matrices: each its own vector, positive and summing to one.
    batch = torch.rand(3, 5, 5, generator=g, dtype=torch.float64)
    vectors = left_perron_vector(batch)
    assert (vectors > 0).all() and torch.allclose(
        vectors.sum(-1), torch.ones(3, dtype=torch.float64))
    for matrix, vector in zip(batch, vectors):
        radius = torch.linalg.eigvals(matrix).abs().max()
        torch.testing.assert_close(vector @ matrix, radius * vector)


def test_a_nilpotent_matrix_has_no_perron_vector():
    """relu(Q K^T) of a trained head can be nilpotent (all eigenvalues 0, e.g. strictly
    triangular): its eigenvectors are arbitrary, so the vector and every measure are NaN."""
    nilpotent = torch.triu(torch.rand(2, 6, 6, dtype=torch.float64), diagonal=1)
    nilpotent[1] = torch.rand(6, 6, dtype=torch.float64)  # a positive matrix beside it
    vectors = left_perron_vector(nilpotent)
    assert vectors[0].isnan().all() and not vectors[1].isnan().any()
    assert spearman(torch.arange(6.), vectors).isnan().tolist() == [True, False]


def test_spearman_is_the_pearson_correlation_of_ranks():
    a = torch.tensor([0.1, 0.4, 0.2, 0.9], dtype=torch.float64)
    assert spearman(a, a.exp()) == pytest.approx(1.0)  # any increasing transform
    assert spearman(a, -a) == pytest.approx(-1.0)
    # Ranks 0 2 1 3 against 0 1 2 3: 1 - 6 * sum(d^2) / (n (n^2 - 1)) = 1 - 12 / 60.
    assert spearman(a, torch.arange(4.)) == pytest.approx(0.8)


def test_alignment_on_tokens_with_a_shared_direction_beats_the_uniform_baseline():
    """Trained tokens share a mean direction; there one power step lands on the Perron vector
    (centred cosine and Spearman near 1), while the plain cosine of a uniform vector is
    already high, which is why it is reported as the baseline."""
    g = torch.Generator().manual_seed(1)
    N, d = 120, 32
    mean = torch.randn(d, generator=g, dtype=torch.float64)
    mean = mean / mean.norm() * math.sqrt(d)
    q = (torch.randn(2, 3, N, d, generator=g, dtype=torch.float64) + mean)
    k = (torch.randn(2, 3, N, d, generator=g, dtype=torch.float64) + mean)
    result = perron_alignment(q, k)
    assert set(result) == {'centred_cosine', 'spearman', 'cosine', 'uniform_cosine'}
    assert all(value.shape == (2, 3) for value in result.values())
    assert (result['centred_cosine'] > 0.99).all() and (result['spearman'] > 0.95).all()
    assert (result['uniform_cosine'] > 0.9).all()
    assert (result['cosine'] > result['uniform_cosine']).all()
    # The key weights are those of the layer's op.
    weights = linear_infsa_key_weights(q, k, torch.tensor(1.0, dtype=torch.float64))
    manual = torch.nn.functional.cosine_similarity(
        weights - weights.mean(-1, keepdim=True),
        (p := left_perron_vector(torch.relu(q @ k.transpose(-2, -1)))) - p.mean(-1, keepdim=True),
        dim=-1)
    torch.testing.assert_close(result['centred_cosine'], manual)


def test_every_block_of_an_infvit_is_measured_on_its_own_attention_input():
    torch.manual_seed(0)
    model = InfViT(arch='test', img_size=32, patch_size=8, attn_type='linear').eval()
    x = torch.randn(2, 3, 32, 32)
    layers = spectral_alignment(model, x)
    assert len(layers) == len(model.blocks)
    heads = model.blocks[0].attn.num_heads
    for layer in layers:
        assert layer['spearman'].shape == (2, heads)
        assert ((layer['centred_cosine'] >= -1) & (layer['centred_cosine'] <= 1 + 1e-12)).all()
    # The first block's input is LN1 of the embedded tokens (CLS and 16 patches).
    caught = []
    hook = model.blocks[0].ln1.register_forward_hook(lambda m, a, out: caught.append(out))
    with torch.no_grad():
        model(x)
    hook.remove()
    attn = model.blocks[0].attn
    expected = perron_alignment(attn.queries(caught[0]), attn.keys(caught[0]))
    torch.testing.assert_close(layers[0]['spearman'], expected['spearman'])


@pytest.mark.parametrize('attn_type', ['softmax', 'none'])
def test_backbones_without_the_infsa_operator_are_refused(attn_type):
    model = InfViT(arch='test', img_size=32, patch_size=8, attn_type=attn_type).eval()
    with pytest.raises(
            ValueError,
            match=r"attn_type in \('linear', 'pure'\), got InfViT with "
            f"attn_type '{attn_type}'"):
        spectral_alignment(model, torch.randn(1, 3, 32, 32))
