"""mmlinear.VECA: model-level faithfulness to the official code (parameter counts, key layout,
locality, elasticity, FLOPs, coordinates, determinism), the OpenMMLab options and padded
batches."""
import pytest
import torch
import torch.nn.functional as F
from mmengine.registry import MODELS, init_default_scope
from torch.utils.flop_counter import FlopCounterMode

from mmlinear.models import VECA

BUDGETS = (8, 16, 24, 32, 40, 48, 56, 64)
ALLOWED = r'\(8, 16, 24, 32, 40, 48, 56, 64\)'


def tiny(num_layers=2, seed=0, **kwargs):
    """A 2-layer width-64 VECA with its gains raised so that the cores really move."""
    torch.manual_seed(seed)
    arch = dict(embed_dims=64, num_layers=num_layers, num_heads=2, feedforward_channels=128)
    model = VECA(arch=arch, **kwargs)
    model.init_weights()
    with torch.no_grad():
        model.pos_alpha.fill_(0.5)
    return model.eval()


def images(*size, batch=2, seed=1):
    return torch.randn(batch, 3, *size, generator=torch.Generator().manual_seed(seed))


# --- presets, keys, parameter counts ---------------------------------------------------------


@pytest.mark.parametrize('arch,count', [('small', 21_628_961), ('splus', 28_719_137),
                                        ('base', 85_725_089), ('large', 303_195_301)])
def test_parameter_counts(arch, count):
    with torch.device('meta'):
        model = VECA(arch=arch, init_cfg=None)
    assert sum(p.numel() for p in model.parameters()) == count


def test_small_with_a_768_output_projection():
    with torch.device('meta'):
        model = VECA(arch='small', out_channels=768, init_cfg=None)
    assert sum(p.numel() for p in model.parameters()) == 21_924_641
    assert model.out_channels == 768 and model.embed_dims == 384


def test_released_key_layout_of_base():
    with torch.device('meta'):
        keys = set(VECA(arch='base', init_cfg=None).state_dict())
    assert len(keys) == 235
    top = {k for k in keys if not k.startswith('blocks.')}
    assert top == ({
        'patch_embed.proj.weight', 'patch_embed.proj.bias', 'pos_alpha', 'final_norm.weight',
        'final_norm.bias'
    }
                   | {f'query_token_chunks.{i}'
                      for i in range(8)}
                   | {f'qcoord_chunks.{i}'
                      for i in range(8)}
                   | {f'pos_linears.{i}.{p}'
                      for i in range(11)
                      for p in ('weight', 'bias')})


# --- information flow --------------------------------------------------------------------


def perturb_patch0(x):
    x2 = x.clone()
    x2[:, :, :16, :16] += torch.randn(x.shape[0], 3, 16, 16)
    return x2


def test_depth1_patches_are_independent():
    model = tiny(num_layers=1)
    x = images(64, 80)
    with torch.no_grad():
        a, b = model.forward_tokens(x), model.forward_tokens(perturb_patch0(x))
    assert (a['patches'][:, 1:] - b['patches'][:, 1:]).abs().max() == 0.0
    assert (a['patches'][:, 0] - b['patches'][:, 0]).abs().max() > 1e-3
    assert (a['global'] - b['global']).abs().max() > 1e-5


def test_depth2_patches_interact_through_the_cores():
    model = tiny(num_layers=2)
    x = images(64, 80)
    with torch.no_grad():
        a, b = model.forward_tokens(x), model.forward_tokens(perturb_patch0(x))
    assert ((a['patches'][:, 1:] - b['patches'][:, 1:]).abs().amax(-1) > 0).all()


# --- elastic budget ----------------------------------------------------------------------


