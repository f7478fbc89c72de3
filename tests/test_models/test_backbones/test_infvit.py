import pytest
import torch
from mmengine.registry import init_default_scope

from mmlinear.models import InfViT


def small(**kwargs):
    torch.manual_seed(0)
    kwargs.setdefault('arch', 'test')
    kwargs.setdefault('img_size', 64)
    model = InfViT(**kwargs)
    model.init_weights()
    return model


@pytest.mark.parametrize('attn_type', ['softmax', 'pure', 'linear'])
@pytest.mark.parametrize('size', [(64, 64), (50, 77), (33, 100), (16, 16)])
def test_featmap_shapes_at_odd_sizes(attn_type, size):
    model = small(attn_type=attn_type, out_type='featmap', out_indices=(0, -1))
    outs = model(torch.randn(2, 3, *size))
    expected = (2, 32, -(-size[0] // 16), -(-size[1] // 16))
    assert len(outs) == 2 and all(o.shape == expected for o in outs)


def test_out_types():
    x = torch.randn(2, 3, 48, 80)
    assert small(out_type='cls_token')(x)[0].shape == (2, 32)
    assert small(out_type='avg_featmap')(x)[0].shape == (2, 32)
    assert small(out_type='raw')(x)[0].shape == (2, 1 + 3 * 5, 32)


def test_last_output_is_after_final_norm():
    model = small(out_type='raw', out_indices=(0, 1))
    x = torch.randn(2, 3, 64, 64)
    first, last = model(x)
    # LayerNorm without affine change at init: zero mean and unit variance per token.
    torch.testing.assert_close(last.mean(-1), torch.zeros(2, 17), atol=1e-5, rtol=0)
    assert first.mean(-1).abs().max() > 1e-3


def test_presets_match_the_paper():
    for arch, (dims, layers) in {'infvit-4l': (1024, 4), 'infvit-24l': (1024, 24)}.items():
        settings = InfViT.arch_zoo[arch]
        assert (settings['embed_dims'], settings['num_layers'], settings['num_heads'],
                settings['feedforward_channels']) == (dims, layers, 16, 4096)


def test_infvit_4l_parameter_count():
    """Measured, not the paper's: patch embed + cls + 197 positions + 4 ViT-L blocks + norm,
    plus one rho per head; tie_qk removes one C x C + C projection per block."""
    C, L = 1024, 4
    block = 4 * (C * C + C) + 2 * C * 4 * C + 4 * C + C + 2 * 2 * C + 16
    expected = (3 * 16 * 16 * C + C) + C + 197 * C + L * block + 2 * C
    model = InfViT(arch='infvit-4l')
    assert sum(p.numel() for p in model.parameters()) == expected
    tied = InfViT(arch='infvit-4l', tie_qk=True)
    assert sum(p.numel() for p in tied.parameters()) == expected - L * (C * C + C)


def test_custom_arch_dict_and_errors():
    model = InfViT(arch=dict(embed_dims=16, num_layers=1, num_heads=2, feedforward_channels=32))
    assert model.embed_dims == 16
    with pytest.raises(ValueError, match="allowed: 'infvit-4l', 'infvit-24l'"):
        InfViT(arch='infvit-huge')
    with pytest.raises(ValueError, match='keys'):
        InfViT(arch=dict(embed_dims=16))
    with pytest.raises(ValueError, match="attn_type 'flash'; allowed"):
        InfViT(arch='test', attn_type='flash')
    with pytest.raises(ValueError, match="out_type"):
        InfViT(arch='test', out_type='tokens')
    with pytest.raises(ValueError, match=r'out_indices must hold integers in \[-2, 1\]'):
        InfViT(arch='test', out_indices=(2, ))
    with pytest.raises(ValueError, match='frozen_stages'):
        InfViT(arch='test', frozen_stages=5)


def test_bad_images_raise():
    model = small()
    with pytest.raises(ValueError, match=r'\(B, 3, H, W\)'):
        model(torch.randn(2, 1, 64, 64))
    with pytest.raises(ValueError, match=r'\(B, 3, H, W\)'):
        model(torch.randn(3, 64, 64))
    with pytest.raises(ValueError, match='at least one patch'):
        model(torch.randn(1, 3, 8, 64))


def test_pos_embed_resized_on_load():
    source = small(img_size=32)
    target = small(img_size=64)
    target.load_state_dict(source.state_dict())
    assert target.pos_embed.shape == (1, 1 + 16, 32)
    torch.testing.assert_close(target.pos_embed[:, 0], source.pos_embed[:, 0])


def test_frozen_stages():
    model = small(frozen_stages=1)
    model.train()
    assert not model.pos_embed.requires_grad and not model.cls_token.requires_grad
    assert not any(p.requires_grad for p in model.blocks[0].parameters())
    assert all(p.requires_grad for p in model.blocks[1].parameters())
    assert not model.blocks[0].training and model.blocks[1].training


def test_with_cp_matches_plain_forward_and_backward():
    x = torch.randn(2, 3, 64, 64)
    plain, checkpointed = small(), small(with_cp=True)
    checkpointed.load_state_dict(plain.state_dict())
    out_plain, out_cp = plain(x)[0], checkpointed(x)[0]
    torch.testing.assert_close(out_cp, out_plain)
    out_plain.sum().backward()
    out_cp.sum().backward()
    torch.testing.assert_close(checkpointed.pos_embed.grad, plain.pos_embed.grad)


@pytest.mark.parametrize('attn_type', ['pure', 'linear', 'softmax'])
def test_padding_mask_hides_the_padded_region(attn_type):
    """With the mask, what lies in the padding cannot reach the valid tokens."""
    model = small(attn_type=attn_type, out_type='featmap').eval()
    padded = torch.zeros(1, 3, 96, 96)
    padded[..., :48, :64] = torch.randn(1, 3, 48, 64)
    mask = torch.ones(1, 96, 96, dtype=torch.bool)
    mask[..., :48, :64] = False
    noisy = padded.clone()
    noisy[..., 48:, :] = torch.randn(1, 3, 48, 96)
    noisy[..., :, 64:] = torch.randn(1, 3, 96, 32)
    valid = model(padded, mask)[0][..., :3, :4]
    torch.testing.assert_close(model(noisy, mask)[0][..., :3, :4], valid, atol=1e-5, rtol=1e-5)
    # Without the mask the padding leaks into the valid features (the reference behaviour).
    assert (model(noisy)[0][..., :3, :4] - model(padded)[0][..., :3, :4]).abs().max() > 1e-4
    with pytest.raises(ValueError, match='padding_mask must have shape'):
        model(padded, mask[:, :48])


def test_attention_maps():
    x = torch.randn(2, 3, 32, 48)
    maps = small(attn_type='pure').forward_attention_maps(x)
    assert len(maps) == 2 and maps[0].shape == (2, 2, 7, 7)
    maps = small(attn_type='linear').forward_attention_maps(x)
    assert maps[0].shape == (2, 2, 7)
    # a sums to rho up to eps: rho * sum(s) / (sum(s) + 1e-6), with small scores at init.
    sums = maps[0].sum(-1)
    assert (sums <= 0.95).all() and (sums > 0.94).all()


@pytest.mark.parametrize('scope', ['mmpretrain', 'mmdet', 'mmseg'])
def test_builds_under_each_default_scope(scope):
    """Configs reference the backbone as mmlinear.InfViT; the runner's scope is the toolbox."""
    from mmengine.registry import MODELS
    init_default_scope(scope)
    backbone = MODELS.build(dict(type='mmlinear.InfViT', arch='test', out_type='featmap'))
    neck = MODELS.build(dict(type='mmlinear.SimpleFeaturePyramid', in_channels=32))
    assert isinstance(backbone, InfViT)
    outs = neck(backbone(torch.randn(1, 3, 64, 64)))
    assert [o.shape[-1] for o in outs] == [16, 8, 4, 2]
