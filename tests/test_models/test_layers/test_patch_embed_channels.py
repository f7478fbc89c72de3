"""Patch-embedding weights of one channel count loaded into a model of another
(adapt_input_channels): channel sums kept, so images whose channels are all equal embed as
before, in the layer and in the three backbones."""
import pytest
import torch
from mmengine.model import BaseModule

from mmlinear.models import VECA, InfViT, WeightFormer
from mmlinear.models.layers import PatchEmbed, ProjPatchEmbed, adapt_input_channels


@pytest.mark.parametrize('source, target', [(3, 4), (3, 13), (3, 1), (4, 2), (3, 3)])
def test_channel_sums_are_kept(source, target):
    weight = torch.randn(8, source, 4, 4, dtype=torch.float64)
    adapted = adapt_input_channels(weight, target)
    assert adapted.shape == (8, target, 4, 4)
    torch.testing.assert_close(adapted.sum(1), weight.sum(1))
    if target > source:  # the source channels keep their weights, rescaled
        torch.testing.assert_close(adapted[:, :source], weight * source / target)


@pytest.mark.parametrize('layer', [PatchEmbed, ProjPatchEmbed])
def test_a_layer_loads_weights_of_another_channel_count(layer, mmengine_log):
    torch.manual_seed(0)
    rgb, four = layer(3, 16, 4), layer(4, 16, 4)
    four.load_state_dict(rgb.state_dict())
    grey = torch.rand(2, 1, 12, 8)
    tokens, _ = four(grey.expand(-1, 4, -1, -1))
    expected, _ = rgb(grey.expand(-1, 3, -1, -1))
    torch.testing.assert_close(tokens, expected)
    assert any('takes 3 input channels, the model 4; adapted (its 3 kept, 1 more from their mean' in
               message for message in mmengine_log)


@pytest.mark.parametrize('backbone, arch', [(InfViT, 'test'), (WeightFormer, 'test'),
                                            (VECA, 'test')])
def test_backbones_start_from_rgb_weights_with_more_channels(backbone, arch):
    torch.manual_seed(0)
    rgb = backbone(arch=arch, out_type='featmap').eval()
    four = backbone(arch=arch, in_channels=4, out_type='featmap').eval()
    four.load_state_dict(rgb.state_dict(), strict=True)
    grey = torch.randn(1, 1, 64, 48)
    with torch.no_grad():
        out = four(grey.expand(-1, 4, -1, -1))
        expected = rgb(grey.expand(-1, 3, -1, -1))
    for actual, wanted in zip(out, expected):
        torch.testing.assert_close(actual, wanted, rtol=1e-4, atol=1e-5)


def test_a_pretrained_init_cfg_adapts_too(tmp_path):
    """The path of ``init_cfg=dict(type='Pretrained')`` (mmengine's own state-dict loading)."""
    torch.manual_seed(0)
    rgb = InfViT(arch='test', out_type='featmap')
    checkpoint = str(tmp_path / 'rgb.pth')
    torch.save(dict(state_dict=rgb.state_dict()), checkpoint)
    four = InfViT(
        arch='test', in_channels=4, init_cfg=dict(type='Pretrained', checkpoint=checkpoint))
    assert isinstance(four, BaseModule)
    four.init_weights()
    torch.testing.assert_close(four.patch_embed.projection.weight,
                               adapt_input_channels(rgb.patch_embed.projection.weight, 4))


def test_the_retired_name_warns_and_is_the_same_function():
    from mmlinear.models.layers import patch_embed
    for module in ('mmlinear.models.layers', 'mmlinear.models.layers.patch_embed'):
        with pytest.warns(
                FutureWarning, match="'adapt_input_bands' is deprecated .* "
                "'adapt_input_channels'"):
            old = getattr(__import__(module, fromlist=['adapt_input_bands']), 'adapt_input_bands')
        assert old is adapt_input_channels is patch_embed.adapt_input_channels
