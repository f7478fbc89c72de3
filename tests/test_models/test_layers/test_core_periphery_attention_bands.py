"""CorePeripheryAttention run band by band (the pieces a streamed block uses: project_tokens,
attend_to_cores, project_out and OnlineCoreAttention) equals its whole-image forward."""
import pytest
import torch

from mmlinear.models.layers import (CorePeripheryAttention, OnlineCoreAttention, Rope2D,
                                    patch_band_coords, patch_grid_coords)
from mmlinear.models.streaming import band_tokens
from mmlinear.models.streaming.token_stream import row_bands

D, HEADS = 64, 2  # head width 32
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5}


def relative_error(actual, expected):
    """Largest absolute difference over the largest absolute expected value."""
    return ((actual.double() - expected.double()).abs().max() /
            expected.double().abs().max()).item()


def make_attention(dtype, seed=0):
    torch.manual_seed(seed)
    attn = CorePeripheryAttention(D, HEADS).eval()
    with torch.no_grad():  # move the biases off zero
        for p in attn.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return attn.to(dtype)


def inputs(active_cores, hw_shape, dtype, batch=2, seed=0):
    """Tokens (B, K + N, D) and the cores' coordinates (B, K, 2) inside (-1, 1)."""
    g = torch.Generator().manual_seed(seed)
    num_patches = hw_shape[0] * hw_shape[1]
    x = torch.randn(batch, active_cores + num_patches, D, generator=g, dtype=torch.float64)
    core_coords = torch.rand(batch, active_cores, 2, generator=g) * 1.8 - 0.9
    return x.to(dtype), core_coords


def padding_mask(hw_shape, valid_hw):
    Hp, Wp = hw_shape
    rows = torch.arange(Hp)[None, :, None]
    cols = torch.arange(Wp)[None, None, :]
    inside = (rows < valid_hw[:, 0, None, None]) & (cols < valid_hw[:, 1, None, None])
    return ~inside.flatten(1)


def by_bands(attn, rope, x, core_coords, hw_shape, height, valid_hw, mask):
    """The attention output assembled band by band, and each band's patch rows."""
    active_cores = core_coords.shape[1]
    core_cos, core_sin = rope(core_coords)
    q_cores, k_cores, v_cores = attn.project_tokens(x[:, :active_cores], core_cos, core_sin)
    online = OnlineCoreAttention(q_cores)
    online.add(k_cores, v_cores)
    patch_rows = []
    for rows in row_bands(hw_shape[0], height):
        tokens = band_tokens(hw_shape, rows)
        cos, sin = rope(patch_band_coords(hw_shape, rows, valid_hw))
        band = x[:, active_cores:][:, tokens]
        q, k, v = attn.project_tokens(band, cos.expand(x.shape[0], -1, -1),
                                      sin.expand(x.shape[0], -1, -1))
        online.add(k, v, None if mask is None else mask[:, tokens])
        patch_rows.append(attn.project_out(attn.attend_to_cores(q, k_cores, v_cores)))
    return attn.project_out(online.result()), patch_rows


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('active_cores', [8, 64])
@pytest.mark.parametrize('height', [1, 3, 7])
@pytest.mark.parametrize('masked', [False, True])
def test_band_by_band_equals_the_whole_forward(dtype, active_cores, height, masked):
    hw_shape = (7, 5)
    valid_hw = torch.tensor([[4, 3], [7, 5]]) if masked else None
    mask = padding_mask(hw_shape, valid_hw) if masked else None
    attn, rope = make_attention(dtype), Rope2D(D // HEADS).eval()
    x, core_coords = inputs(active_cores, hw_shape, dtype)
    coords = torch.cat([core_coords, patch_grid_coords(hw_shape, valid_hw).expand(2, -1, -1)], 1)
    cos, sin = rope(coords)
    with torch.no_grad():
        whole = attn(x, mask, active_cores=active_cores, cos=cos, sin=sin)
        cores, patch_rows = by_bands(attn, rope, x, core_coords, hw_shape, height, valid_hw, mask)
    assert cores.dtype == dtype
    assert relative_error(cores, whole[:, :active_cores]) < TOLERANCE[dtype]
    start = active_cores
    for rows in patch_rows:  # each band's patch outputs are its rows of the whole forward
        assert relative_error(rows, whole[:, start:start + rows.shape[1]]) < TOLERANCE[dtype]
        start += rows.shape[1]
    assert start == whole.shape[1]
    assembled = torch.cat([cores, *patch_rows], dim=1)
    assert relative_error(assembled, whole) < TOLERANCE[dtype]


def test_project_tokens_of_a_band_is_the_slice_of_the_whole():
    attn, rope = make_attention(torch.float64), Rope2D(D // HEADS).eval()
    x, core_coords = inputs(8, (7, 5), torch.float64)
    coords = torch.cat([core_coords, patch_grid_coords((7, 5)).expand(2, -1, -1)], 1)
    cos, sin = rope(coords)
    with torch.no_grad():
        whole = attn.project_tokens(x, cos, sin)
        band = attn.project_tokens(x[:, 18:28], cos[:, 18:28], sin[:, 18:28])
    for part, full in zip(band, whole):
        assert part.shape == (2, HEADS, 10, D // HEADS)
        assert relative_error(part, full[:, :, 18:28]) < 1e-12


def test_project_out_joins_the_parts_in_order():
    attn = make_attention(torch.float64)
    parts = [torch.randn(2, HEADS, n, D // HEADS, dtype=torch.float64) for n in (3, 4)]
    with torch.no_grad():
        joined = attn.project_out(*parts)
        separate = [attn.project_out(p) for p in parts]
    assert joined.shape == (2, 7, D)
    assert relative_error(torch.cat(separate, dim=1), joined) < 1e-12


def test_bad_band_input_is_refused_with_the_problem_named():
    attn = make_attention(torch.float32)
    x = torch.randn(2, 10, D)
    cos, sin = Rope2D(D // HEADS)(torch.rand(2, 9, 2))
    with pytest.raises(ValueError, match='cos and sin must hold the angles of the 10 tokens'):
        attn.project_tokens(x, cos, sin)
    q, k, v = attn.project_tokens(x[:, :9], cos, sin)
    with pytest.raises(ValueError, match='must share B, heads and head_dims'):
        attn.attend_to_cores(q, k[:, :, :4], v[:, :, :5])
    with pytest.raises(ValueError, match='must share B, heads and head_dims'):
        attn.attend_to_cores(q[:1], k[:, :, :4], v[:, :, :4])
