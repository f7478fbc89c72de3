"""VECA layers: 2D RoPE, core-periphery attention, SwiGLU, block, core bank, coordinate head
against the behaviour of the official VECA code (locality, the two-call attention equal to
one masked call, RoPE invariances, permutation equivariance, the core bank)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from mmlinear.models.layers import (CorePeripheryAttention, PatchRope, ProjPatchEmbed, Rope2D,
                                    VECABlock, apply_rope, build_coordinate_head, build_core_bank,
                                    check_core_budget, farthest_point_sampling, fps_core_coords,
                                    move_cores, patch_grid_coords, rotate_pairs)
from mmlinear.models.utils import extend_padding_mask

K, N, D, HEADS = 8, 12, 64, 2  # head width 32: 8 frequencies, 1 zeroed


def block_inputs(seed=0, batch=2):
    """Random [cores; patches] tokens and coordinates: cores inside (-1, 1), patches on a
    3 x 4 grid."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, K + N, D, generator=g)
    cores = torch.rand(batch, K, 2, generator=g) * 1.8 - 0.9
    patches = patch_grid_coords((3, 4)).expand(batch, -1, -1)
    return x, torch.cat([cores, patches], dim=1)


def make_block(seed=0):
    torch.manual_seed(seed)
    block = VECABlock(D, HEADS, 96).eval()
    with torch.no_grad():  # move LayerNorms and biases off their trivial init
        for p in block.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return block


class GivenAngles:
    """Given patch angles in place of a :class:`PatchRope` (the block asks for ``grid()``)."""

    def __init__(self, cos, sin):
        self.angles = cos, sin

    def grid(self):
        return self.angles


def rope_args(cos, sin, active_cores=K):
    """The block's named arguments for the angles (B, K + n, d) of [cores; patches]."""
    return dict(
        active_cores=active_cores,
        core_rope=(cos[:, :active_cores], sin[:, :active_cores]),
        patch_rope=GivenAngles(cos[:, active_cores:], sin[:, active_cores:]))


