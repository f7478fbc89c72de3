"""PatchEmbed: the projection of gathered patches equals the strided convolution it stands
for, in float64, under autocast and with partial patches; bad input is refused."""
import pytest
import torch
import torch.nn.functional as F

from mmlinear.models.layers import PatchEmbed, ProjPatchEmbed


def convolution_tokens(embed, x):
    """The convolution with kernel = stride = p on the corner-padded image, as (B, N, C)."""
    p = embed.patch_size
    x = F.pad(x, (0, -x.shape[3] % p, 0, -x.shape[2] % p))
    y = F.conv2d(x, embed.projection.weight, embed.projection.bias, stride=p)
    return y.flatten(2).transpose(1, 2)


@pytest.mark.parametrize('layer', [PatchEmbed, ProjPatchEmbed])
@pytest.mark.parametrize('size', [(64, 48), (77, 61), (8, 8)])
def test_patches_times_the_weight_equal_the_convolution_in_float64(layer, size):
    torch.manual_seed(0)
    embed = layer(4, 24, 8).double()
    x = torch.randn(2, 4, *size, dtype=torch.float64)
    tokens, hw_shape = embed(x)
    expected = convolution_tokens(embed, x)
    assert hw_shape == (-(-size[0] // 8), -(-size[1] // 8))
    assert tokens.shape == expected.shape == (2, hw_shape[0] * hw_shape[1], 24)
    assert (tokens - expected).abs().max() <= 1e-12 * expected.abs().max()


def test_a_bias_free_projection_is_honoured():
    torch.manual_seed(0)
    embed = PatchEmbed(3, 16, 4).double()
    embed.projection.bias = None
    x = torch.randn(1, 3, 16, 12, dtype=torch.float64)
    torch.testing.assert_close(embed(x)[0], convolution_tokens(embed, x), rtol=1e-12, atol=0)


def test_under_autocast_the_tokens_are_the_products_of_the_narrowed_patches():
    """Gathering straight into bf16 rounds the pixels as autocast rounds a linear layer's
    input: the tokens are bf16 and close to the float32 convolution; float64 is not narrowed."""
    torch.manual_seed(0)
    embed = PatchEmbed(3, 32, 16)
    x = torch.randn(1, 3, 100, 70)
    with torch.no_grad():
        expected = convolution_tokens(embed, x)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            tokens, _ = embed(x)
            wide, _ = embed.double()(x.double())
    assert tokens.dtype == torch.bfloat16 and wide.dtype == torch.float64
    torch.testing.assert_close(tokens.float(), expected, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize('shape, message', [((1, 4, 32, 32), 'expected images of shape'),
                                            ((3, 32, 32), 'expected images of shape'),
                                            ((1, 3, 7, 32), 'at least one patch')])
def test_bad_input_is_refused(shape, message):
    with pytest.raises(ValueError, match=message):
        PatchEmbed(3, 8, 8)(torch.zeros(shape))
