"""Helpers shared by the band-by-band layer tests: band ranges, padded-batch token masks, a
dynamic convolution with a predictor that matters, and the relative error check."""
import torch

from mmlinear.models.layers import DynamicDWConv
from mmlinear.models.utils import pixel_padding_mask, pixel_to_token_mask


def bands(height, band_rows):
    """Rows [r0, r1) of bands of ``band_rows`` rows (the last one shorter) tiling ``height``."""
    return [(r0, min(r0 + band_rows, height)) for r0 in range(0, height, band_rows)]


def token_mask(img_shapes, hw, patch=4):
    """The token mask of images padded at the bottom / right to a (hw * patch) batch."""
    return pixel_to_token_mask(
        pixel_padding_mask(img_shapes, (hw[0] * patch, hw[1] * patch)), patch)


def dyn_dwconv(dtype):
    """A DynamicDWConv(8) whose kernel predictor has weights large enough to matter."""
    torch.manual_seed(0)
    layer = DynamicDWConv(8).to(dtype)
    with torch.no_grad():
        for param in layer.wfm.parameters():
            param.normal_(0, 0.5)
    return layer


def assert_relative_close(actual, expected, tol, min_scale=0.):
    """Max abs error over the expected values' max abs, at most ``tol``; the expected values
    must exceed ``min_scale`` so that the check has teeth."""
    scale = expected.abs().max()
    assert scale > min_scale
    assert ((actual - expected).abs().max() / scale).item() <= tol
