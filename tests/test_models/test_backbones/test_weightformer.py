"""WeightFormer backbone against the official model: released key layout, parameter counts,
FLOPs, the block formulas and the OpenMMLab options."""
import os.path as osp

import pytest
import torch
import torch.nn.functional as F
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.registry import init_default_scope
from torch.utils.flop_counter import FlopCounterMode

from mmlinear.models import WeightFormer
from mmlinear.models.backbones.weightformer import dynamic_block_indices
from mmlinear.models.layers import DynamicDWConv, DynamicLinear, WeightFormerBlock

DYNAMIC = [1, 4, 7, 10, 13, 16]


def tiny(**kwargs):
    torch.manual_seed(0)
    kwargs.setdefault('arch', 't')
    model = WeightFormer(**kwargs)
    model.init_weights()
    return model


def num_params(module):
    return sum(p.numel() for p in module.parameters())


def macs(model, *size):
    """Matmul + conv MACs of one forward pass, counted on the meta device (no compute)."""
    counter = FlopCounterMode(display=False)
    with counter:
        model(torch.empty(1, 3, *size, device='meta'))
    return counter.get_total_flops() // 2


# --------------------------------------------------------------------------------------------
# Architecture, parameters, checkpoint layout
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize('arch,dims,backbone,static,dynamic', [
    ('t', 192, 6_881_184, 298_176, 575_472),
    ('s', 384, 27_107_136, 1_186_176, 2_293_728),
    ('b', 384, 27_107_136, 1_186_176, 2_293_728),
])
def test_parameter_counts_match_the_reference(arch, dims, backbone, static, dynamic):
    """Section 2.2 / 10.1; with the 1000-class head the totals are 7,074,184 / 27,492,136."""
    model = WeightFormer(arch=arch)
    assert model.embed_dims == dims and len(model.blocks) == 17
    assert num_params(model) == backbone
    assert num_params(model) + dims * 1000 + 1000 == {192: 7_074_184, 384: 27_492_136}[dims]
    for i, block in enumerate(model.blocks):
        assert num_params(block) == (dynamic if i in DYNAMIC else static)


def test_dynamic_blocks_are_every_third_from_the_second():
    model = WeightFormer(arch='t')
    assert [i for i, block in enumerate(model.blocks) if block.dynamic] == DYNAMIC
    for i, block in enumerate(model.blocks):
        names = {name for name, _ in block.named_parameters()}
        dynamic_only = {
            'norm1.weight', 'norm1.bias', 'linear1.w', 'linear1.b', 'linear1.w1', 'linear1.w2',
            'linear1.wfm.weight', 'linear1.wfm.bias', 'dwc.w', 'dwc.b', 'dwc.wfm.0.weight',
            'dwc.wfm.0.bias', 'dwc.wfm.2.weight'
        }
        static_only = {'linear1.weight', 'linear1.bias', 'dwc.weight', 'dwc.bias'}
        assert names >= (dynamic_only if i in DYNAMIC else static_only)
        assert not names & (static_only if i in DYNAMIC else dynamic_only)
        assert isinstance(block.linear1, DynamicLinear) == (i in DYNAMIC)
        assert isinstance(block.dwc, DynamicDWConv) == (i in DYNAMIC)
    # A custom depth follows the same rule.
    custom = WeightFormer(arch=dict(embed_dims=16, num_layers=8, feedforward_channels=64))
    assert [i for i, block in enumerate(custom.blocks) if block.dynamic] == [1, 4, 7]


@pytest.mark.parametrize('indices,dynamic', [
    ([], []),
    (list(range(17)), list(range(17))),
    ([1, 3, 15], [1, 3, 15]),
    ([-1, 0], [0, 16]),
])
def test_dynamic_indices_choose_the_dynamic_blocks(indices, dynamic):
    model = WeightFormer(arch='t', dynamic_indices=indices)
    assert model.dynamic_indices == tuple(dynamic)
    assert [i for i, block in enumerate(model.blocks) if block.dynamic] == dynamic
    assert all(isinstance(block.linear1, DynamicLinear) == block.dynamic for block in model.blocks)
    with torch.no_grad():
        assert model(torch.randn(1, 3, 64, 64))[0].shape == (1, 192)


