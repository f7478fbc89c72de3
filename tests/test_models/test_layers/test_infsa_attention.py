import pytest
import torch

from mmlinear.models.layers import InfSAAttention
from mmlinear.ops import linear_infsa_key_weights, pure_infsa_reference


def make(attn_type='linear', **kwargs):
    torch.manual_seed(0)
    return InfSAAttention(16, 4, attn_type=attn_type, **kwargs)


@pytest.mark.parametrize('attn_type', ['softmax', 'pure', 'linear', 'none'])
def test_output_shape_and_weights(attn_type):
    layer = make(attn_type)
    x = torch.randn(2, 9, 16)
    out, weights = layer(x, need_weights=True)
    assert out.shape == (2, 9, 16)
    expected = {'softmax': (2, 4, 9, 9), 'pure': (2, 4, 9, 9), 'linear': (2, 4, 9), 'none': None}
    assert (None if weights is None else tuple(weights.shape)) == expected[attn_type]
    # The explicit (weights) path and the op path agree.
    torch.testing.assert_close(layer(x), out, atol=1e-5, rtol=1e-5)


def test_layer_uses_the_reference_computation():
    layer = make('pure').double()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    q = layer.q_proj(x).reshape(2, 9, 4, 4).transpose(1, 2)
    k = layer.k_proj(x).reshape(2, 9, 4, 4).transpose(1, 2)
    v = layer.v_proj(x).reshape(2, 9, 4, 4).transpose(1, 2)
    heads = pure_infsa_reference(q, k, v, layer.rho).transpose(1, 2).reshape(2, 9, 16)
    torch.testing.assert_close(layer(x), layer.out_proj(heads))
    # The same weights in a Linear-InfSA layer (the mixer is built with the layer).
    pure = layer
    layer = make('linear').double()
    layer.load_state_dict(pure.state_dict())
    # Linear-InfSA per token: the key-weighted value broadcast to every query.
    pooled = torch.einsum('bhs,bhsd->bhd', linear_infsa_key_weights(q, k, layer.rho), v)
    heads = pooled[:, None].expand(2, 9, 4, 4).reshape(2, 9, 16)
    torch.testing.assert_close(layer(x), layer.out_proj(heads))


@pytest.mark.parametrize('attn_type', ['pure', 'linear'])
@pytest.mark.parametrize('rho_mode,shape', [('per_head', (4, )), ('per_layer', (1, ))])
def test_rho_is_learnable_and_gets_gradient(attn_type, rho_mode, shape):
    layer = make(attn_type, rho_mode=rho_mode)
    assert layer.rho_logit.shape == shape
    torch.testing.assert_close(layer.rho, torch.full(shape, 0.95))
    layer(torch.randn(2, 9, 16)).pow(2).sum().backward()
    assert layer.rho_logit.grad is not None and layer.rho_logit.grad.abs().sum() > 0


def test_fixed_rho_is_a_buffer():
    layer = make('pure', rho_mode='fixed', rho_init=0.5)
    assert 'rho_logit' not in dict(layer.named_parameters())
    assert 'rho_logit' in dict(layer.named_buffers())
    torch.testing.assert_close(layer.rho, torch.tensor([0.5]))


def test_only_infsa_types_hold_rho():
    """Parameters that a type never uses would break DDP (unused-parameter error)."""
    assert not hasattr(make('softmax'), 'rho_logit')
    assert sum(p.numel() for p in make('none').parameters()) == 0
    with pytest.raises(ValueError, match='no rho'):
        make('softmax').rho


def test_tie_qk_removes_one_projection():
    untied = sum(p.numel() for p in make('linear').parameters())
    tied = sum(p.numel() for p in make('linear', tie_qk=True).parameters())
    assert untied - tied == 16 * 16 + 16


def test_key_padding_mask_isolates_valid_tokens():
    for attn_type in ('softmax', 'pure', 'linear'):
        layer = make(attn_type).eval()
        x = torch.randn(1, 6, 16)
        padded = torch.cat([x, torch.randn(1, 4, 16)], dim=1)
        mask = torch.tensor([[False] * 6 + [True] * 4])
        torch.testing.assert_close(layer(padded, mask)[:, :6], layer(x), atol=1e-5, rtol=1e-5)


def test_invalid_options_name_allowed_values():
    with pytest.raises(ValueError, match="allowed: 'softmax', 'pure', 'linear', 'none'"):
        InfSAAttention(16, 4, attn_type='flash')
    with pytest.raises(ValueError, match="allowed: 'per_head', 'per_layer', 'fixed'"):
        InfSAAttention(16, 4, rho_mode='global')
    with pytest.raises(ValueError, match='divisible'):
        InfSAAttention(16, 3)
    with pytest.raises(ValueError, match='rho_init'):
        InfSAAttention(16, 4, rho_init=1.0)


