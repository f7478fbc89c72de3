"""OnlineCoreAttention: the cores' softmax attention folded over bands of keys / values equals
one SDPA call over all tokens (float64 to 1e-12, float32 to 1e-5 relative), whatever the band
heights, their order, the padding and the score magnitudes."""
import pytest
import torch
import torch.nn.functional as F

from mmlinear.models.layers import OnlineCoreAttention
from mmlinear.models.streaming import band_tokens
from mmlinear.models.streaming.token_stream import row_bands
from mmlinear.models.utils import extend_padding_mask

HEADS, HEAD_DIMS = 2, 16
TOLERANCE = {torch.float64: 1e-12, torch.float32: 1e-5}


def relative_error(actual, expected):
    """Largest absolute difference over the largest absolute expected value."""
    return ((actual.double() - expected.double()).abs().max() /
            expected.double().abs().max()).item()


def grid_mask(hw_shape, valid_hw):
    """(B, Hp * Wp) bool, True outside each image's top-left valid (rows, columns)."""
    Hp, Wp = hw_shape
    rows = torch.arange(Hp)[None, :, None]
    cols = torch.arange(Wp)[None, None, :]
    valid = torch.tensor(valid_hw)
    inside = (rows < valid[:, 0, None, None]) & (cols < valid[:, 1, None, None])
    return ~inside.flatten(1)


def qkv(active_cores, num_patches, dtype, batch=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    shape = (batch, HEADS, active_cores + num_patches, HEAD_DIMS)
    q, k, v = (torch.randn(shape, generator=g, dtype=torch.float64).to(dtype) for _ in range(3))
    return q[:, :, :active_cores], k, v


def sdpa_mask(active_cores, mask):
    """(B, 1, 1, K + N) bool, True where the core queries may attend (SDPA's convention)."""
    return ~extend_padding_mask(mask, active_cores, active_cores + mask.shape[1])[:, None, None, :]


def accumulate(q, k, v, active_cores, hw_shape, height, mask=None, cores_last=False):
    """The cores' band (never masked) and the patches in bands of ``height`` grid rows."""
    online = OnlineCoreAttention(q)
    if not cores_last:
        online.add(k[:, :, :active_cores], v[:, :, :active_cores])
    for rows in row_bands(hw_shape[0], height):
        tokens = band_tokens(hw_shape, rows)
        band = slice(active_cores + tokens.start, active_cores + tokens.stop)
        online.add(k[:, :, band], v[:, :, band], None if mask is None else mask[:, tokens])
    if cores_last:
        online.add(k[:, :, :active_cores], v[:, :, :active_cores])
    return online.result()


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('active_cores', [8, 64])
@pytest.mark.parametrize('hw_shape,valid_hw', [((7, 5), [(4, 3), (7, 5)]), ((4, 6), [(2, 5),
                                                                                     (4, 6)])])
@pytest.mark.parametrize('height', [1, 3, 'all'])
@pytest.mark.parametrize('masked', [False, True])
def test_bands_equal_sdpa_over_all_tokens(dtype, active_cores, hw_shape, valid_hw, height, masked):
    """One-row bands, bands that do not divide the grid (3 into 7 and 4 rows) and the whole
    grid; with the mask, sample 0's last rows are bands that are all padding."""
    height = hw_shape[0] if height == 'all' else height
    num_patches = hw_shape[0] * hw_shape[1]
    q, k, v = qkv(active_cores, num_patches, dtype)
    mask = grid_mask(hw_shape, valid_hw) if masked else None
    attn_mask = None if mask is None else sdpa_mask(active_cores, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
    out = accumulate(q, k, v, active_cores, hw_shape, height, mask)
    assert out.dtype == dtype and out.shape == q.shape
    assert relative_error(out, expected) < TOLERANCE[dtype]
    if masked:  # the mask does something
        assert relative_error(F.scaled_dot_product_attention(q, k, v), expected) > 1e-3


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
def test_a_first_band_that_is_all_padding_for_one_sample(dtype):
    """Patches first, the cores last: sample 0 sees only padded keys in its first bands (its
    running maximum is still -inf there), and nothing turns into NaN."""
    hw_shape, active_cores = (7, 5), 8
    q, k, v = qkv(active_cores, 35, dtype)
    mask = grid_mask(hw_shape, [(4, 3), (7, 5)])
    mask[0, :10] = True  # rows 0 and 1 of sample 0 padded as well
    online = OnlineCoreAttention(q)
    online.add(k[:, :, active_cores:active_cores + 10], v[:, :, active_cores:active_cores + 10],
               mask[:, :10])
    assert torch.isfinite(online.acc).all() and torch.isfinite(online.sum).all()
    assert (online.sum[0] == 0).all() and (online.acc[0] == 0).all()
    assert (online.sum[1] > 0).all()
    online.add(k[:, :, active_cores + 10:], v[:, :, active_cores + 10:], mask[:, 10:])
    online.add(k[:, :, :active_cores], v[:, :, :active_cores])
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask(active_cores, mask))
    out = online.result()
    assert torch.isfinite(out).all()
    assert relative_error(out, expected) < TOLERANCE[dtype]


@pytest.mark.parametrize('height', [1, 3])
def test_cores_added_last_give_the_same_result(height):
    hw_shape, active_cores = (7, 5), 8
    q, k, v = qkv(active_cores, 35, torch.float64)
    mask = grid_mask(hw_shape, [(4, 3), (7, 5)])
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask(active_cores, mask))
    out = accumulate(q, k, v, active_cores, hw_shape, height, mask, cores_last=True)
    assert relative_error(out, expected) < 1e-12


