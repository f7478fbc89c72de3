"""VECA's ``pos_extrapolation``: the patch coordinates normalised to the image (today's), tiled
at the training grid's period or extended at its step, from the constructor, a config or a
built model."""
import pytest
import torch
from mmengine.config import Config

from mmlinear.models import VECA
from mmlinear.models.utils import pixel_padding_mask
from mmlinear.registry import MODELS

POLICIES = ('interpolate', 'tile', 'extend')


def model(num_layers=2, **kwargs):
    """A float64 VECA trained (say) on 32 x 32 images: a 4 x 4 grid of 8-pixel patches."""
    torch.manual_seed(0)
    arch = dict(embed_dims=64, num_layers=num_layers, num_heads=2, feedforward_channels=128)
    backbone = VECA(
        arch=arch, img_size=32, patch_size=8, active_cores=16, out_type='featmap', **kwargs)
    backbone.init_weights()
    with torch.no_grad():
        backbone.pos_alpha.fill_(0.5)  # the cores really move between blocks
    return backbone.to(torch.float64).eval()


def image(height, width, batch=2):
    g = torch.Generator().manual_seed(1)
    return torch.randn(batch, 3, height, width, generator=g, dtype=torch.float64)


def test_interpolate_is_the_default_and_all_agree_at_the_training_size():
    default = model()
    assert default.pos_extrapolation == 'interpolate' and default.patch_resolution == (4, 4)
    large, train = image(88, 56), image(32, 32)
    with torch.no_grad():
        expected_large, expected_train = default(large)[0], default(train)[0]
        for policy in POLICIES:
            other = model(pos_extrapolation=policy)
            assert torch.equal(other(train)[0], expected_train)
            if policy == 'interpolate':
                assert torch.equal(other(large)[0], expected_large)
            else:
                assert not torch.allclose(other(large)[0], expected_large)


def test_tile_gives_every_training_tile_the_training_features_at_depth_one():
    """With one block a patch sees only itself and the bank's cores, whose coordinates are
    the training frame's: the training image repeated 3 x 2 times gives its features repeated
    under 'tile' (and under no other policy)."""
    train = image(32, 32)
    repeated = train.repeat(1, 1, 3, 2)
    with torch.no_grad():
        for policy in POLICIES:
            backbone = model(num_layers=1, pos_extrapolation=policy)
            expected = backbone(train)[0].repeat(1, 1, 3, 2)
            got = backbone(repeated)[0]
            assert torch.allclose(got, expected, rtol=0, atol=1e-12) == (policy == 'tile')


@pytest.mark.parametrize('policy', POLICIES)
def test_each_image_of_a_padded_batch_gets_its_own_coordinates(policy):
    """An 88 x 56 image padded into a 104 x 80 batch has the features it has alone."""
    backbone = model(pos_extrapolation=policy)
    x = image(88, 56, batch=1)
    canvas = torch.zeros(2, 3, 104, 80, dtype=torch.float64)
    canvas[0, :, :88, :56] = x[0]
    canvas[1] = image(104, 80, batch=1)[0]
    mask = pixel_padding_mask([(88, 56), (104, 80)], (104, 80))
    with torch.no_grad():
        alone = backbone(x)[0]
        padded = backbone(canvas, mask)[0][:1, :, :11, :7]
    torch.testing.assert_close(padded, alone, rtol=0, atol=1e-12)


def test_policy_set_from_a_config_and_on_a_built_model():
    cfg = Config(
        dict(
            model=dict(
                type='mmlinear.VECA', arch='test', img_size=32, patch_size=8, out_type='featmap')))
    cfg.merge_from_dict({'model.pos_extrapolation': 'extend'})  # as --cfg-options does
    built = MODELS.build(cfg.model)
    assert built.pos_extrapolation == 'extend'
    built.pos_extrapolation = 'tile'
    assert built.pos_extrapolation == 'tile'
    # A test-time choice: no parameter or buffer, so checkpoints keep their keys.
    assert set(built.state_dict()) == set(VECA(arch='test').state_dict())


def test_unknown_policy_is_refused_naming_the_allowed_ones():
    message = "unknown pos_extrapolation 'stretch'; allowed: 'interpolate', 'tile', 'extend'"
    with pytest.raises(ValueError, match=message):
        VECA(arch='test', pos_extrapolation='stretch')
    built = VECA(arch='test')
    with pytest.raises(ValueError, match=message):
        built.pos_extrapolation = 'stretch'
    assert built.pos_extrapolation == 'interpolate'
