"""InfViT's ``pos_extrapolation``: the position table stretched (today's) or tiled at its
period over grids of another size, from the constructor, a config or a built model."""
import pytest
import torch
from mmengine.config import Config

from mmlinear.models import InfViT
from mmlinear.registry import MODELS


def model(dtype=torch.float64, **kwargs):
    """A float64 InfViT whose table is made for a 4 x 4 grid (32 px, patch 8)."""
    torch.manual_seed(0)
    backbone = InfViT(arch='test', img_size=32, patch_size=8, out_type='featmap', **kwargs)
    backbone.init_weights()
    return backbone.to(dtype).eval()


def image(height, width):
    g = torch.Generator().manual_seed(1)
    return torch.randn(2, 3, height, width, generator=g, dtype=torch.float64)


@pytest.mark.parametrize('size', [(64, 96), (88, 56)])
def test_tiled_model_equals_a_model_whose_table_is_the_repeated_one(size):
    """The reference: an InfViT made for the whole grid, holding the 4 x 4 table repeated
    with ``Tensor.repeat`` and cropped, so that it uses its table as it is. 88 x 56 px is an
    11 x 7 grid, not a multiple of the period."""
    tiled = model(pos_extrapolation='tile')
    grid = (size[0] // 8, size[1] // 8)
    reference = InfViT(arch='test', img_size=size, patch_size=8, out_type='featmap')
    reference = reference.to(torch.float64).eval()
    state = tiled.state_dict()
    table = state['pos_embed'][0, 1:].reshape(4, 4, -1)
    repeated = table.repeat(-(-grid[0] // 4), -(-grid[1] // 4), 1)[:grid[0], :grid[1]]
    state['pos_embed'] = torch.cat([state['pos_embed'][:, :1], repeated.reshape(1, -1, 32)], 1)
    reference.load_state_dict(state)
    x = image(*size)
    with torch.no_grad():
        assert torch.equal(tiled(x)[0], reference(x)[0])


def test_interpolate_is_the_default_and_its_outputs_are_unchanged():
    x = image(72, 40)
    default, explicit = model(), model(pos_extrapolation='interpolate')
    assert default.pos_extrapolation == 'interpolate'
    with torch.no_grad():
        assert torch.equal(default(x)[0], explicit(x)[0])
        # At the table's own grid both policies use the table as it is.
        tiled = model(pos_extrapolation='tile')
        assert torch.equal(tiled(image(32, 32))[0], default(image(32, 32))[0])
        assert not torch.equal(tiled(x)[0], default(x)[0])


def test_policy_set_from_a_config_and_on_a_built_model():
    cfg = Config(
        dict(
            model=dict(
                type='mmlinear.InfViT', arch='test', img_size=32, patch_size=8,
                out_type='featmap')))
    cfg.merge_from_dict({'model.pos_extrapolation': 'tile'})  # as --cfg-options does
    built = MODELS.build(cfg.model)
    assert built.pos_extrapolation == 'tile'
    built.pos_extrapolation = 'interpolate'
    assert built.pos_extrapolation == 'interpolate'
    # A test-time choice: no parameter or buffer, so checkpoints keep their keys.
    assert set(built.state_dict()) == set(model().state_dict())


def test_unknown_policy_is_refused_naming_the_allowed_ones():
    message = "unknown pos_extrapolation 'stretch'; allowed: 'interpolate', 'tile'"
    with pytest.raises(ValueError, match=message):
        model(pos_extrapolation='stretch')
    built = model()
    with pytest.raises(ValueError, match=message):
        built.pos_extrapolation = 'stretch'
    assert built.pos_extrapolation == 'interpolate'
