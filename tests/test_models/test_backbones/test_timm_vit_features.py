"""mmlinear.TimmViTFeatures: a timm ViT's normalised patch tokens as maps or its class token,
its checkpoint loaded into the ViT and kept through init_weights, frozen on request."""
import pytest
import torch

from mmlinear.models import TimmViTFeatures

timm = pytest.importorskip('timm')
NAME = 'vit_base_patch16_dinov3.lvd1689m'
SMALL = dict(embed_dim=64, depth=3, num_heads=2, img_size=64)


def build(**kwargs):
    torch.manual_seed(0)
    kwargs.setdefault('model_kwargs', SMALL)
    return TimmViTFeatures(NAME, **kwargs).eval()


def test_maps_are_the_normalised_patch_tokens_without_class_and_registers():
    model = build(out_indices=(0, -1))
    x = torch.randn(2, 3, 96, 64)
    with torch.no_grad():
        first, last = model(x)
        tokens = model.vit.forward_features(x)  # every token after the final norm
    assert model.out_indices == (0, 2)
    assert first.shape == last.shape == (2, 64, 6, 4)
    prefix = model.vit.num_prefix_tokens  # CLS + 4 registers
    assert prefix == 5
    expected = tokens[:, prefix:].reshape(2, 6, 4, 64).permute(0, 3, 1, 2)
    torch.testing.assert_close(last, expected)
    assert not torch.allclose(first, last)


def test_checkpoint_loads_into_the_vit_and_survives_init_weights(tmp_path):
    source = timm.create_model(NAME, pretrained=False, **SMALL)
    path = tmp_path / 'vit.pth'
    torch.save(source.state_dict(), path)
    model = build(checkpoint_path=str(path))
    model.init_weights()  # must not re-initialise the loaded ViT
    for name, value in source.state_dict().items():
        assert torch.equal(model.vit.state_dict()[name], value), name


def test_frozen_stays_in_eval_mode_and_gets_no_gradient():
    model = build(frozen=True, model_kwargs=dict(SMALL, drop_rate=0.5))
    model.train()
    assert not model.vit.training
    assert not any(p.requires_grad for p in model.parameters())
    x = torch.randn(1, 3, 64, 64, requires_grad=True)
    model(x)[0].sum().backward()
    assert all(p.grad is None for p in model.parameters())
    # Eval mode: dropout is off, so two calls agree.
    torch.testing.assert_close(model(x)[0], model(x)[0])


def test_dynamic_img_pad_takes_sides_that_are_not_multiples_of_16():
    model = build(model_kwargs=dict(SMALL, dynamic_img_pad=True))
    with torch.no_grad():
        assert model(torch.randn(1, 3, 72, 100))[0].shape == (1, 64, 5, 7)


def test_errors_name_the_problem():
    with pytest.raises(TypeError, match='resnet18 is not a timm ViT'):
        TimmViTFeatures('resnet18')
    with pytest.raises(ValueError, match=r'out_indices must hold integers in \[-3, 2\]'):
        build(out_indices=3)
    with pytest.raises(
            ValueError,
            match=r"out_type must be one of \('featmap', 'cls_token'\), "
            r"got 'avg_featmap'"):
        build(out_type='avg_featmap')


def test_cls_token_is_the_normalised_class_token_of_each_selected_block():
    model = build(out_indices=(0, -1), out_type='cls_token')
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        first, last = model(x)
        tokens = model.vit.forward_features(x)  # every token after the final norm
    assert first.shape == last.shape == (2, 64)
    torch.testing.assert_close(last, tokens[:, 0])
    assert not torch.allclose(first, last)
