"""The efficient-attention baselines (ELU+1 linear attention, Performer, Linformer,
Nystromformer, Agent Attention), each against its paper's formula written out here, in
float64."""
import math

import pytest
import torch
import torch.nn.functional as F

from mmlinear.models.layers import InfSAAttention
from mmlinear.models.layers.mixers import (EFFICIENT_ATTENTIONS, AgentAttention, EluLinearAttention,
                                           LinformerAttention, NystromAttention, PerformerAttention,
                                           iterative_pinv, orthogonal_gaussian_features)

B, H, T, D = 2, 3, 12, 4


def qkv(num_tokens=T, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return [
        torch.randn(B, H, num_tokens, D, generator=generator, dtype=torch.float64) for _ in range(3)
    ]


def softmax_attention(q, k, v):
    return ((q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])).softmax(-1) @ v


def test_elu_linear_attention_is_katharopoulos_eq_6():
    q, k, v = qkv()
    out, _ = EluLinearAttention(D, eps=0.)(q, k, v)
    expected = torch.empty_like(out)
    for b in range(B):
        for h in range(H):
            for i in range(T):
                sims = torch.stack([(F.elu(q[b, h, i]) + 1) @ (F.elu(k[b, h, j]) + 1)
                                    for j in range(T)])
                expected[b, h, i] = (sims[:, None] * v[b, h]).sum(0) / sims.sum()
    torch.testing.assert_close(out, expected)


def test_performer_features_are_favor_plus_positive_random_features():
    torch.manual_seed(0)
    layer = PerformerAttention(D, num_features=16, eps=0.).double()
    q, k, v = qkv()
    w = layer.projection

    def phi(x):  # Lemma 1, with the temperature 1 / sqrt(d) split as d^(-1/4) per side
        x = x / D**0.25
        return torch.exp(x @ w.T - (x * x).sum(-1, keepdim=True) / 2) / math.sqrt(16)

    sims = phi(q) @ phi(k).transpose(-2, -1)
    expected = (sims / sims.sum(-1, keepdim=True)) @ v
    out, _ = layer(q, k, v)
    # The stabilising shifts cancel: the same estimate as the unshifted features.
    torch.testing.assert_close(out, expected)


def test_performer_estimates_softmax_attention_with_many_features():
    torch.manual_seed(0)
    q, k, v = (t * 0.5 for t in qkv())
    out, _ = PerformerAttention(D, num_features=8192).double()(q, k, v)
    assert (out - softmax_attention(q, k, v)).abs().max() < 0.03


def test_orthogonal_features_are_orthogonal_within_a_block_with_gaussian_lengths():
    torch.manual_seed(0)
    w = orthogonal_gaussian_features(2 * D + 1, D).double()
    assert w.shape == (2 * D + 1, D)
    for block in (w[:D], w[D:2 * D]):
        gram = block @ block.T
        torch.testing.assert_close(gram, torch.diag(gram.diagonal()), atol=1e-6, rtol=0)
    torch.manual_seed(1)
    rows = orthogonal_gaussian_features(4000, D)
    # |g| of a d-dimensional standard Gaussian: E|g|^2 = d; and no direction is preferred (a
    # QR without its sign correction points every block's first row to one side).
    assert abs(rows.norm(dim=1).pow(2).mean().item() - D) < 0.3
    assert rows.mean(0).abs().max() < 0.1


def test_linformer_is_softmax_over_projected_keys_and_values():
    torch.manual_seed(0)
    layer = LinformerAttention(D, max_tokens=20, proj_len=5).double()
    q, k, v = qkv()
    E = layer.key_projection[:, :T]
    Fv = layer.value_projection[:, :T]
    expected = torch.empty_like(q)
    for b in range(B):
        for h in range(H):
            attn = (q[b, h] @ (E @ k[b, h]).T / math.sqrt(D)).softmax(-1)
            expected[b, h] = attn @ (Fv @ v[b, h])
    out, weights = layer(q, k, v, need_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights @ v, out)


def test_linformer_on_a_short_sequence_is_the_sequence_zero_padded_to_max_tokens():
    torch.manual_seed(0)
    layer = LinformerAttention(D, max_tokens=20, proj_len=5).double()
    q, k, v = qkv()
    padded = [F.pad(t, (0, 0, 0, 20 - T)) for t in (q, k, v)]
    torch.testing.assert_close(layer(*padded)[0][:, :, :T], layer(q, k, v)[0])
    assert layer.proj_len == 5 and LinformerAttention(D, max_tokens=20).proj_len == 5


def test_linformer_refuses_a_sequence_longer_than_its_projection():
    q, k, v = qkv(num_tokens=21)
    with pytest.raises(ValueError, match='at most max_tokens=20 tokens.*got 21.*img_size'):
        LinformerAttention(D, max_tokens=20)(q, k, v)