@pytest.mark.parametrize('indices', [[17], [1, 1], [2.0]])
def test_bad_dynamic_indices_name_the_valid_range(indices):
    with pytest.raises(
            ValueError,
            match=r'dynamic_indices (must hold integers in \[-17, 16\]|'
            'names layer 1 twice)'):
        WeightFormer(arch='t', dynamic_indices=indices)


def test_dynamic_frequencies_count_every_kth_block_from_the_second():
    assert dynamic_block_indices('all', 5) == [0, 1, 2, 3, 4]
    assert dynamic_block_indices('every-2', 5) == [1, 3]
    # The released WeightFormer-T pattern (17 blocks, the default) and its demo body (5).
    assert dynamic_block_indices('every-3', 17) == DYNAMIC
    assert dynamic_block_indices('every-3', 5) == [1, 4]
    assert dynamic_block_indices('every-4', 17) == [1, 5, 9, 13]
    assert dynamic_block_indices('none', 5) == []


@pytest.mark.parametrize('frequency', ['every-5', 'every-1', 'half', ''])
def test_unknown_dynamic_frequency_names_the_allowed_ones(frequency):
    with pytest.raises(
            ValueError, match=f"{frequency!r}; allowed: all, every-2, every-3, "
            'every-4, none'):
        dynamic_block_indices(frequency, 5)


@pytest.mark.parametrize('frequency', ['every-2', 'every-4', 'none'])
def test_paper_scale_ablation_configs_hold_their_frequencys_blocks(frequency):
    """configs/weightformer/weightformer-t_dynamic-*.py list their blocks by hand."""
    cfg = Config.fromfile(
        osp.join(REPO_ROOT, 'configs', 'weightformer',
                 f'weightformer-t_dynamic-{frequency}_8xb256-amp_in1k.py'))
    assert list(cfg.model.backbone.dynamic_indices) == dynamic_block_indices(frequency, 17)