@pytest.mark.parametrize('budget', BUDGETS)
def test_prefix_elasticity_gradients(budget):
    model = tiny(out_channels=48).train()
    out = model.forward_tokens(images(48, 64), active_cores=budget)
    assert out['global'].shape == (2, 48) and out['patches'].shape == (2, 12, 48)
    (out['global'].sum() + out['patches'].pow(2).sum()).backward()
    used = budget // 8
    for i in range(8):
        for chunks in (model.query_token_chunks, model.qcoord_chunks):
            grad = chunks[i].grad
            if i < used:
                assert grad is not None and grad.abs().max() > 0
            else:
                assert grad is None


@pytest.mark.parametrize('budget', BUDGETS[:-1])
def test_budget_isolation(budget):
    model = tiny()
    x = images(48, 64)
    with torch.no_grad():
        before = model.forward_tokens(x, active_cores=budget)
        for j in range(budget // 8, 8):
            model.query_token_chunks[j].normal_()
            model.qcoord_chunks[j].normal_()
        after = model.forward_tokens(x, active_cores=budget)
        full_changed = model.forward_tokens(x, active_cores=64)
    assert torch.equal(before['global'], after['global'])
    assert torch.equal(before['patches'], after['patches'])
    assert not torch.equal(before['patches'], full_changed['patches'])


def test_budgets_give_different_outputs():
    model = tiny()
    x = images(48, 64)
    with torch.no_grad():
        outs = [model.forward_tokens(x, active_cores=c)['global'] for c in (8, 64)]
    assert (outs[0] - outs[1]).abs().max() > 1e-4


@pytest.mark.parametrize('value', [0, 7, 12, 65, 72, 128, -8, True, 8.0, '16'])
def test_invalid_budgets(value):
    model = tiny()
    with pytest.raises(ValueError, match=ALLOWED):
        model(images(32, 32), active_cores=value)
    with pytest.raises(ValueError, match=ALLOWED):
        model.active_cores = value
    with pytest.raises(ValueError, match=ALLOWED):
        VECA(arch='test', active_cores=value)


def test_active_cores_attribute_is_the_default_budget():
    model = tiny()
    assert model.active_cores == 64
    x = images(32, 48)
    with torch.no_grad():
        explicit = model.forward_tokens(x, active_cores=16)['global']
        model.active_cores = 16
        assert model.active_cores == 16
        assert torch.equal(model.forward_tokens(x)['global'], explicit)
        assert torch.equal(model(x)[0], model(x, active_cores=16)[0])
    assert VECA(arch='test', active_cores=24).active_cores == 24


# --- cost -----------------------------------------------------------------------------------


def count_flops(model, size):
    x = torch.empty(1, 3, size, size, device='meta')
    with FlopCounterMode(display=False) as counter:
        model.forward_tokens(x)
    return counter.get_flop_counts()['Global']


def test_linear_cost_base():
    """Exact FLOPs of VECA-B at K = 64 cores (meta tensors, nothing allocated). Projections,
    MLPs, coordinate heads and the patch projection reproduce the totals measured on the
    official model code with the same counter (without the SDPA FLOPs; there the patch
    projection is a convolution, here the same product of gathered patches, counted as a
    matrix product); attention scores add 4 C (K^2 + 2 N K) per layer."""
    with torch.device('meta'):
        model = VECA(arch='base', init_cfg=None)
    model = model.to('meta').eval()
    D, L, h, Cc = 768, 12, 2048, 64
    reference_totals = {256: 54.66, 384: 109.40, 512: 186.03, 768: 404.97, 1024: 711.49}
    dense_flops = {}
    for size, total in reference_totals.items():
        counts = {str(k): v for k, v in count_flops(model, size).items()}
        N = (size // 16)**2
        T = Cc + N
        linear = L * (8 * T * D * D + 6 * T * D * h) + (L - 1) * 4 * Cc * D
        patch_projection = 2 * N * 3 * 16 * 16 * D
        assert counts['aten.addmm'] == linear + patch_projection
        assert 'aten.convolution' not in counts
        attention = sum(v for k, v in counts.items() if k != 'aten.addmm')
        assert attention == L * 4 * D * (Cc * (Cc + N) + N * Cc)
        assert round(counts['aten.addmm'] / 1e9, 2) == total
        dense_flops[N] = sum(counts.values())
    # Affine in N: one slope between any two resolutions.
    ns = sorted(dense_flops)
    slopes = [(dense_flops[b] - dense_flops[a]) / (b - a) for a, b in zip(ns, ns[1:])]
    assert max(slopes) == pytest.approx(min(slopes), rel=1e-12)


# --- coordinates ------------------------------------------------------------------------------


def test_core_coordinates():
    model = tiny(num_layers=3)
    x = images(48, 64)
    with torch.no_grad():
        coords = model.core_coordinates(x, active_cores=24)
    assert coords.shape == (3, 2, 24, 2)
    assert coords.abs().max() < 1
    raw = torch.cat(list(model.qcoord_chunks), 1)[0, :24]
    assert torch.equal(coords[0, 0], torch.tanh(raw)) and torch.equal(coords[0, 1], coords[0, 0])
    # From block 2 on the cores move, differently per image.
    assert (coords[1] - coords[0]).abs().max() > 1e-3
    assert (coords[2, 0] - coords[2, 1]).abs().max() > 1e-5


def test_attention_maps_are_the_core_rows_of_every_block():
    model = tiny(num_layers=3)
    x = images(48, 64)  # a 3 x 4 patch grid
    mask = torch.zeros(2, 48, 64, dtype=torch.bool)
    mask[1, :, 32:] = True  # image 1: only the left 3 x 2 patches are real
    with torch.no_grad():
        maps = model.forward_attention_maps(x, active_cores=16, padding_mask=mask)
        features = model(x, active_cores=16, padding_mask=mask)
        again = model(x, active_cores=16, padding_mask=mask)
    assert [m.shape for m in maps] == [(2, 2, 16, 16 + 12)] * 3
    for weights in maps:
        torch.testing.assert_close(weights.sum(-1), torch.ones(2, 2, 16))
        padded = weights[1, :, :, 16:].reshape(2, 16, 3, 4)[..., 2:]
        assert bool((padded == 0).all()) and bool((weights[0] > 0).all())
    # The maps change from block to block (the cores move); forward is left as it was.
    assert (maps[2] - maps[0]).abs().max() > 1e-4
    torch.testing.assert_close(features, again, atol=0, rtol=0)


def test_eval_determinism_and_train_augmentation():
    model = tiny()
    x = images(48, 64)
    with torch.no_grad():
        a, b = model.forward_tokens(x), model.forward_tokens(x)
        assert torch.equal(a['patches'], b['patches']) and torch.equal(a['global'], b['global'])
        model.train()
        torch.manual_seed(0)
        t1 = model.forward_tokens(x)
        t2 = model.forward_tokens(x)
        torch.manual_seed(0)
        t3 = model.forward_tokens(x)
        # Cores are not augmented: block 0 still sees tanh(raw).
        raw = torch.cat(list(model.qcoord_chunks), 1)[0]
        assert torch.equal(model.core_coordinates(x)[0, 0], torch.tanh(raw))
    assert (t1['patches'] - t2['patches']).abs().max() > 1e-4
    assert torch.equal(t1['patches'], t3['patches'])
    # One draw for the batch: identical images get identical features.
    model.train()
    with torch.no_grad():
        same = model.forward_tokens(x[:1].expand(3, -1, -1, -1))['patches']
    assert torch.equal(same[0], same[1]) and torch.equal(same[0], same[2])


@pytest.mark.parametrize('size', [(64, 96), (256, 256), (1024, 1024)])
def test_resolution_agnostic(size):
    model = tiny()
    with torch.no_grad():
        out = model.forward_tokens(images(*size, batch=1))
    assert out['patches'].shape == (1, size[0] * size[1] // 256, 64)
    assert out['hw_shape'] == (size[0] // 16, size[1] // 16)


@pytest.mark.parametrize('size', [(50, 77), (16, 16), (33, 100)])
def test_sizes_not_multiple_of_16_are_padded_to_whole_patches(size):
    model = tiny(out_type='featmap')
    x = images(*size)
    with torch.no_grad():
        feat = model(x)[0]
        padded = F.pad(x, (0, -size[1] % 16, 0, -size[0] % 16))
        assert torch.equal(feat, model(padded)[0])
    assert feat.shape == (2, 64, -(-size[0] // 16), -(-size[1] // 16))


# --- OpenMMLab options ---------------------------------------------------------------------


def test_featmap_and_cls_token_outputs():
    model = tiny(out_indices=(0, -1), out_type='featmap', out_channels=40)
    x = images(48, 80)
    with torch.no_grad():
        first, last = model(x)
        tokens = model.forward_tokens(x)
    assert first.shape == (2, 64, 3, 5) and last.shape == (2, 40, 3, 5)
    torch.testing.assert_close(last.flatten(2).transpose(1, 2), tokens['patches'], atol=0, rtol=0)
    model.out_type = 'cls_token'
    with torch.no_grad():
        g_first, g_last = model(x)
    assert g_first.shape == (2, 64) and torch.equal(g_last, tokens['global'])


def test_only_the_last_output_is_normalised():
    model = tiny(out_indices=(0, 1), out_type='featmap')
    with torch.no_grad():
        first, last = model(images(48, 64))
    # Final LayerNorm at its init (1, 0): zero mean over the channels of every token.
    torch.testing.assert_close(last.mean(1), torch.zeros(2, 3, 4), atol=1e-5, rtol=0)
    assert first.mean(1).abs().max() > 1e-3


def test_registry_build_and_errors():
    init_default_scope('mmpretrain')
    model = MODELS.build(
        dict(type='mmlinear.VECA', arch='test', out_type='cls_token', active_cores=32))
    assert isinstance(model, VECA) and model.active_cores == 32
    assert model(images(32, 32))[0].shape == (2, 64)
    with pytest.raises(ValueError, match="allowed: 's', 'small'"):
        VECA(arch='huge')
    with pytest.raises(ValueError, match='keys'):
        VECA(arch=dict(embed_dims=64))
    with pytest.raises(
            ValueError, match="out_type 'avg_featmap'; allowed: 'featmap', "
            "'cls_token'"):
        VECA(arch='test', out_type='avg_featmap')
    with pytest.raises(ValueError, match=r'out_indices must hold integers in \[-2, 1\]'):
        VECA(arch='test', out_indices=(2, ))
    with pytest.raises(ValueError, match=r'frozen_stages must lie in \[-1, 2\]'):
        VECA(arch='test', frozen_stages=3)
    with pytest.raises(ValueError, match=r'\(B, 3, H, W\)'):
        model(torch.randn(2, 1, 32, 32))


def trainable(model):
    return {n for n, p in model.named_parameters() if p.requires_grad}


def test_frozen_stages():
    model = tiny(num_layers=3, frozen_stages=1).train()
    names = trainable(model)
    assert not any(
        n.startswith(('patch_embed.', 'query_token_chunks.', 'qcoord_chunks.', 'blocks.0.'))
        for n in names)
    assert {'pos_linears.0.weight', 'pos_alpha', 'blocks.1.fc1.weight'} <= names
    assert not model.blocks[0].training and model.blocks[1].training

    model = tiny(num_layers=3, frozen_stages=2).train()
    names = trainable(model)
    assert 'pos_linears.0.weight' not in names and 'pos_alpha' not in names
    assert {'pos_linears.1.weight', 'blocks.2.fc1.weight', 'final_norm.weight'} <= names

    model = tiny(num_layers=3, frozen_stages=3, out_channels=32).train()
    assert trainable(model) == set()
    assert len(trainable(tiny(num_layers=3))) == len(list(tiny(num_layers=3).parameters()))


def test_with_cp_gives_the_same_outputs_and_gradients():
    x = images(48, 64)
    grads = []
    for with_cp in (False, True):
        model = tiny(with_cp=with_cp).train()
        torch.manual_seed(5)
        out = model.forward_tokens(x, active_cores=32)
        (out['patches'].sum() + out['global'].sum()).backward()
        grads.append([p.grad for p in model.parameters() if p.grad is not None])
    assert len(grads[0]) == len(grads[1])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


# --- padded batches ------------------------------------------------------------------------


def pad_batch(imgs, size):
    """Zero-pad each (3, h, w) image to ``size`` at the bottom / right, and its mask."""
    batch = torch.zeros(len(imgs), 3, *size)
    mask = torch.ones(len(imgs), *size, dtype=torch.bool)
    for i, img in enumerate(imgs):
        h, w = img.shape[-2:]
        batch[i, :, :h, :w] = img
        mask[i, :h, :w] = False
    return batch, mask


def test_padding_mask_makes_features_independent_of_the_padding():
    """Two images (one not a multiple of 16) in batches padded to 64 x 96 and to 112 x 160:
    with the mask, the valid region's features at every out index and the global token
    equal those of each image run alone, unpadded."""
    model = tiny(num_layers=3, out_indices=(1, 2), out_type='featmap')
    gen = torch.Generator().manual_seed(2)
    imgs = [torch.randn(3, 64, 80, generator=gen), torch.randn(3, 50, 77, generator=gen)]
    h, w = 4, 5  # the token grid of both images
    with torch.no_grad():
        alone = [model(img[None]) for img in imgs]
        alone_global = torch.cat([model.forward_tokens(img[None])['global'] for img in imgs])
        for size in [(64, 96), (112, 160)]:
            batch, mask = pad_batch(imgs, size)
            feats = model(batch, padding_mask=mask)
            for level in range(2):
                for i in range(2):
                    torch.testing.assert_close(
                        feats[level][i, :, :h, :w], alone[i][level][0], atol=1e-5, rtol=0)
            torch.testing.assert_close(
                model.forward_tokens(batch, padding_mask=mask)['global'],
                alone_global,
                atol=1e-5,
                rtol=0)
        unmasked = model(batch)
    # Without the mask the padding does change the features.
    assert (unmasked[1][1, :, :h, :w] - alone[1][1][0]).abs().max() > 1e-3


def test_padding_mask_shape_is_checked():
    model = tiny()
    with pytest.raises(ValueError, match=r'padding_mask must have shape \(B, H, W\)'):
        model(images(32, 48), padding_mask=torch.zeros(2, 32, 32, dtype=torch.bool))


def test_an_all_padding_image_stays_finite():
    model = tiny()
    x, mask = pad_batch([torch.randn(3, 32, 32)], (48, 64))
    mask = torch.cat([mask, torch.ones_like(mask)])
    with torch.no_grad():
        out = model(torch.cat([x, x]), padding_mask=mask)[0]
    assert torch.isfinite(out).all()


def test_bf16_autocast_runs_close_to_fp32():
    """The reference trains under bf16 autocast; the RoPE angles stay fp32 inside."""
    model = tiny()
    x = images(48, 64)
    x_pad, mask = pad_batch([x[0], x[1, :, :40, :50]], (48, 64))
    with torch.no_grad():
        ref = model.forward_tokens(x_pad, padding_mask=mask)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            low = model.forward_tokens(x_pad, padding_mask=mask)
    # CPU autocast runs the matmuls in bf16 (the final LayerNorm returns fp32).
    assert not torch.equal(low['patches'].float(), ref['patches'])
    cos = F.cosine_similarity(low['patches'].float(), ref['patches'], dim=-1)
    assert cos.min() > 0.99
