import pytest
import torch

from mmlinear.apis import build_backbone
from mmlinear.models import VECA
from mmlinear.visualization import attention_saliency, minmax, upsample_saliency


def test_saliency_reads_the_patch_part_of_the_attention():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 48, 80)  # a 3 x 5 patch grid, not square
    linear = build_backbone('infvit-test-linear')
    saliency = attention_saliency(linear, x)
    assert saliency.shape == (2, 3, 5)
    key_weights = linear.forward_attention_maps(x)[-1]  # (B, H, 1 + N), sums to 1 per head
    torch.testing.assert_close(saliency.flatten(1), key_weights[:, :, 1:].mean(1))
    assert bool((saliency.flatten(1).sum(1) < 1).all())  # the CLS key holds the rest

    pure = build_backbone('infvit-test-pure')
    rows = pure.forward_attention_maps(x)[0]  # (B, H, 1 + N, 1 + N)
    torch.testing.assert_close(
        attention_saliency(pure, x, layer=0, query='first').flatten(1), rows[:, :, 0, 1:].mean(1))
    torch.testing.assert_close(
        attention_saliency(pure, x, layer=0).flatten(1), rows[:, :, :, 1:].mean((1, 2)))


def test_veca_saliency_is_the_first_core_or_the_mean_core_row():
    torch.manual_seed(0)
    veca = VECA(arch=dict(embed_dims=64, num_layers=2, num_heads=2, feedforward_channels=128))
    veca.eval()
    x = torch.randn(1, 3, 48, 80)
    rows = veca.forward_attention_maps(x, active_cores=8)[-1]  # (B, H, 8, 8 + 15)
    first = attention_saliency(veca, x, query='first', active_cores=8)
    assert first.shape == (1, 3, 5)
    torch.testing.assert_close(first.flatten(1), rows[:, :, 0, 8:].mean(1))
    torch.testing.assert_close(
        attention_saliency(veca, x, active_cores=8).flatten(1), rows[:, :, :, 8:].mean((1, 2)))


def test_weightformer_saliency_is_the_dynamic_convolution_response():
    torch.manual_seed(0)
    wf = build_backbone('weightformer-test')
    x = torch.randn(1, 3, 64, 96)
    conv = [m for m in wf.modules() if type(m).__name__ == 'DynamicDWConv'][0]
    seen = []
    handle = conv.register_forward_hook(lambda m, args, out: seen.append(out))
    wf(x)
    handle.remove()
    saliency = attention_saliency(wf, x, layer=0)
    assert saliency.shape == (1, 4, 6)
    torch.testing.assert_close(saliency.flatten(1), seen[0].norm(dim=-1))
    assert len(wf._forward_hooks) == 0 and len(conv._forward_hooks) == 0


def test_saliency_errors_name_the_problem():
    x = torch.randn(1, 3, 32, 32)
    with pytest.raises(ValueError, match=r'layer must lie in \[-2, 1\]'):
        attention_saliency(build_backbone('infvit-test-linear'), x, layer=2)
    with pytest.raises(ValueError, match="allowed: mean, first"):
        attention_saliency(build_backbone('infvit-test-linear'), x, query='cls')
    with pytest.raises(TypeError, match='neither forward_attention_maps'):
        attention_saliency(build_backbone('vit-test-sdpa'), x)


def test_upsample_gives_each_pixel_its_patch_and_crops_the_padding():
    saliency = torch.tensor([[[0., 1.], [2., 3.]]])
    full = upsample_saliency(saliency, (30, 32))  # patches of 16, the padded rows cropped
    assert full.shape == (1, 30, 32)
    # Bilinear between patch centres: the pixels outside the centres keep their patch's value
    # (pixel 7 of a 16-pixel patch lies before the first centre, pixel 24 after the second).
    corners = torch.stack([full[0, y, x] for y, x in ((7, 7), (7, 24), (29, 0), (29, 31))])
    torch.testing.assert_close(corners, torch.tensor([0., 1., 2., 3.]))
    assert 0 < float(full[0, 15, 15]) < 3  # between the centres: a blend


def test_upsample_and_minmax():
    saliency = torch.tensor([[[0., 1.], [2., 3.]]])
    full = upsample_saliency(saliency, (30, 32))  # patches of 16, cropped
    assert full.shape == (1, 30, 32)
    scaled = minmax(full)
    assert scaled.min() == 0 and scaled.max() == 1
    assert float(scaled[0, -1, -1]) == pytest.approx(1) and float(scaled[0, 0, 0]) == 0
