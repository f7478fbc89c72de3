"""The spectral alignment of Linear-InfSA: the Perron vector, the rank correlation, and the
per-layer measures of an InfViT."""
import math
import os.path as osp
import warnings

import numpy as np
import pytest
import scipy.linalg
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


def assert_perron_vector(vector, matrix):
    """``vector`` is non-negative, sums to 1 and is a left eigenvector of the spectral radius
    (a reducible matrix has non-negative left eigenvectors of smaller eigenvalues too)."""
    radius = np.abs(scipy.linalg.eigvals(matrix.numpy())).max()
    assert (vector >= 0).all() and float(vector.sum()) == pytest.approx(1.0)
    torch.testing.assert_close(vector @ matrix, radius * vector, rtol=0, atol=1e-9 * radius)


def eig_left_perron_vector(matrix):
    """The reference where the general solver works: the left eigenvector of the eigenvalue
    with the largest real part, scaled to sum to 1."""
    values, vectors = torch.linalg.eig(matrix.transpose(-2, -1))
    index = values.real.argmax(-1)[..., None, None].expand(*vectors.shape[:-1], 1)
    vector = vectors.real.gather(-1, index)[..., 0]
    return vector / vector.sum(-1, keepdim=True)


def test_power_iteration_finds_the_vector_eig_finds_where_eig_works():
    """Positive matrices and ReLU affinities of random tokens: the same vectors to 1e-6."""
    g = torch.Generator().manual_seed(2)
    positive = torch.rand(20, 17, 17, generator=g, dtype=torch.float64)
    q, k = torch.randn(2, 20, 40, 8, generator=g, dtype=torch.float64)
    affinity = torch.relu(q @ k.transpose(-2, -1) + 0.5)
    for matrices in (positive, affinity):
        torch.testing.assert_close(
            left_perron_vector(matrices), eig_left_perron_vector(matrices), rtol=0, atol=1e-6)


def test_periodic_matrices_converge_to_their_perron_vector():
    """A cycle has eigenvalues r exp(2 pi i k / p) of one modulus, on which plain power
    iteration oscillates for ever; the shift by r removes the periodicity."""
    cycle = torch.roll(torch.eye(5, dtype=torch.float64), 1, 0)
    torch.testing.assert_close(
        left_perron_vector(cycle), torch.full((5, ), 0.2, dtype=torch.float64))
    x = torch.tensor([1., 0, 0, 0, 0], dtype=torch.float64)
    assert torch.equal(x @ cycle @ cycle @ cycle @ cycle @ cycle, x)  # unshifted: period 5
    # Bipartite with unequal weights (eigenvalues +-r): the vector is not uniform.
    g = torch.Generator().manual_seed(3)
    bipartite = torch.zeros(7, 7, dtype=torch.float64)
    bipartite[:3, 3:] = torch.rand(3, 4, generator=g, dtype=torch.float64) + 0.1
    bipartite[3:, :3] = torch.rand(4, 3, generator=g, dtype=torch.float64) + 0.1
    vector = left_perron_vector(bipartite)
    assert_perron_vector(vector, bipartite)
    torch.testing.assert_close(vector, eig_left_perron_vector(bipartite), rtol=0, atol=1e-6)


@pytest.mark.parametrize('dominant_block', ['first', 'second'])
def test_a_reducible_matrix_gets_the_vector_of_its_spectral_radius(dominant_block):
    """Block upper triangular ``[[A1, X], [0, A2]]``: when A2 dominates, the Perron vector is
    A2's, with zeros on A1's tokens; when A1 dominates, it is positive on both blocks. A
    non-negative eigenvector of the smaller block's radius exists too, and is not it."""
    g = torch.Generator().manual_seed(4)
    first = torch.rand(4, 4, generator=g, dtype=torch.float64)
    second = torch.rand(3, 3, generator=g, dtype=torch.float64)
    if dominant_block == 'first':
        first = first * 3
    else:
        second = second * 3
    matrix = torch.zeros(7, 7, dtype=torch.float64)
    matrix[:4, :4], matrix[4:, 4:] = first, second
    matrix[:4, 4:] = torch.rand(4, 3, generator=g, dtype=torch.float64)
    vector = left_perron_vector(matrix)
    assert_perron_vector(vector, matrix)
    if dominant_block == 'second':
        assert (vector[:4] < 1e-9).all()  # 0, up to the geometric rate of convergence
        torch.testing.assert_close(vector[4:], left_perron_vector(second), rtol=0, atol=1e-9)
    else:
        assert (vector > 0).all()


