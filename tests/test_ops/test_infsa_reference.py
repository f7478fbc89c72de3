"""Faithfulness checks of the InfSA references: the properties the paper derives (unit
Frobenius norm, Neumann series, Perron-vector fidelity) and the mmlinear additions (padding
mask, float32 normalisation, broadcast to the query length)."""
import math

import pytest
import torch

from mmlinear.ops import linear_infsa_key_weights, pure_infsa, pure_infsa_scores


def linear_infsa(q, k, v, rho, key_padding_mask=None):
    """Linear-InfSA per token: the key-weighted value, broadcast to every query."""
    pooled = torch.einsum('bhs,bhsd->bhd', linear_infsa_key_weights(q, k, rho, key_padding_mask), v)
    return pooled[:, :, None].expand_as(q)


DTYPE = torch.float64


def qkv(B=2, H=3, N=16, d=8, S=None, seed=0, dtype=DTYPE):
    g = torch.Generator().manual_seed(seed)
    S = N if S is None else S
    q = torch.randn(B, H, N, d, generator=g, dtype=dtype)
    k = torch.randn(B, H, S, d, generator=g, dtype=dtype)
    v = torch.randn(B, H, S, d, generator=g, dtype=dtype)
    return q, k, v


def normalised_affinity(q, k):
    """A_hat with rho = 1, i.e. relu(qk^T/d) / (||.||_F + eps)."""
    return pure_infsa_scores(q, k, torch.tensor(1.0, dtype=q.dtype))


def test_pure_scores_are_nonnegative_with_unit_frobenius_norm():
    q, k, _ = qkv()
    scores = normalised_affinity(q, k)
    assert scores.shape == (2, 3, 16, 16)
    assert (scores >= 0).all()
    torch.testing.assert_close(
        torch.linalg.matrix_norm(scores), torch.ones(2, 3, dtype=DTYPE), atol=1e-6, rtol=0)


def test_pure_scores_are_scale_invariant_and_linear_in_rho():
    q, k, _ = qkv()
    base = normalised_affinity(q, k)
    torch.testing.assert_close(normalised_affinity(3.0 * q, 0.5 * k), base, atol=1e-5, rtol=0)
    half = pure_infsa_scores(q, k, torch.tensor(0.5, dtype=DTYPE))
    torch.testing.assert_close(half, 0.5 * base)


def test_pure_output_matches_explicit_matrix_product():
    q, k, v = qkv()
    rho = torch.tensor([0.9, 0.5, 0.1], dtype=DTYPE)
    expected = pure_infsa_scores(q, k, rho) @ v
    torch.testing.assert_close(pure_infsa(q, k, v, rho), expected)
    # rho per head scales each head's output
    out = pure_infsa(q, k, v, rho)
    out_one = pure_infsa(q, k, v, torch.tensor(1.0, dtype=DTYPE))
    torch.testing.assert_close(out, out_one * rho.view(1, 3, 1, 1))


def test_spectral_bound_below_one():
    q, k, _ = qkv(B=1, H=1, N=64, d=32)
    a_hat = normalised_affinity(q, k)[0, 0]
    assert torch.linalg.eigvals(a_hat).abs().max() < 1
    assert torch.linalg.matrix_norm(a_hat, ord=2) < 1


@pytest.mark.parametrize('gamma,terms,tol', [(0.5, 16, 1e-6), (0.9, 16, 1e-4), (0.9, 32, 1e-8),
                                             (0.99, 16, 1e-3)])
def test_neumann_identity(gamma, terms, tol):
    """sum_{t=1}^T (gamma A_hat)^t -> (I - gamma A_hat)^-1 - I, with the stated bound."""
    q, k, _ = qkv(B=1, H=1, N=64, d=32, seed=1)
    a_hat = normalised_affinity(q, k)[0, 0]
    eye = torch.eye(64, dtype=DTYPE)
    closed_form = torch.linalg.inv(eye - gamma * a_hat) - eye
    partial, power = torch.zeros_like(a_hat), eye
    for _ in range(terms):
        power = power @ (gamma * a_hat)
        partial = partial + power
    error = torch.linalg.matrix_norm(closed_form - partial)
    assert error <= gamma**(terms + 1) / (1 - gamma)
    assert error < tol