def test_a_rising_maximum_is_rescaled_without_overflow():
    """Each band's keys are larger than the last's, so the running maximum rises at every
    band (up to scores near 2000, where exp overflows even float64 without the maximum
    subtracted); the rescaled sums still equal SDPA."""
    hw_shape, active_cores = (7, 5), 8
    q, k, v = qkv(active_cores, 35, torch.float64)
    k = k.clone()
    for i, rows in enumerate(row_bands(7, 1)):
        tokens = band_tokens(hw_shape, rows)
        k[:, :, active_cores + tokens.start:active_cores + tokens.stop] *= 60. * (i + 1)
    scores = q @ k.transpose(-2, -1) / HEAD_DIMS**0.5
    assert scores.amax() > 1000  # exp(1000) is inf in float64
    expected = F.scaled_dot_product_attention(q, k, v)
    out = accumulate(q, k, v, active_cores, hw_shape, 1)
    assert torch.isfinite(out).all()
    assert relative_error(out, expected) < 1e-12


def test_half_precision_queries_accumulate_in_float32():
    q, k, v = qkv(8, 35, torch.float64)
    expected = F.scaled_dot_product_attention(q, k, v)
    q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    out = accumulate(q, k, v, 8, (7, 5), 3)
    assert out.dtype == torch.bfloat16
    assert relative_error(out, expected) < 3e-2  # bf16 inputs and output, float32 state


def test_the_sums_stay_float32_under_autocast():
    """Autocast would run the products in bfloat16 (errors near 1e-2); the bands are still
    accumulated in float32."""
    q, k, v = qkv(8, 35, torch.float32)
    expected = F.scaled_dot_product_attention(q, k, v)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = accumulate(q, k, v, 8, (7, 5), 3)
    assert out.dtype == torch.float32
    assert relative_error(out, expected) < 1e-5


def test_bad_input_is_refused_with_the_problem_named():
    q, k, v = qkv(8, 35, torch.float32)
    with pytest.raises(ValueError, match='core queries must be'):
        OnlineCoreAttention(q[0])
    with pytest.raises(TypeError, match='floating-point'):
        OnlineCoreAttention(q.long())
    with pytest.raises(ValueError, match='K >= 1'):
        OnlineCoreAttention(q[:, :, :0])
    online = OnlineCoreAttention(q)
    with pytest.raises(ValueError, match='no keys have been added'):
        online.result()
    with pytest.raises(ValueError, match='keys must be'):
        online.add(k[:, :1], v[:, :1])
    with pytest.raises(ValueError, match='keys must be'):
        online.add(k[..., :8], v[..., :8])
    with pytest.raises(ValueError, match='values must have the keys'):
        online.add(k, v[:, :, :5])
    with pytest.raises(TypeError, match='dtype'):
        online.add(k.double(), v.double())
    with pytest.raises(ValueError, match='at least one key'):
        online.add(k[:, :, :0], v[:, :, :0])
    with pytest.raises(ValueError, match='key_padding_mask must be'):
        online.add(k, v, torch.zeros(2, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match='key_padding_mask must be bool'):
        online.add(k, v, torch.zeros(2, k.shape[2]))
    assert online.num_bands == 0  # refused bands leave the state as it was