def test_the_affinities_of_trained_heads_that_eig_fails_on():
    """The shape of the affinities eig failed on in a trained demo classifier: sparse ReLU
    scores whose graph is nearly acyclic (mostly one-token strongly connected components, a few
    small cycles), so most eigenvalues cluster at 0 in large Jordan blocks. Built here from a
    random acyclic part and two cycles of 3 and 4 tokens, in a random token order."""
    g = torch.Generator().manual_seed(5)
    n = 65
    dense = torch.rand(n, n, generator=g, dtype=torch.float64)
    matrix = torch.triu(dense * (torch.rand(n, n, generator=g) < 0.1), diagonal=1)
    for cycle in ([0, 1, 2], [30, 31, 32, 33]):
        for a, b in zip(cycle, cycle[1:] + cycle[:1]):
            matrix[a, b] = 0.2 + dense[b, a]
    order = torch.randperm(n, generator=g)
    matrix = matrix[order][:, order] * 0.2
    vector = left_perron_vector(matrix)
    assert_perron_vector(vector, matrix)
    # The power iteration agrees with a solver that succeeds on it (LAPACK's geev via scipy).
    values, left = scipy.linalg.eig(matrix.numpy(), left=True, right=False)
    reference = left[:, values.real.argmax()].real
    np.testing.assert_allclose(vector.numpy(), reference / reference.sum(), atol=1e-6)


def test_the_operator_of_a_trained_head_that_eig_failed_on():
    """A trained head's operator, saved from the demo classifier (the file's header says
    where from): the iteration converges without a warning to the vector scipy's solver
    gives."""
    path = osp.join(
        osp.dirname(osp.dirname(__file__)), 'data', 'spectral', 'trained_head_affinity.txt')
    rows, cols, values = np.loadtxt(path, unpack=True)
    matrix = torch.zeros(65, 65, dtype=torch.float64)
    matrix[rows.astype(int), cols.astype(int)] = torch.from_numpy(values)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        vector = left_perron_vector(matrix)
    assert_perron_vector(vector, matrix)
    values, left = scipy.linalg.eig(matrix.numpy(), left=True, right=False)
    reference = left[:, values.real.argmax()].real
    np.testing.assert_allclose(vector.numpy(), reference / reference.sum(), atol=1e-6)


def test_a_defective_perron_root_warns_that_it_did_not_converge():
    """``[[2, 1], [0, 2]]``: one Jordan block at the spectral radius; the iteration approaches
    the vector (0, 1) only as 1 / k, and says so."""
    jordan = torch.tensor([[2., 1.], [0., 2.]], dtype=torch.float64)
    with pytest.warns(UserWarning, match=r'1 of 1 matrices did not converge in 500 iterations'):
        vector = left_perron_vector(jordan, max_iter=500)
    assert vector[1] > 0.99


def test_non_square_negative_or_badly_configured_input_is_refused():
    with pytest.raises(ValueError, match=r'square matrices, got \(3, 4\)'):
        left_perron_vector(torch.rand(3, 4))
    with pytest.raises(ValueError, match='non-negative matrices only'):
        left_perron_vector(-torch.rand(3, 3))
    with pytest.raises(ValueError, match='NaN or infinite entries'):
        left_perron_vector(torch.tensor([[1.0, float('inf')], [0.0, 1.0]]))
    with pytest.raises(ValueError, match='max_iter must be >= 1 and tol > 0, got 0'):
        left_perron_vector(torch.rand(3, 3), max_iter=0)


def test_a_nilpotent_matrix_has_no_perron_vector():
    """relu(Q K^T) of a trained head can be nilpotent (all eigenvalues 0, e.g. strictly
    triangular): its eigenvectors are arbitrary, so the vector and every measure are NaN."""
    nilpotent = torch.triu(torch.rand(2, 6, 6, dtype=torch.float64), diagonal=1)
    nilpotent[1] = torch.rand(6, 6, dtype=torch.float64)  # a positive matrix beside it
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # nilpotent is an answer, not a failure to converge
        vectors = left_perron_vector(nilpotent)
    assert left_perron_vector(torch.zeros(3, 3)).isnan().all()
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
