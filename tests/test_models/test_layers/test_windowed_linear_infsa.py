"""Linear-InfSA with a context window: every patch token's output against the formulas written
out over that token's window, in float64; the window that covers the grid against the whole
summary; the values refused."""
import math

import pytest
import torch

from mmlinear.models.backbones import InfViT
from mmlinear.models.layers import InfSAAttention

GRID = (7, 6)
E = 1  # one extra token (CLS) before the patches


def attention(**kwargs):
    torch.manual_seed(0)
    attn = InfSAAttention(12, 3, attn_type='linear', **kwargs).double().eval()
    with torch.no_grad():
        attn.rho_logit.copy_(torch.tensor([0.3, -0.4, 1.2]))
    return attn


def tokens(batch=2, grid=GRID):
    return torch.randn(
        batch,
        E + grid[0] * grid[1],
        12,
        generator=torch.Generator().manual_seed(1),
        dtype=torch.float64)


def padding_mask(grid=GRID, valid=(5, 3)):
    """Image 0 whole, image 1 valid in its top-left ``valid`` rows and columns."""
    mask = torch.zeros(2, *grid, dtype=torch.bool)
    mask[1, valid[0]:] = True
    mask[1, :, valid[1]:] = True
    return mask.flatten(1)


def reference(attn, x, mask, grid, window):
    """Each patch token's output by the formulas, a token at a time: its window of the
    image's valid region (centred, shifted inside at the borders), the valid tokens in it
    and the CLS token; the central query over them, the key scores against it, the pooled
    value, the output projection."""
    B, T, C = x.shape
    H, d, eps = attn.num_heads, attn.head_dims, attn.eps
    rows, cols = grid
    q = attn.q_proj(x).reshape(B, T, H, d) / math.sqrt(d)
    k = (attn.k_proj or attn.q_proj)(x).reshape(B, T, H, d) / math.sqrt(d)
    v = attn.v_proj(x).reshape(B, T, H, d)
    rho = attn.rho
    out = torch.empty(B, rows * cols, C, dtype=x.dtype)
    for b in range(B):
        valid = torch.ones(
            rows, cols, dtype=torch.bool) if mask is None else ~mask[b].view(rows, cols)
        height, width = int(valid.any(1).sum()), int(valid.any(0).sum())
        h, w = min(window[0], height), min(window[1], width)
        for r in range(rows):
            for c in range(cols):
                top = min(max(r - (h - 1) // 2, 0), height - h)
                left = min(max(c - (w - 1) // 2, 0), width - w)
                members = list(range(E)) + [
                    E + i * cols + j for i in range(top, top + h)
                    for j in range(left, left + w) if valid[i, j]
                ]
                qs, ks, vs = q[b, members], k[b, members], v[b, members]  # (M, H, d)
                energy = qs.norm(dim=-1)  # (M, H)
                central = (energy[..., None] * qs).sum(0) / (energy.sum(0)[:, None] + eps)
                scores = torch.relu((ks * central).sum(-1))  # (M, H)
                weights = rho * scores / (scores.sum(0) + eps)
                pooled = (weights[..., None] * vs).sum(0)  # (H, d)
                out[b, r * cols + c] = attn.out_proj(pooled.reshape(C))
    return out


@pytest.mark.parametrize('window', [(3, 3), (4, 4), (2, 5), (5, 2), (1, 1), (4, 9)])
@pytest.mark.parametrize('masked', [False, True])
def test_each_token_equals_the_formulas_over_its_window(window, masked):
    """Odd, even, rectangular windows, one wider than the grid; every token of a 7 x 6 grid
    (the borders included), with and without a padding mask (a 5 x 3 valid region, smaller
    than some windows)."""
    attn = attention()
    x = tokens()
    mask = padding_mask() if masked else None
    with torch.no_grad():
        out = attn(x, mask, num_extra_tokens=E, hw_shape=GRID, context_window=window)
        whole = attn(x, mask, num_extra_tokens=E)
        expected = reference(attn, x, mask, GRID, window)
    torch.testing.assert_close(out[:, E:], expected, rtol=1e-10, atol=1e-12)
    # The CLS token keeps the whole sequence's summary.
    assert torch.equal(out[:, :E], whole[:, :E])


def test_tied_queries_and_keys():
    attn = attention(tie_qk=True)
    x = tokens()
    with torch.no_grad():
        out = attn(x, None, num_extra_tokens=E, hw_shape=GRID, context_window=(3, 4))
        expected = reference(attn, x, None, GRID, (3, 4))
    torch.testing.assert_close(out[:, E:], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('window', [GRID, (7, 9), (20, 20)])
@pytest.mark.parametrize('masked', [False, True])
def test_window_covering_the_grid_is_the_whole_summary_exactly(window, masked):
    attn = attention()
    x = tokens()
    mask = padding_mask() if masked else None
    with torch.no_grad():
        out = attn(x, mask, num_extra_tokens=E, hw_shape=GRID, context_window=window)
        whole = attn(x, mask, num_extra_tokens=E)
    assert torch.equal(out, whole)


def test_window_of_the_valid_region_is_its_whole_summary():
    """A window as large as an image's valid region gives every token of it that region's
    summary, as the whole path does for the padded image (up to the box sums' rounding)."""
    attn = attention()
    x = tokens()
    mask = padding_mask(valid=(3, 3))
    with torch.no_grad():
        out = attn(x, mask, num_extra_tokens=E, hw_shape=GRID, context_window=(3, 3))
        whole = attn(x, mask, num_extra_tokens=E)
    valid = ~mask[1]
    torch.testing.assert_close(out[1, E:][valid], whole[1, E:][valid], rtol=1e-12, atol=1e-12)


def test_gradients_reach_the_projections():
    attn = attention()
    x = tokens().requires_grad_()
    attn(x, None, num_extra_tokens=E, hw_shape=GRID, context_window=(3, 3)).sum().backward()
    assert x.grad.abs().sum() > 0 and attn.rho_logit.grad.abs().sum() > 0


def test_refusals():
    attn = attention()
    x = tokens()
    with pytest.raises(ValueError, match='needs the patch grid'):
        attn(x, None, num_extra_tokens=E, context_window=(3, 3))
    with pytest.raises(ValueError, match='no attention weights'):
        attn(x, None, num_extra_tokens=E, hw_shape=GRID, context_window=(3, 3), need_weights=True)
    softmax = InfSAAttention(12, 3, attn_type='softmax')
    with pytest.raises(ValueError, match="'linear' attention only"):
        softmax(x.float(), None, num_extra_tokens=E, hw_shape=GRID, context_window=(3, 3))


@pytest.mark.parametrize('bad', [0, -2, 2.5, (3, 0), (2, 3, 4), 'local', True, [3]])
def test_backbone_refuses_bad_windows_naming_the_allowed(bad):
    with pytest.raises(ValueError, match=r"None or 'whole'.*positive int.*tokens of the patch"):
        InfViT(arch='test', img_size=32, patch_size=8, context_window=bad)
    model = InfViT(arch='test', img_size=32, patch_size=8)
    with pytest.raises(ValueError, match='positive int'):
        model.context_window = bad


def test_backbone_window_for_other_attention_is_refused():
    with pytest.raises(ValueError, match="attn_type='linear' only"):
        InfViT(arch='test', img_size=32, patch_size=8, attn_type='softmax', context_window=4)


@pytest.mark.parametrize('value, window', [(None, None), ('whole', None), (4, (4, 4)),
                                           ((3, 5), (3, 5)), ([2, 6], (2, 6))])
def test_backbone_window_values(value, window):
    model = InfViT(arch='test', img_size=32, patch_size=8, context_window=value)
    assert model.context_window == window
