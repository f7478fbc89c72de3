"""The skeleton the three backbones share: one signature, one output formatter, one freezing
rule, one final-norm name, one test preset."""
import pytest
import torch

from mmlinear.models.backbones import VECA, InfViT, WeightFormer
from mmlinear.models.backbones.base_plain_backbone import BasePlainBackbone

BACKBONES = dict(infvit=InfViT, weightformer=WeightFormer, veca=VECA)


def build(name, **kwargs):
    torch.manual_seed(0)
    return BACKBONES[name](arch='test', **kwargs).eval()


def padded_batch():
    x = torch.randn(2, 3, 48, 64)
    mask = torch.zeros(2, 48, 64, dtype=torch.bool)
    mask[1, 32:, 40:] = True
    mask[1, :, 48:] = True
    return x, mask


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_every_backbone_is_a_plain_backbone_with_a_test_preset(name):
    assert issubclass(BACKBONES[name], BasePlainBackbone)
    assert 'test' in BACKBONES[name].arch_zoo
    model = build(name)
    assert model.num_layers == len(model.blocks)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_the_padding_mask_is_the_second_positional_argument(name):
    model = build(name, out_type='featmap')
    x, mask = padded_batch()
    with torch.no_grad():
        positional = model(x, mask)[0]
        keyword = model(x, padding_mask=mask)[0]
        unmasked = model(x)[0]
    torch.testing.assert_close(positional, keyword, rtol=0, atol=0)
    # The mask did take effect: the partly padded image's features change.
    assert (positional[1] - unmasked[1]).abs().max() > 1e-4


def test_veca_active_cores_is_keyword_only():
    model = build('veca')
    x = torch.randn(1, 3, 32, 32)
    with pytest.raises(TypeError, match='positional'):
        model(x, None, 16)
    with pytest.raises(TypeError, match='positional'):
        model.forward_tokens(x, None, 16)
    with torch.no_grad():
        small, full = model(x, active_cores=16)[0], model(x)[0]
    assert small.shape == full.shape and not torch.equal(small, full)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_out_indices_give_one_output_per_block_the_last_after_the_final_norm(name):
    model = build(name, out_indices=(0, 1), out_type='featmap')
    x = torch.randn(1, 3, 32, 48)
    with torch.no_grad():
        first, last = model(x)
    assert first.shape == last.shape == (1, model.embed_dims, 2, 3)
    # The final norm makes every token of the last output zero-mean over the channels
    # (its bias starts at zero); the raw residual stream of block 0 is not.
    if not isinstance(model, VECA):  # VECA's out_channels projection is the identity here
        assert last.mean(dim=1).abs().max() < 1e-5
    assert first.mean(dim=1).abs().max() > 1e-3


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_freezing_every_block_freezes_the_final_norm(name):
    model = build(name, frozen_stages=2)
    model.train()
    assert not any(p.requires_grad for p in model.parameters())
    assert not model.final_norm.training
    partly = build(name, frozen_stages=1)
    partly.train()
    assert all(p.requires_grad for p in partly.final_norm.parameters())
    assert not any(p.requires_grad for p in partly.blocks[0].parameters())
    assert all(p.requires_grad for p in partly.blocks[1].parameters())


def test_final_norm_keeps_the_released_checkpoint_keys():
    """One attribute name for the final norm; the state-dict keys stay the released ones."""
    weightformer, veca = build('weightformer'), build('veca')
    assert weightformer.final_norm is weightformer.norm
    assert 'norm.weight' in weightformer.state_dict()
    assert 'final_norm.weight' not in weightformer.state_dict()
    assert 'final_norm.weight' in veca.state_dict()


def test_infvit_loads_checkpoints_with_the_earlier_key_names():
    model = build('infvit')
    legacy = {}
    for key, value in model.state_dict().items():
        key = key.replace('blocks.', 'layers.', 1) if key.startswith('blocks.') else key
        key = key.replace('final_norm.', 'ln1.', 1) if key.startswith('final_norm.') else key
        legacy[key] = value.clone() + 1
    other = build('infvit')
    other.load_state_dict(legacy, strict=True)
    for key, value in other.state_dict().items():
        torch.testing.assert_close(value, model.state_dict()[key] + 1)