# ----------------------------------------------------------------------------------------
# Linear-InfSA without per-token V and output projections: the layer pools the inputs per
# head and projects one vector per (sample, head); these tests hold it to the per-token
# computation, written out here independently of the layer and of mmlinear.ops.
# ----------------------------------------------------------------------------------------
def per_token_linear_infsa(layer, x, key_padding_mask=None):
    """Linear-InfSA as first written: V and the output projection on every token.

    Args:
        layer (InfSAAttention): A 'linear' layer whose projections and rho are used.
        x (Tensor): (B, N, C) tokens.
        key_padding_mask (Tensor, optional): (B, N) bool, True on padded tokens.

    Returns:
        Tensor: (B, N, C), a materialised per-token output (after ``proj_drop``).
    """
    B, N, C = x.shape
    H, d = layer.num_heads, layer.head_dims

    def heads(t):
        return t.reshape(B, N, H, d).transpose(1, 2)

    q = heads(layer.q_proj(x)) * d**-0.5
    k = q if layer.k_proj is None else heads(layer.k_proj(x)) * d**-0.5
    v = heads(layer.v_proj(x))
    energy = q.norm(dim=-1)
    if key_padding_mask is not None:
        energy = energy.masked_fill(key_padding_mask[:, None, :], 0)
    central = ((energy / (energy.sum(-1, keepdim=True) + layer.eps))[..., None] * q).sum(2)
    scores = torch.relu((k * central[:, :, None, :]).sum(-1))
    if key_padding_mask is not None:
        scores = scores.masked_fill(key_padding_mask[:, None, :], 0)
    a = layer.rho.reshape(1, -1, 1) * scores / (scores.sum(-1, keepdim=True) + layer.eps)
    pooled = (a[..., None] * v).sum(2)  # (B, H, d)
    out = pooled[:, :, None, :].expand(B, H, N, d).transpose(1, 2).reshape(B, N, C)
    return layer.proj_drop(layer.out_proj(out.contiguous()))


def max_relative_error(actual, expected):
    return ((actual - expected).abs().max() / expected.abs().max()).item()


def padding_mask(case):
    """(3, 11) masks: none, some padding in two samples, or all but two tokens padded.

    (With a single valid token a = rho s / (s + eps) is constant up to eps, so the gradients
    w.r.t. q and k are of the order of eps, left over from cancelling O(1) terms: no relative
    comparison of them is meaningful.)
    """
    if case == 'none':
        return None
    mask = torch.zeros(3, 11, dtype=torch.bool)
    if case == 'partial':
        mask[0, 7:] = True
        mask[2, 3:] = True
    else:
        mask[:, 2:] = True
    return mask


@pytest.mark.parametrize('mask_case', ['none', 'partial', 'all_but_two'])
@pytest.mark.parametrize('mode', ['train', 'eval'])
@pytest.mark.parametrize('options', [
    dict(),
    dict(tie_qk=True),
    dict(qkv_bias=False),
    dict(rho_mode='per_layer', rho_init=0.3),
])
def test_linear_output_and_gradients_equal_the_per_token_computation(mask_case, mode, options):
    layer = InfSAAttention(32, 4, attn_type='linear', **options).double()
    layer.train(mode == 'train')
    torch.manual_seed(1)
    for p in layer.parameters():  # non-zero biases, so the b_v * sum(a) term is exercised
        p.data.normal_(0, 0.5)
    x = torch.randn(3, 11, 32, dtype=torch.float64, requires_grad=True)
    mask = padding_mask(mask_case)
    out = layer(x, mask)
    expected = per_token_linear_infsa(layer, x, mask)
    assert max_relative_error(out, expected) <= 1e-10
    grad_out = torch.randn_like(expected)
    inputs = [x] + list(layer.parameters())
    grads = torch.autograd.grad(out, inputs, grad_out)
    expected_grads = torch.autograd.grad(expected, inputs, grad_out)
    names = ['x'] + [name for name, _ in layer.named_parameters()]
    assert 'rho_logit' in names and 'v_proj.weight' in names
    for name, grad, expected_grad in zip(names, grads, expected_grads):
        assert max_relative_error(grad, expected_grad) <= 1e-10, name