def run_block(block, x, coords, rope=None):
    rope = rope or Rope2D(D // HEADS)
    with torch.no_grad():
        return block(x, **rope_args(*rope(coords)))


# --- 2D RoPE --------------------------------------------------------------------------------


def test_rope_periods_base_100_with_the_two_lowest_frequencies_zeroed():
    rope = Rope2D(64)
    expected = [100**(j / 16) for j in range(14)] + [math.inf, math.inf]
    assert rope.periods.tolist() == pytest.approx(expected, rel=1e-6)
    assert 'periods' not in rope.state_dict()  # derived, as the reference's non-persistent buffer
    assert torch.isinf(Rope2D(64, p_zero_freqs=0.).periods).sum() == 0


def test_rope_interleaved_pairs_x_then_y():
    rope = Rope2D(64)
    x_coord, y_coord = 0.3, -0.7
    cos, sin = rope(torch.tensor([[[x_coord, y_coord]]]))
    assert cos.dtype == torch.float32 and cos.shape == (1, 1, 64)
    q = torch.zeros(1, 1, 1, 64, dtype=torch.float64)
    q[..., 2] = 1.  # pair 1 of the x half, period 100 ** (1 / 16)
    q[..., 32 + 5] = 1.  # odd member of pair 2 of the y half
    out = apply_rope(q, cos, sin)[0, 0, 0]
    ax = 2 * math.pi * x_coord / 100**(1 / 16)
    ay = 2 * math.pi * y_coord / 100**(2 / 16)
    expected = torch.zeros(64, dtype=torch.float64)
    expected[2], expected[3] = math.cos(ax), math.sin(ax)  # (a, b) = (1, 0)
    expected[36], expected[37] = -math.sin(ay), math.cos(ay)  # (a, b) = (0, 1)
    torch.testing.assert_close(out, expected, atol=1e-6, rtol=0)


def test_rope_zero_frequency_channels_are_never_rotated():
    rope = Rope2D(64)
    coords = torch.rand(1, 5, 2) * 4 - 2
    q = torch.randn(1, 3, 5, 64)
    out = apply_rope(q, *rope(coords))
    untouched = [28, 29, 30, 31, 60, 61, 62, 63]
    assert torch.equal(out[..., untouched], q[..., untouched])
    assert (out[..., :28] - q[..., :28]).abs().max() > 1e-2


def test_rope_equals_the_pair_rotation_formula_exactly():
    """The complex product makes the same products and sums as x cos + rotate_pairs(x) sin,
    also on the strided (B, heads, T, d) view of a projection."""
    rope = Rope2D(64)
    cos, sin = rope(torch.rand(2, 7, 2) * 2 - 1)
    for dtype in (torch.float32, torch.float64):
        q = torch.randn(2, 7, 3, 64, dtype=dtype).transpose(1, 2)
        formula = q * cos.to(dtype)[:, None] + rotate_pairs(q) * sin.to(dtype)[:, None]
        assert torch.equal(apply_rope(q, cos, sin), formula)


def test_rope_rotates_half_precision_in_float32_and_rounds_once():
    rope = Rope2D(64)
    cos, sin = rope(torch.rand(1, 9, 2) * 2 - 1)
    q = torch.randn(1, 2, 9, 64).to(torch.bfloat16)
    assert torch.equal(apply_rope(q, cos, sin), apply_rope(q.float(), cos, sin).to(torch.bfloat16))


def test_rope_keeps_the_dtype_and_computes_angles_in_fp32():
    rope = Rope2D(64)
    coords = torch.tensor([[[0.9, -0.4]]])
    cos, sin = rope(coords.to(torch.bfloat16))
    ref_cos, _ = rope(coords.to(torch.bfloat16).float())
    assert cos.dtype == torch.float32 and torch.equal(cos, ref_cos)
    q = torch.randn(1, 1, 1, 64).to(torch.bfloat16)
    assert apply_rope(q, cos, sin).dtype == torch.bfloat16


def test_rope_rejects_bad_options():
    with pytest.raises(ValueError, match='divisible by 4'):
        Rope2D(30)
    with pytest.raises(ValueError, match='p_zero_freqs'):
        Rope2D(64, p_zero_freqs=1.5)
    with pytest.raises(ValueError, match='rescale_coords'):
        Rope2D(64, rescale_coords=0.5)


def test_patch_grid_coords_of_a_2x3_grid():
    grid = patch_grid_coords((2, 3))
    expected = torch.tensor([[-2 / 3, -1 / 2], [0, -1 / 2], [2 / 3, -1 / 2], [-2 / 3, 1 / 2],
                             [0, 1 / 2], [2 / 3, 1 / 2]])
    torch.testing.assert_close(grid, expected[None], atol=1e-7, rtol=0)


def test_patch_grid_of_a_valid_region_ignores_the_padding():
    grid = patch_grid_coords((3, 5), torch.tensor([[2, 3], [3, 5]]))
    assert grid.shape == (2, 15, 2)
    valid = grid[0].view(3, 5, 2)[:2, :3].reshape(6, 2)
    torch.testing.assert_close(valid, patch_grid_coords((2, 3))[0], atol=0, rtol=0)
    torch.testing.assert_close(grid[1], patch_grid_coords((3, 5))[0], atol=0, rtol=0)


def test_patch_coordinate_augmentation_one_shift_and_scale_per_batch():
    rope = Rope2D(64)
    coords = patch_grid_coords((4, 6)).expand(3, -1, -1)
    assert rope.eval().draw_augmentation(coords.device) is None
    assert torch.equal(rope.augment(coords, None), coords)
    rope.train()
    torch.manual_seed(0)
    scales = []
    for _ in range(50):
        out = rope.augment(coords, rope.draw_augmentation(coords.device))
        assert torch.equal(out[0], out[1]) and torch.equal(out[0], out[2])  # shared draw
        # out = (c + t) * s: recover s per axis from two patches and t from one.
        sx = (out[0, 1, 0] - out[0, 0, 0]) / (coords[0, 1, 0] - coords[0, 0, 0])
        sy = (out[0, 6, 1] - out[0, 0, 1]) / (coords[0, 6, 1] - coords[0, 0, 1])
        torch.testing.assert_close(sx, sy)  # one scalar for both axes
        shift = out[0, 0] / sx - coords[0, 0]
        assert 0.5 - 1e-6 <= sx <= 2 + 1e-6 and shift.abs().max() <= 0.08 + 1e-5
        scales.append(float(sx))
    assert min(scales) < 0.8 and max(scales) > 1.25  # the scale really varies


# --- attention and block --------------------------------------------------------------------


def test_patch_rope_bands_are_the_grid_rows_with_one_augmentation_draw():
    """The streamed forward's band angles are the whole forward's rows, bit for bit, also
    with the training augmentation, which is drawn once per forward."""
    rope = Rope2D(64).train()
    valid_hw = torch.tensor([[4, 6], [3, 5]])
    torch.manual_seed(0)
    patch_rope = PatchRope(rope, (4, 6), valid_hw, batch=2)
    grid_cos, grid_sin = patch_rope.grid()
    assert patch_rope.grid()[0] is grid_cos  # computed once
    band_cos, band_sin = patch_rope.rows(1, 3)
    assert torch.equal(band_cos, grid_cos[:, 6:18]) and torch.equal(band_sin, grid_sin[:, 6:18])
    torch.manual_seed(0)
    drawn = rope.draw_augmentation(valid_hw.device)
    coords = rope.augment(patch_grid_coords((4, 6), valid_hw), drawn)
    assert torch.equal(rope(coords)[0], grid_cos)
    assert not torch.equal(PatchRope(rope.eval(), (4, 6), valid_hw, batch=2).grid()[0], grid_cos)


def test_block_keys_are_the_released_ones():
    keys = set(VECABlock(D, HEADS, 96).state_dict())
    expected = {
        f'{m}.{p}'
        for m in [
            'norm_attn', 'norm_ffn', 'fc1', 'fc2', 'attn.q_proj', 'attn.k_proj', 'attn.v_proj',
            'attn.out_proj'
        ]
        for p in ['weight', 'bias']
    }
    assert keys == expected
    block = VECABlock(D, HEADS, 96)
    assert block.fc1.weight.shape == (192, D) and block.fc2.weight.shape == (D, 96)


def test_block_matches_its_definition():
    """x + attn(LN(x)), then x + fc2(SiLU(u) * g) with (u, g) the halves of fc1(LN(x))."""
    block = make_block()
    x, coords = block_inputs()
    cos, sin = Rope2D(D // HEADS)(coords)
    with torch.no_grad():
        h = x + block.attn(block.norm_attn(x), active_cores=K, cos=cos, sin=sin)
        u, g = F.linear(block.norm_ffn(h), block.fc1.weight, block.fc1.bias).split(96, dim=-1)
        expected = h + block.fc2(F.silu(u) * g)
    torch.testing.assert_close(run_block(block, x, coords), expected, atol=0, rtol=0)


def test_block_locality():
    block = make_block()
    x, coords = block_inputs()
    out = run_block(block, x, coords)
    i = K + 5
    x2 = x.clone()
    x2[:, i] += torch.randn(D)
    out2 = run_block(block, x2, coords)
    others = [t for t in range(K, K + N) if t != i]
    assert (out2[:, others] - out[:, others]).abs().max() == 0.0  # bit-identical
    assert (out2[:, i] - out[:, i]).abs().max() > 1e-3
    assert ((out2[:, :K] - out[:, :K]).abs().amax(-1) > 0).all()  # every core changes


def test_equals_one_dense_masked_attention():
    torch.manual_seed(0)
    attn = CorePeripheryAttention(D, HEADS).eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    x, coords = block_inputs()
    cos, sin = Rope2D(D // HEADS)(coords)
    T = K + N
    idx = torch.arange(T)
    allowed = (idx[:, None] < K) | (idx[None, :] < K)
    with torch.no_grad():
        q = apply_rope(attn.split_heads(attn.q_proj(x)), cos, sin)
        k = apply_rope(attn.split_heads(attn.k_proj(x)), cos, sin)
        v = attn.split_heads(attn.v_proj(x))
        dense = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        dense = attn.out_proj(dense.transpose(1, 2).reshape(2, T, D))
        two_calls = attn(x, active_cores=K, cos=cos, sin=sin)
    torch.testing.assert_close(two_calls, dense, atol=1e-6, rtol=0)


def test_padded_patches_are_invisible_to_the_cores():
    """A key-padding mask equals dropping the padded patches from the sequence."""
    block = make_block()
    x, coords = block_inputs(batch=1)
    mask = torch.zeros(1, N, dtype=torch.bool)
    mask[:, 7:] = True
    cos, sin = Rope2D(D // HEADS)(coords)
    keep = K + 7
    with torch.no_grad():
        masked = block(x, mask, **rope_args(cos, sin))
        x_noise = x.clone()
        x_noise[:, keep:] += torch.randn(N - 7, D) * 5  # padding content must not matter
        masked_noise = block(x_noise, mask, **rope_args(cos, sin))
        dropped = block(x[:, :keep], **rope_args(cos[:, :keep], sin[:, :keep]))
    torch.testing.assert_close(masked[:, :keep], dropped, atol=1e-6, rtol=0)
    torch.testing.assert_close(masked_noise[:, :keep], masked[:, :keep], atol=1e-6, rtol=0)
    unmasked = run_block(block, x, coords)
    assert (unmasked[:, :K] - masked[:, :K]).abs().max() > 1e-4  # the mask does something


def test_core_attention_weights_are_the_rows_sdpa_applies():
    """need_weights returns the core rows: they reproduce the cores' attention output, sum to
    1, are zero on padded patches, and leave the block output unchanged."""
    block = make_block()
    attn = block.attn
    x, coords = block_inputs()
    cos, sin = Rope2D(D // HEADS)(coords)
    mask = torch.zeros(2, N, dtype=torch.bool)
    mask[1, 9:] = True
    with torch.no_grad():
        out, weights = block(x, mask, **rope_args(cos, sin), need_weights=True)
        torch.testing.assert_close(out, block(x, mask, **rope_args(cos, sin)), atol=0, rtol=0)
        normed = block.norm_attn(x)
        v = attn.split_heads(attn.v_proj(normed))
        sdpa_cores = F.scaled_dot_product_attention(
            apply_rope(attn.split_heads(attn.q_proj(normed)), cos, sin)[:, :, :K],
            apply_rope(attn.split_heads(attn.k_proj(normed)), cos, sin),
            v,
            attn_mask=~extend_padding_mask(mask, K, K + N)[:, None, None, :])
    assert weights.shape == (2, HEADS, K, K + N)
    torch.testing.assert_close(weights @ v, sdpa_cores, atol=1e-5, rtol=0)
    torch.testing.assert_close(weights.sum(-1), torch.ones(2, HEADS, K))
    assert bool((weights[1, :, :, K + 9:] == 0).all()) and bool((weights[0] > 0).all())


def test_attention_rejects_a_budget_without_patches():
    attn = CorePeripheryAttention(D, HEADS)
    x, coords = block_inputs()
    with pytest.raises(ValueError, match='active_cores'):
        cos, sin = Rope2D(D // HEADS)(coords)
        attn(x, active_cores=K + N, cos=cos, sin=sin)
    with pytest.raises(ValueError, match='divisible by num_heads'):
        CorePeripheryAttention(30, 4)


def test_translation_invariance_and_scale_sensitivity():
    block = make_block()
    x, coords = block_inputs()
    out = run_block(block, x, coords)
    shifted = run_block(block, x, coords + torch.tensor([0.37, -0.21]))
    torch.testing.assert_close(shifted, out, atol=2e-6, rtol=0)
    scaled = run_block(block, x, coords * 1.7)
    assert (scaled - out).abs().max() > 1e-3


def test_patch_permutation_equivariance():
    block = make_block()
    x, coords = block_inputs()
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(1))
    order = torch.cat([torch.arange(K), K + perm])
    out = run_block(block, x, coords)
    out_perm = run_block(block, x[:, order], coords[:, order])
    torch.testing.assert_close(out_perm[:, K:], out[:, K + perm], atol=1e-6, rtol=0)
    torch.testing.assert_close(out_perm[:, :K], out[:, :K], atol=1e-6, rtol=0)


# --- core bank and coordinate head -----------------------------------------------------------


def test_farthest_point_sampling_greedy_order():
    points = torch.tensor([[0.9, 0.], [0.1, 0.], [-0.8, 0.], [0.5, 0.], [-0.3, 0.]])
    # nearest the origin, then farthest from it, then farthest from both, ...
    assert farthest_point_sampling(points, 4).tolist() == [1, 2, 0, 4]
    assert farthest_point_sampling(points, 9).tolist() == [0, 1, 2, 3, 4]


def test_core_bank_init():
    torch.manual_seed(3)
    tokens, raw = build_core_bank(64, 8, 768)
    assert len(tokens) == len(raw) == 8
    assert all(t.shape == (1, 8, 768) for t in tokens) and all(r.shape == (1, 8, 2) for r in raw)
    std = torch.cat(list(tokens), 1).std().item()
    assert abs(std - 1 / math.sqrt(768)) < 0.05 / math.sqrt(768)

    # The coordinates are the FPS order of a pool drawn right after the tokens.
    torch.manual_seed(3)
    for _ in range(8):  # the token draws, chunk by chunk
        torch.randn(1, 8, 768)
    pool = torch.empty(1000, 2).uniform_(-0.95, 0.95)
    start = torch.tanh(torch.cat(list(raw), 1)[0])
    torch.testing.assert_close(start[0], pool[(pool**2).sum(1).argmin()])
    assert start.abs().max() <= 0.95 + 1e-6
    for point in start:  # every picked point is a pool point
        assert ((pool - point).norm(dim=1).min() < 1e-5)

    def min_pairwise(points):
        d = torch.cdist(points, points)
        return d[~torch.eye(len(points), dtype=torch.bool)].min()

    assert min_pairwise(start[:8]) > min_pairwise(start)
    assert start[0].norm() < 0.1  # the global core starts near the centre


def test_fps_core_coords_are_atanh_of_the_points():
    torch.manual_seed(0)
    raw = fps_core_coords(16, pool_size=50, coord_range=0.5)
    assert raw.shape == (16, 2) and torch.tanh(raw).abs().max() <= 0.5 + 1e-6
    with pytest.raises(ValueError, match='multiple of the chunk size'):
        build_core_bank(60, 8, 16)


@pytest.mark.parametrize('value', [8, 16, 24, 32, 40, 48, 56, 64, np.int64(24)])
def test_core_budget_accepts_multiples_of_8(value):
    assert check_core_budget(value, 64, 8) == int(value)


@pytest.mark.parametrize('value',
                         [0, 1, 7, 12, 63, 65, 72, -8, True, 8.0, '8', None,
                          torch.tensor(8)])
def test_core_budget_rejects_everything_else(value):
    with pytest.raises(ValueError, match=r'\(8, 16, 24, 32, 40, 48, 56, 64\)'):
        check_core_budget(value, 64, 8)


def test_coordinate_head():
    linears, alpha = build_coordinate_head(D, 5)
    assert len(linears) == 4 and all(lin.weight.shape == (2, D) for lin in linears)
    assert torch.equal(alpha.data, torch.full((4, ), 0.01))
    raw, cores = torch.randn(2, K, 2), torch.randn(2, K, D)
    moved = move_cores(raw, cores, linears[1], alpha[1])
    torch.testing.assert_close(moved, raw + 0.01 * linears[1](cores))
    assert build_coordinate_head(D, 1)[1].shape == (0, )


def test_proj_patch_embed_names_its_conv_proj():
    embed = ProjPatchEmbed(3, 8, 16)
    assert set(embed.state_dict()) == {'proj.weight', 'proj.bias'}
    assert embed.projection is embed.proj
    tokens, hw = embed(torch.randn(1, 3, 40, 50))
    assert hw == (3, 4) and tokens.shape == (1, 12, 8)