def test_absorbing_chain_fundamental_matrix():
    q, k, _ = qkv(B=1, H=1, N=32, d=16, seed=2)
    a_hat = normalised_affinity(q, k)[0, 0]
    fundamental = torch.linalg.inv(torch.eye(32, dtype=DTYPE) - 0.9 * a_hat)
    assert (fundamental >= -1e-12).all()
    assert (torch.diagonal(fundamental) >= 1 - 1e-12).all()


def test_linear_is_one_power_step_before_relu():
    """The pre-ReLU key scores equal A^T w with A = q~ k~^T and w the L2 energy weights."""
    q, k, _ = qkv(seed=3)
    d = q.shape[-1]
    qs, ks = q / math.sqrt(d), k / math.sqrt(d)
    energy = qs.norm(dim=-1)
    w = energy / (energy.sum(-1, keepdim=True) + 1e-6)
    power_step = (qs @ ks.transpose(-2, -1)).transpose(-2, -1) @ w.unsqueeze(-1)
    central_query = (w.unsqueeze(-1) * qs).sum(-2)
    pre_relu = (ks @ central_query.unsqueeze(-1))
    torch.testing.assert_close(pre_relu, power_step, atol=1e-10, rtol=0)
    scores = torch.relu(power_step.squeeze(-1))
    expected = scores / (scores.sum(-1, keepdim=True) + 1e-6)
    torch.testing.assert_close(
        linear_infsa_key_weights(q, k, torch.tensor(1.0, dtype=DTYPE)), expected)


def test_linear_key_weights_sum_to_rho():
    q, k, _ = qkv(seed=4)
    rho = torch.tensor([0.9, 0.6, 0.3], dtype=DTYPE)
    a = linear_infsa_key_weights(q, k, rho)
    assert (a >= 0).all()
    torch.testing.assert_close(a.sum(-1), rho.expand(2, 3), atol=1e-5, rtol=0)


def centred_cosine(a, b):
    a, b = a - a.mean(), b - b.mean()
    return float((a @ b) / (a.norm() * b.norm()))


def left_perron(a_hat):
    eigvals, eigvecs = torch.linalg.eig(a_hat.T)
    vec = eigvecs[:, eigvals.real.argmax()].real
    return vec * torch.sign(vec.sum())


@pytest.mark.parametrize('seed', range(3))
def test_perron_fidelity_on_anisotropic_tokens(seed):
    """With a shared mean direction (trained features), a matches A_hat's left Perron vector."""
    g = torch.Generator().manual_seed(seed)
    N, d = 197, 64
    mean = torch.randn(d, generator=g, dtype=DTYPE)
    mean = mean / mean.norm() * math.sqrt(d)
    q = (torch.randn(N, d, generator=g, dtype=DTYPE) + 1.0 * mean)[None, None]
    k = (torch.randn(N, d, generator=g, dtype=DTYPE) + 1.0 * mean)[None, None]
    a = linear_infsa_key_weights(q, k, torch.tensor(1.0, dtype=DTYPE))[0, 0]
    perron = left_perron(normalised_affinity(q, k)[0, 0])
    uniform = torch.ones(N, dtype=DTYPE)
    assert centred_cosine(a, perron) > 0.99
    cosine = float(a @ perron / (a.norm() * perron.norm()))
    uniform_cosine = float(uniform @ perron / (uniform.norm() * perron.norm()))
    assert cosine > uniform_cosine


def test_perron_fidelity_on_isotropic_tokens():
    q, k, _ = qkv(B=1, H=1, N=197, d=64, seed=5)
    a = linear_infsa_key_weights(q, k, torch.tensor(1.0, dtype=DTYPE))[0, 0]
    assert centred_cosine(a, left_perron(normalised_affinity(q, k)[0, 0])) > 0.4