def test_linear_without_positive_scores_outputs_the_output_bias():
    """Identical tokens with k = -q: every key score is < 0, so a = 0 and sum(a) = 0; the
    value bias must then vanish with the pooled value (b_v * sum(a), not b_v * rho)."""
    layer = make('linear').double().eval()
    layer.k_proj.weight.data = -layer.q_proj.weight.data
    layer.k_proj.bias.data = -layer.q_proj.bias.data
    layer.v_proj.bias.data.fill_(3.)
    x = torch.randn(2, 1, 16, dtype=torch.float64).expand(2, 7, 16)
    out = layer(x)
    torch.testing.assert_close(out, layer.out_proj.bias.expand(2, 7, 16), rtol=0, atol=1e-12)
    torch.testing.assert_close(out, per_token_linear_infsa(layer, x), rtol=0, atol=1e-12)


def test_linear_output_is_a_broadcast_view_of_one_vector_per_sample():
    layer = make('linear').eval()
    out = layer(torch.randn(2, 9, 16))
    assert out.shape == (2, 9, 16) and out.stride(1) == 0


def test_linear_projections_run_once_per_sample_not_per_token():
    """V and the output projection see no (B, N, C) token tensor on the fast path."""
    layer = make('linear').eval()
    seen = {}

    def record(name):

        def hook(module, args, out):
            seen[name] = tuple(args[0].shape)

        return hook

    for name in ('q_proj', 'v_proj', 'out_proj'):
        getattr(layer, name).register_forward_hook(record(name))
    layer(torch.randn(2, 9, 16))
    assert seen == {'q_proj': (2, 9, 16), 'out_proj': (2, 16)}


def test_linear_output_dropout_acts_per_token_as_before():
    """proj_drop draws one mask over the (B, N, C) tokens, the same for the same seed as the
    per-token computation, so training is unchanged."""
    layer = make('linear', proj_drop=0.5).double().train()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    torch.manual_seed(5)
    out = layer(x)
    torch.manual_seed(5)
    expected = per_token_linear_infsa(layer, x)
    assert max_relative_error(out, expected) <= 1e-10
    dropped = out == 0
    assert dropped.any() and not dropped.all(1).any()  # per token, not once per sample
    assert not torch.equal(out[:, 0], out[:, 1])


@pytest.mark.parametrize('masked', [False, True])
def test_linear_weights_path_equals_the_factorised_path(masked):
    """need_weights (and attention dropout) keep the explicit per-token path; its output and
    maps agree with the factorised one in float64."""
    layer = make('linear').double().eval()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    mask = torch.tensor([[False] * 9, [False] * 5 + [True] * 4]) if masked else None
    out, weights = layer(x, mask, need_weights=True)
    assert weights.shape == (2, 4, 9)
    assert out.stride(1) != 0  # the explicit path: per-token output, as before
    assert max_relative_error(layer(x, mask), out) <= 1e-10
    torch.testing.assert_close(weights.sum(-1), layer.rho.expand(2, 4), rtol=1e-4, atol=0)
    if masked:
        assert (weights[1, :, 5:] == 0).all()


def test_linear_autocast_output_dtype_and_accuracy():
    """Under bf16 autocast the output keeps the autocast dtype of the per-token path, and
    the float32 normalisations and pooling keep it close to the float32 output."""
    layer = make('linear').eval()
    x = torch.randn(2, 33, 16)
    reference = layer(x)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = layer(x)
        out_weights, weights = layer(x, need_weights=True)
    assert out.dtype == out_weights.dtype == torch.bfloat16
    assert weights.dtype == torch.float32
    error = (out.float() - reference).norm() / reference.norm()
    assert error < 2e-2


def test_linear_state_dict_keys_are_unchanged():
    assert list(make('linear').state_dict()) == [
        'rho_logit', 'q_proj.weight', 'q_proj.bias', 'k_proj.weight', 'k_proj.bias',
        'v_proj.weight', 'v_proj.bias', 'out_proj.weight', 'out_proj.bias'
    ]


def test_infvit_4l_linear_flops_at_224():
    """InfViT-4L Linear at 224 x 224 costs at most 17.5 GFLOPs (20.14 with per-token V and
    output projections); counted on fake tensors, so nothing of the activations is
    allocated."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.utils.flop_counter import FlopCounterMode

    from mmlinear.models import InfViT
    backbone = InfViT(arch='infvit-4l', attn_type='linear').eval()
    counter = FlopCounterMode(display=False)
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.zeros(1, 3, 224, 224)
        with counter, torch.no_grad():
            backbone(x)
    assert counter.get_total_flops() <= 17.5e9
    # The output projection runs on one 1024-vector per sample: 2 C^2 FLOPs, not 2 N C^2.
    counts = counter.get_flop_counts()
    assert sum(counts['InfViT.blocks.0.attn.out_proj'].values()) == 2 * 1024 * 1024