def released_layout(C=192, depth=17):
    """The state-dict keys and shapes of the released checkpoints."""
    keys = {
        'patch_embed.proj.weight': (C, 3, 16, 16),
        'patch_embed.proj.bias': (C, ),
        'init_norm.weight': (C, ),
        'init_norm.bias': (C, ),
        'norm.weight': (C, ),
        'norm.bias': (C, ),
        'head.weight': (1000, C),
        'head.bias': (1000, )
    }
    for i in range(depth):
        p = f'blocks.{i}.'
        keys.update({
            p + 'norm2.weight': (C, ),
            p + 'norm2.bias': (C, ),
            p + 'linear2.weight': (C, 4 * C),
            p + 'linear2.bias': (C, )
        })
        if i % 3 == 1:
            keys.update({
                p + 'norm1.weight': (C, ),
                p + 'norm1.bias': (C, ),
                p + 'linear1.w': (C, 4 * C),
                p + 'linear1.b': (4 * C, ),
                p + 'linear1.w1': (C // 4, C),
                p + 'linear1.w2': (C, 4 * C),
                p + 'linear1.wfm.weight': (C // 4 + C, C),
                p + 'linear1.wfm.bias': (C // 4 + C, ),
                p + 'dwc.w': (C, 1, 3, 3),
                p + 'dwc.b': (C, ),
                p + 'dwc.wfm.0.weight': (C, C, 1, 1),
                p + 'dwc.wfm.0.bias': (C, ),
                p + 'dwc.wfm.2.weight': (C, C, 1, 1)
            })
        else:
            keys.update({
                p + 'linear1.weight': (4 * C, C),
                p + 'linear1.bias': (4 * C, ),
                p + 'dwc.weight': (C, 1, 3, 3),
                p + 'dwc.bias': (C, )
            })
    return keys


def test_state_dict_follows_the_released_checkpoint_layout():
    model = WeightFormer(arch='t')
    layout = released_layout()
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert shapes == {k: v for k, v in layout.items() if not k.startswith('head.')}
    # A checkpoint in that layout loads with only the classifier head left over.
    torch.manual_seed(3)
    released = {k: torch.randn(shape) for k, shape in layout.items()}
    result = model.load_state_dict(released, strict=False)
    assert result.missing_keys == [] and sorted(
        result.unexpected_keys) == ['head.bias', 'head.weight']
    assert torch.equal(model.patch_embed.projection.weight, released['patch_embed.proj.weight'])
    assert torch.equal(model.blocks[1].linear1.w, released['blocks.1.linear1.w'])


def test_presets_match_the_reference():
    zoo = WeightFormer.arch_zoo
    assert zoo['t'] == dict(embed_dims=192, num_layers=17, feedforward_channels=768)
    assert zoo['s'] == dict(embed_dims=384, num_layers=17, feedforward_channels=1536)
    assert zoo['b'] == zoo['s']  # B is the S architecture run at 448
    assert zoo['tiny'] == zoo['t'] and zoo['base'] == zoo['b']


# --------------------------------------------------------------------------------------------
# Compute
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize('arch,size,expected', [
    ('t', 224, 1_124_248_320),
    ('s', 224, 4_427_675_136),
    ('b', 448, 17_662_924_800),
])
def test_macs_match_the_reference(arch, size, expected):
    """Section 10.3 (with the head's C * 1000): 1.12444 / 4.42806 / 17.66331 GMACs."""
    with torch.device('meta'):
        model = WeightFormer(arch=arch)
    assert macs(model, size, size) == expected
    head = model.embed_dims * 1000
    assert round((expected + head) / 1e9, 5) == {'t': 1.12444, 's': 4.42806, 'b': 17.66331}[arch]


def test_macs_grow_linearly_with_the_token_count():
    """Token grids 14x14, 14x28, 14x42, 14x56 (N = 196 k): equal steps in MACs."""
    with torch.device('meta'):
        model = WeightFormer(arch='t')
    counts = [macs(model, 224, 224 * k) for k in (1, 2, 3, 4)]
    steps = [b - a for a, b in zip(counts, counts[1:])]
    assert steps[0] == steps[1] == steps[2]
    # Per token: 11 static and 6 dynamic blocks plus the stem (matmul + conv only).
    C = 192
    static = 9 * C + 8 * C * C
    dynamic = 9 * C + int(6.375 * C * C) + 4 * C * C
    assert steps[0] == 196 * (3 * 256 * C + 11 * static + 6 * dynamic)


# --------------------------------------------------------------------------------------------
# Outputs
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize('size', [(50, 77), (33, 100), (16, 16), (16, 40), (64, 64)])
def test_featmap_shapes_at_odd_sizes(size):
    model = tiny(out_type='featmap', out_indices=(0, 8, -1))
    outs = model(torch.randn(2, 3, *size))
    expected = (2, 192, -(-size[0] // 16), -(-size[1] // 16))
    assert len(outs) == 3 and all(o.shape == expected for o in outs)
    assert all(torch.isfinite(o).all() for o in outs)


def test_out_types_and_the_final_norm():
    x = torch.randn(2, 3, 48, 80)
    first, last = tiny(out_type='featmap', out_indices=(1, -1))(x)
    avg_first, avg_last = tiny(out_type='avg_featmap', out_indices=(1, -1))(x)
    assert avg_last.shape == (2, 192)
    torch.testing.assert_close(avg_last, last.mean((2, 3)))
    torch.testing.assert_close(avg_first, first.mean((2, 3)))
    # The last output is taken after the final LayerNorm (weight 1, bias 0 at init).
    torch.testing.assert_close(last.mean(1), torch.zeros(2, 3, 5), atol=1e-5, rtol=0)
    torch.testing.assert_close(last.var(1, unbiased=False), torch.ones(2, 3, 5), atol=1e-3, rtol=0)
    # Block 1 is dynamic: its stream passed through norm1, but its output is not normalised.
    assert first.mean(1).abs().max() > 1e-3
    assert tiny().out_type == 'avg_featmap' and tiny().out_indices == (16, )


def test_stem_ends_with_a_layer_norm():
    """Section 2.1: patch embedding, then ``init_norm`` before the first block."""
    model = tiny()
    captured = {}
    model.blocks[0].register_forward_pre_hook(lambda m, args: captured.update(x=args[0]))
    x = torch.randn(2, 3, 48, 64)
    model(x)
    tokens = captured['x']
    assert tokens.shape == (2, 12, 192)
    torch.testing.assert_close(tokens.mean(-1), torch.zeros(2, 12), atol=1e-5, rtol=0)
    torch.testing.assert_close(tokens.var(-1, unbiased=False), torch.ones(2, 12), atol=1e-3, rtol=0)
    # The patch embedding alone is not normalised.
    assert model.patch_embed(x)[0].var(-1).mean() < 0.5


def test_options_errors_name_the_allowed_values():
    with pytest.raises(ValueError, match="arch 'huge'; allowed: 't', 'tiny', 's', 'small'"):
        WeightFormer(arch='huge')
    with pytest.raises(ValueError, match='keys'):
        WeightFormer(arch=dict(embed_dims=16))
    with pytest.raises(
            ValueError, match="out_type 'cls_token'; allowed: 'featmap', "
            "'avg_featmap'"):
        WeightFormer(out_type='cls_token')
    with pytest.raises(ValueError, match=r'out_indices must hold integers in \[-17, 16\]'):
        WeightFormer(out_indices=(17, ))
    with pytest.raises(ValueError, match=r'frozen_stages must lie in \[-1, 17\]'):
        WeightFormer(frozen_stages=18)
    with pytest.raises(ValueError, match='divisible by rank_ratio'):
        WeightFormer(arch=dict(embed_dims=18, num_layers=2, feedforward_channels=72))
    model = tiny()
    with pytest.raises(ValueError, match=r'\(B, 3, H, W\)'):
        model(torch.randn(1, 1, 32, 32))
    with pytest.raises(ValueError, match='at least one patch'):
        model(torch.randn(1, 3, 15, 64))
    with pytest.raises(ValueError, match='padding_mask must have shape'):
        model(torch.randn(1, 3, 32, 32), torch.zeros(1, 16, 32, dtype=torch.bool))


def test_batch_members_do_not_interact():
    model = tiny(arch='test').double().eval()  # a static and a dynamic block, as every preset
    torch.manual_seed(1)
    x = torch.randn(3, 3, 48, 64, dtype=torch.float64)
    out = model(x)[0]
    torch.testing.assert_close(model(x[1:2])[0], out[1:2])


# --------------------------------------------------------------------------------------------
# Blocks
# --------------------------------------------------------------------------------------------


def block(dynamic, drop_path_rate=0.):
    torch.manual_seed(0)
    module = WeightFormerBlock(32, 128, dynamic=dynamic, drop_path_rate=drop_path_rate).double()
    if dynamic:
        with torch.no_grad():  # make the dynamic path matter
            for param in (module.linear1.wfm.weight, module.linear1.w1, module.linear1.w2,
                          *module.dwc.wfm.parameters()):
                param.normal_(0, 0.3)
    return module


def test_dynamic_block_normalises_the_stream():
    """Section 10.11: LN1 replaces the stream, so x + c leaves a dynamic block's output
    unchanged and 5 x nearly so (LN eps); a static block has no such norm."""
    torch.manual_seed(1)
    x = torch.randn(2, 30, 32, dtype=torch.float64)
    dynamic = block(True)
    out = dynamic(x, hw_shape=(5, 6))
    torch.testing.assert_close(dynamic(x + 3.0, hw_shape=(5, 6)), out, atol=1e-10, rtol=0)
    assert (dynamic(5 * x, hw_shape=(5, 6)) - out).abs().max() < 1e-4
    static = block(False)
    assert (static(x + 3.0, hw_shape=(5, 6)) - static(x, hw_shape=(5, 6)) - 3.0).abs().max() > 1e-2
    # The DWC residual is added to LN1(x), not to x.
    stream = dynamic.norm1(x)
    mixed = stream + dynamic.dwc(stream, (5, 6))
    linear1, hidden = dynamic.linear1, dynamic.norm2(mixed)
    delta = linear1.predict_delta(hidden, (5, 6))
    mlp = dynamic.linear2(F.gelu(hidden @ (delta + linear1.w) + linear1.b))
    torch.testing.assert_close(out, mixed + mlp)


def test_static_block_structure():
    torch.manual_seed(1)
    x = torch.randn(2, 12, 32, dtype=torch.float64)
    static = block(False)
    x_map = x.transpose(1, 2).reshape(2, 32, 3, 4)
    mixed = x + static.dwc(x_map).flatten(2).transpose(1, 2)
    hidden = F.linear(static.norm2(mixed), static.linear1.weight, static.linear1.bias)
    expected = mixed + static.linear2(F.gelu(hidden))
    torch.testing.assert_close(static(x, hw_shape=(3, 4)), expected)


@pytest.mark.parametrize('dynamic', [False, True])
def test_drop_path_acts_on_the_mlp_branch_only(dynamic):
    module = block(dynamic, drop_path_rate=0.5).train()
    torch.manual_seed(1)
    x = torch.randn(32, 12, 32, dtype=torch.float64)
    stream = module.norm1(x) if dynamic else x
    if dynamic:
        mixed = stream + module.dwc(stream, (3, 4))
    else:
        mixed = stream + module.dwc(stream.transpose(1, 2).reshape(32, 32, 3,
                                                                   4)).flatten(2).transpose(1, 2)
    out = module(x, hw_shape=(3, 4))
    # Up to float64 rounding: the static block convolves through the per-sample kernel.
    dropped = (out - mixed).abs().amax((1, 2)) < 1e-12
    # Some samples lose the MLP branch, some keep it; the token mixer is never dropped.
    assert 0 < dropped.sum() < 32
    module.eval()
    assert (module(x, hw_shape=(3, 4)) - mixed).abs().amax((1, 2)).min() > 1e-3


def test_drop_path_rates_rise_linearly():
    model = WeightFormer(arch='t', drop_path_rate=0.2)
    rates = [getattr(b.drop_path, 'drop_prob', 0.) for b in model.blocks]
    assert rates[0] == 0 and isinstance(model.blocks[0].drop_path, torch.nn.Identity)
    torch.testing.assert_close(
        torch.tensor(rates, dtype=torch.float64), torch.linspace(0, 0.2, 17, dtype=torch.float64))


# --------------------------------------------------------------------------------------------
# Initialisation
# --------------------------------------------------------------------------------------------


def test_reference_initialisation():
    model = tiny()
    dynamic, static = model.blocks[1], model.blocks[0]
    for param in (dynamic.linear1.w, dynamic.linear1.b, dynamic.linear1.w1, dynamic.linear1.w2,
                  dynamic.linear1.wfm.weight, dynamic.dwc.w, dynamic.dwc.b, static.linear1.weight,
                  dynamic.linear2.weight):
        assert abs(param.std().item() - 0.02) < 0.004, param.shape
    # Linear biases are zero; the dynamic layers' own bias b is truncated normal too.
    assert static.linear1.bias.abs().max() == 0 and dynamic.linear1.wfm.bias.abs().max() == 0
    assert dynamic.linear1.b.abs().max() > 0.01
    # Convolutions keep the PyTorch default (kaiming-uniform a=sqrt(5): bound 1/sqrt(fan_in)).
    assert 0.3 < static.dwc.weight.abs().max().item() <= 9**-0.5
    assert 0.03 < model.patch_embed.proj.weight.abs().max().item() <= 768**-0.5
    assert 0.07 < dynamic.dwc.wfm[0].weight.abs().max().item() <= 192**-0.5
    assert torch.equal(model.norm.weight, torch.ones(192))


def test_dynamic_path_is_near_silent_at_init():
    """Section 2.4 / 10.9: the mean column norm of dW is ~1e-4 of W0's at step 0."""
    model = tiny().eval()
    captured = {}
    layer = model.blocks[1].linear1
    layer.register_forward_pre_hook(lambda m, args: captured.update(args=args))
    torch.manual_seed(1)
    model(torch.randn(2, 3, 64, 64))
    delta = layer.predict_delta(*captured['args'])
    ratio = (delta.norm(dim=1).mean() / layer.w.norm(dim=0).mean()).item()
    assert 1e-6 < ratio < 1e-3


# --------------------------------------------------------------------------------------------
# Training options
# --------------------------------------------------------------------------------------------


def test_frozen_stages():
    model = tiny(frozen_stages=2)
    model.train()
    assert not any(p.requires_grad for p in model.patch_embed.parameters())
    assert not model.init_norm.weight.requires_grad
    assert not any(p.requires_grad for b in model.blocks[:2] for p in b.parameters())
    assert all(p.requires_grad for p in model.blocks[2].parameters())
    assert model.norm.weight.requires_grad
    assert not model.blocks[1].training and model.blocks[2].training
    all_frozen = tiny(frozen_stages=17)
    assert not any(p.requires_grad for p in all_frozen.parameters())


def test_with_cp_matches_plain_forward_and_backward():
    x = torch.randn(2, 3, 48, 64)
    # 'test' has a static block 0 and a dynamic block 1, as the presets: checkpointing wraps
    # each block alike at any depth and width.
    plain, checkpointed = tiny(arch='test'), tiny(arch='test', with_cp=True)
    checkpointed.load_state_dict(plain.state_dict())
    out_plain, out_cp = plain(x)[0], checkpointed(x)[0]
    torch.testing.assert_close(out_cp, out_plain)
    out_plain.sum().backward()
    out_cp.sum().backward()
    for name in ('blocks.1.linear1.w1', 'blocks.1.dwc.wfm.0.weight', 'patch_embed.proj.weight'):
        grad_plain = plain.get_parameter(name).grad
        assert grad_plain.abs().max() > 0
        torch.testing.assert_close(checkpointed.get_parameter(name).grad, grad_plain)


def test_padding_mask_hides_the_padded_region():
    """With the mask, the valid tokens of a padded image equal those of the image alone."""
    # 'test': a static and a dynamic block, as every preset (the mask enters each block alike).
    model = tiny(arch='test', out_type='featmap').double().eval()
    torch.manual_seed(1)
    image = torch.randn(1, 3, 48, 64, dtype=torch.float64)
    padded = torch.randn(1, 3, 96, 96, dtype=torch.float64)
    padded[..., :48, :64] = image
    mask = torch.ones(1, 96, 96, dtype=torch.bool)
    mask[..., :48, :64] = False
    alone = model(image)[0]
    torch.testing.assert_close(model(padded, mask)[0][..., :3, :4], alone)
    assert (model(padded)[0][..., :3, :4] - alone).abs().max() > 1e-3
    avg = tiny(arch='test', out_type='avg_featmap').double().eval()
    torch.testing.assert_close(avg(padded, mask)[0], avg(image)[0])


@pytest.mark.parametrize('scope', ['mmpretrain', 'mmdet', 'mmseg'])
def test_builds_under_each_default_scope(scope):
    """Configs reference the backbone as mmlinear.WeightFormer under the toolbox's scope."""
    from mmengine.registry import MODELS
    init_default_scope(scope)
    backbone = MODELS.build(dict(type='mmlinear.WeightFormer', arch='t', out_type='featmap'))
    neck = MODELS.build(dict(type='mmlinear.SimpleFeaturePyramid', in_channels=192))
    assert isinstance(backbone, WeightFormer)
    assert num_params(backbone) == 6_881_184
    outs = neck(backbone(torch.randn(1, 3, 64, 96)))
    assert [tuple(o.shape[-2:]) for o in outs] == [(16, 24), (8, 12), (4, 6), (2, 3)]