def newton_schulz_pinv(a, iterations):
    """Eq. 14 of Nystromformer written out for one matrix."""
    z = a.T / (a.abs().sum(0).max() * a.abs().sum(1).max())
    eye = torch.eye(a.shape[0], dtype=a.dtype)
    for _ in range(iterations):
        az = a @ z
        z = 0.25 * z @ (13 * eye - az @ (15 * eye - az @ (7 * eye - az)))
    return z


def test_nystromformer_is_eq_15_with_segment_mean_landmarks():
    layer = NystromAttention(D, num_landmarks=4)
    q, k, v = qkv()
    expected = torch.empty_like(q)
    for b in range(B):
        for h in range(H):
            qs, ks = q[b, h] / D**0.25, k[b, h] / D**0.25
            q_land = qs.reshape(4, T // 4, D).mean(1)  # segment means, 4 segments of 3
            k_land = ks.reshape(4, T // 4, D).mean(1)
            kernel_1 = (qs @ k_land.T).softmax(-1)
            kernel_2 = (q_land @ k_land.T).softmax(-1)
            kernel_3 = (q_land @ ks.T).softmax(-1)
            expected[b, h] = kernel_1 @ newton_schulz_pinv(kernel_2, 6) @ (kernel_3 @ v[b, h])
    out, weights = layer(q, k, v, need_weights=True)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(weights @ v, out)
    assert layer.interactions(T) == 2 * T * 4 + 16


def test_nystromformer_with_as_many_landmarks_as_tokens_is_softmax_attention():
    q, k, v = qkv()
    torch.testing.assert_close(
        NystromAttention(D, num_landmarks=T)(q, k, v)[0], softmax_attention(q, k, v))
    assert NystromAttention(D, num_landmarks=T).interactions(T) == T * T


def test_iterative_pinv_converges_to_the_pseudo_inverse():
    a = torch.randn(3, 6, 6, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(iterative_pinv(a.softmax(-1), 40), torch.linalg.pinv(a.softmax(-1)))


def segment_means(x, n):
    """(T, d) -> (n, d): the mean of tokens floor(i T / n) to ceil((i + 1) T / n) - 1 for
    the i-th of n segments (equal segments of T / n when n divides T)."""
    T = x.shape[0]
    return torch.stack(
        [x[math.floor(i * T / n):math.ceil((i + 1) * T / n)].mean(0) for i in range(n)])


def agent_attention(q, k, v, n, key_padding_mask=None):
    """Agent Attention (Eq. 3) for one (T, d) head written out: the agents are segment means
    of the queries (padded ones zeroed), the aggregation softmax skips padded keys."""
    valid = torch.ones(q.shape[0], dtype=torch.bool)
    if key_padding_mask is not None:
        valid = ~key_padding_mask
    agents = segment_means(q * valid[:, None], n)
    logits = agents @ k.T / math.sqrt(q.shape[-1])
    aggregation = torch.zeros_like(logits)
    aggregation[:, valid] = logits[:, valid].softmax(-1)
    agent_values = aggregation @ v
    broadcast = (q @ agents.T / math.sqrt(q.shape[-1])).softmax(-1)
    return broadcast @ agent_values


@pytest.mark.parametrize('num_agents', [4, 5])  # 12 tokens: equal segments, then 2 or 3 long
@pytest.mark.parametrize('padded', [False, True])
def test_agent_attention_is_eq_3_with_segment_mean_agents(num_agents, padded):
    layer = AgentAttention(D, num_agents=num_agents)
    q, k, v = qkv()
    mask = None
    if padded:  # the second sample's last 5 tokens are padding
        mask = torch.zeros(B, T, dtype=torch.bool)
        mask[1, T - 5:] = True
    expected = torch.empty_like(q)
    for b in range(B):
        for h in range(H):
            expected[b, h] = agent_attention(q[b, h], k[b, h], v[b, h], num_agents,
                                             None if mask is None else mask[b])
    out, weights = layer(q, k, v, mask, need_weights=True)
    torch.testing.assert_close(out, expected)
    assert weights.shape == (B, H, T, T)
    torch.testing.assert_close(weights @ v, out)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, H, T, dtype=torch.float64))
    if padded:
        assert (weights[1, :, :, T - 5:] == 0).all()
    assert layer.interactions(T) == 2 * T * num_agents


def test_agent_attention_defaults_to_the_papers_49_agents_and_refuses_none():
    assert AgentAttention(D).num_agents == 49
    assert AgentAttention(D).interactions(197) == 2 * 197 * 49
    for bad in (0, -3):
        with pytest.raises(ValueError, match=f'num_agents must be >= 1, got {bad}'):
            AgentAttention(D, num_agents=bad)
    with pytest.raises(ValueError, match='num_agents must be >= 1, got 0'):
        InfSAAttention(16, 2, attn_type='agent', mixer_cfg=dict(num_agents=0))


def test_agent_attention_with_more_agents_than_tokens_runs_the_same_formula():
    q, k, v = qkv(num_tokens=5)
    out, weights = AgentAttention(D, num_agents=7)(q, k, v, need_weights=True)
    torch.testing.assert_close(out[1, 2], agent_attention(q[1, 2], k[1, 2], v[1, 2], 7))
    torch.testing.assert_close(weights @ v, out)


def make_layer(attn_type, **kwargs):
    torch.manual_seed(0)
    mixer_cfg = dict(max_tokens=16) if attn_type == 'linformer' else None
    if attn_type == 'nystromformer':
        mixer_cfg = dict(num_landmarks=3)
    if attn_type == 'agent':
        mixer_cfg = dict(num_agents=3)
    return InfSAAttention(16, 2, attn_type=attn_type, mixer_cfg=mixer_cfg, **kwargs).double()


@pytest.mark.parametrize('attn_type', list(EFFICIENT_ATTENTIONS))
def test_layer_runs_the_mixer_between_the_projections(attn_type):
    layer = make_layer(attn_type)
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    split = [
        p(x).reshape(2, 9, 2, 8).transpose(1, 2) for p in (layer.q_proj, layer.k_proj, layer.v_proj)
    ]
    heads, _ = layer.mixer(*split)
    torch.testing.assert_close(layer(x), layer.out_proj(heads.transpose(1, 2).reshape(2, 9, 16)))
    out, weights = layer(x, need_weights=True)
    assert weights.shape == (2, 2, 9, 9)
    torch.testing.assert_close(out, layer(x))
    assert layer.interactions(8, 1) == layer.mixer.interactions(9)


@pytest.mark.parametrize('attn_type', list(EFFICIENT_ATTENTIONS))
def test_padded_tokens_never_reach_the_valid_ones(attn_type):
    layer = make_layer(attn_type).eval()
    x = torch.randn(1, 10, 16, dtype=torch.float64)
    mask = torch.tensor([[False] * 6 + [True] * 3])  # 9 patches after one extra token
    other = x.clone()
    other[:, 7:] = torch.randn(1, 3, 16, dtype=torch.float64) * 10
    out = layer(x, mask, num_extra_tokens=1)
    torch.testing.assert_close(layer(other, mask, num_extra_tokens=1)[:, :7], out[:, :7])


@pytest.mark.parametrize('attn_type', ['elu_linear', 'performer'])
def test_feature_map_attentions_leave_padded_keys_out_exactly(attn_type):
    """A padded sequence gives the unpadded one's outputs (the sums skip padded keys)."""
    layer = make_layer(attn_type).eval()
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    padded = torch.cat([x, torch.randn(1, 4, 16, dtype=torch.float64)], dim=1)
    mask = torch.tensor([[False] * 6 + [True] * 4])
    torch.testing.assert_close(layer(padded, mask)[:, :6], layer(x))


@pytest.mark.parametrize('attn_type', list(EFFICIENT_ATTENTIONS))
def test_bf16_autocast_runs_the_mixer_in_float32(attn_type):
    layer = make_layer(attn_type).float()
    x = torch.randn(2, 9, 16)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = layer(x)
    assert out.dtype == torch.bfloat16 and torch.isfinite(out.float()).all()
    torch.testing.assert_close(out.float(), layer(x), atol=0.05, rtol=0.05)


def test_bad_options_name_the_allowed_ones():
    with pytest.raises(
            ValueError,
            match="'performer' attention takes no option landmarks; "
            'its options: num_features, eps'):
        InfSAAttention(16, 2, attn_type='performer', mixer_cfg=dict(landmarks=3))
    with pytest.raises(ValueError, match="'linformer' attention needs max_tokens"):
        InfSAAttention(16, 2, attn_type='linformer')
    with pytest.raises(
            ValueError,
            match="mixer_cfg configures an efficient-attention baseline "
            r"\('elu_linear', 'performer', 'linformer', 'nystromformer', 'agent'\), not "
            "'softmax'"):
        InfSAAttention(16, 2, attn_type='softmax', mixer_cfg=dict(num_features=3))
    with pytest.raises(ValueError, match="'nystromformer' attention takes no attention dropout"):
        InfSAAttention(16, 2, attn_type='nystromformer', attn_drop=0.1)
    with pytest.raises(ValueError, match='num_features must be >= 1'):
        PerformerAttention(D, num_features=0)
    with pytest.raises(ValueError, match='num_landmarks and pinv_iterations must be >= 1'):
        NystromAttention(D, num_landmarks=0)
