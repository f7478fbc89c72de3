import os.path as osp

import pytest
import torch
from analysis_tools_loader import load_tool

from mmlinear.models import VECA
from mmlinear.utils.attention_saliency import attention_saliency
from mmlinear.utils.model_presets import build_backbone

visualize_attention = load_tool('visualize_attention')


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
    torch.testing.assert_close(attention_saliency(pure, x, layer=0, query='first').flatten(1),
                               rows[:, :, 0, 1:].mean(1))
    torch.testing.assert_close(attention_saliency(pure, x, layer=0).flatten(1),
                               rows[:, :, :, 1:].mean((1, 2)))


def test_veca_saliency_is_the_first_core_or_the_mean_core_row():
    torch.manual_seed(0)
    veca = VECA(arch=dict(embed_dims=64, num_layers=2, num_heads=2, feedforward_channels=128))
    veca.eval()
    x = torch.randn(1, 3, 48, 80)
    rows = veca.forward_attention_maps(x, active_cores=8)[-1]  # (B, H, 8, 8 + 15)
    first = attention_saliency(veca, x, query='first', active_cores=8)
    assert first.shape == (1, 3, 5)
    torch.testing.assert_close(first.flatten(1), rows[:, :, 0, 8:].mean(1))
    torch.testing.assert_close(attention_saliency(veca, x, active_cores=8).flatten(1),
                               rows[:, :, :, 8:].mean((1, 2)))


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


def test_upsample_and_minmax():
    saliency = torch.tensor([[[0., 1.], [2., 3.]]])
    full = visualize_attention.upsample_saliency(saliency, (30, 32))  # patches of 16, cropped
    assert full.shape == (1, 30, 32)
    scaled = visualize_attention.minmax(full)
    assert scaled.min() == 0 and scaled.max() == 1
    assert float(scaled[0, -1, -1]) == pytest.approx(1) and float(scaled[0, 0, 0]) == 0


def test_cli_writes_the_overlay_png(tiny_data, tmp_path):
    out = tmp_path / 'maps.png'
    visualize_attention.main([
        '--models', 'infvit-test-linear', 'infvit-test-pure', 'weightformer-test', 'veca-small',
        '--images', osp.join(tiny_data, 'coco', 'images', 'val'), '--max-images', '2',
        '--img-size', '64', '--active-cores', '16', '--query', 'first', '--out', str(out)
    ])
    assert out.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'
    with pytest.raises(SystemExit, match='one entry per model'):
        visualize_attention.main(['--models', 'infvit-test-linear', 'infvit-test-pure',
                                  '--checkpoints', 'none', '--images', 'x'])
    with pytest.raises(SystemExit, match='VECA models only'):
        visualize_attention.main(['--models', 'infvit-test-linear', '--active-cores', '16',
                                  '--images', osp.join(tiny_data, 'coco', 'images', 'val'),
                                  '--max-images', '1', '--img-size', '32', '--out',
                                  str(tmp_path / 'x.png')])
    with pytest.raises(ValueError, match='active_cores'):
        visualize_attention.main(['--models', 'veca-small', '--active-cores', '12', '--images',
                                  osp.join(tiny_data, 'coco', 'images', 'val'), '--out',
                                  str(tmp_path / 'y.png')])