def test_linear_broadcasts_to_query_length():
    q, k, v = qkv(N=7, S=11, seed=6)
    out = linear_infsa(q, k, v, torch.tensor(0.9, dtype=DTYPE))
    assert out.shape == (2, 3, 7, 8)
    assert (out - out[:, :, :1]).abs().max() < 1e-6
    out_self = linear_infsa(*qkv(N=12, seed=7), torch.tensor(0.9, dtype=DTYPE))
    assert (out_self - out_self[:, :, :1]).abs().max() < 1e-6


def test_degenerate_scores_give_zero_output():
    """Every q_bar . k_j <= 0: a = 0 and the output is finite zeros, not NaN."""
    q = torch.ones(1, 1, 5, 4, dtype=DTYPE)
    k = -torch.ones(1, 1, 5, 4, dtype=DTYPE)
    v = torch.randn(1, 1, 5, 4, dtype=DTYPE)
    rho = torch.tensor(0.9, dtype=DTYPE)
    assert torch.equal(linear_infsa(q, k, v, rho), torch.zeros_like(v))
    assert torch.equal(pure_infsa(q, k, v, rho), torch.zeros_like(v))
    zeros = torch.zeros(1, 1, 5, 4, dtype=DTYPE)
    assert torch.isfinite(pure_infsa(zeros, zeros, v, rho)).all()
    assert torch.isfinite(linear_infsa(zeros, zeros, v, rho)).all()


@pytest.mark.parametrize('op', [pure_infsa, linear_infsa])
def test_key_padding_mask_equals_dropping_padded_tokens(op):
    q, k, v = qkv(N=10, seed=8)
    rho = torch.tensor([0.9, 0.8, 0.7], dtype=DTYPE)
    mask = torch.zeros(2, 10, dtype=torch.bool)
    mask[0, 6:] = True
    mask[1, 8:] = True
    out = op(q, k, v, rho, mask)
    for b, valid in enumerate((6, 8)):
        sl = slice(0, valid)
        expected = op(q[b:b + 1, :, sl], k[b:b + 1, :, sl], v[b:b + 1, :, sl], rho)
        torch.testing.assert_close(out[b:b + 1, :, sl], expected)
    # No mask keeps the reference behaviour, where padding does leak.
    unmasked = op(q, k, v, rho)
    assert (unmasked[0, :, :6] - out[0, :, :6]).abs().max() > 1e-6


def test_normalisation_runs_in_float32_under_autocast():
    q, k, v = qkv(dtype=torch.float32, N=32)
    rho = torch.tensor(0.9)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        scores = pure_infsa_scores(q.bfloat16(), k.bfloat16(), rho)
        weights = linear_infsa_key_weights(q.bfloat16(), k.bfloat16(), rho)
        out = pure_infsa(q.bfloat16(), k.bfloat16(), v.bfloat16(), rho)
    assert scores.dtype == torch.float32 and weights.dtype == torch.float32
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(
        torch.linalg.matrix_norm(scores), torch.full((2, 3), 0.9), atol=1e-5, rtol=0)


def key_weights_of(q, k, v, *args):
    return linear_infsa_key_weights(q, k, *args)


@pytest.mark.parametrize('op', [pure_infsa, key_weights_of])
def test_bad_inputs_raise_clear_errors(op):
    q, k, v = qkv()
    with pytest.raises(ValueError, match='4-D'):
        op(q[0], k, v, torch.tensor(0.9))
    with pytest.raises(ValueError, match='rho must hold 1 value or one per head'):
        op(q, k, v, torch.ones(5, dtype=DTYPE))
    with pytest.raises(ValueError, match='key_padding_mask'):
        op(q, k, v, torch.tensor(0.9, dtype=DTYPE), torch.zeros(2, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match='expected q'):
        op(q, k[..., :4], v, torch.tensor(0.9, dtype=DTYPE))
