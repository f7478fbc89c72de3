"""Misuse of the backbones: each case gives a clear error naming the problem and what is allowed."""

import pytest
import torch
from mmengine.runner import load_checkpoint

from mmlinear.models.backbones import VECA, InfViT, WeightFormer


def infvit(**kwargs):
    return InfViT(**{'arch': 'test', **kwargs})


def weightformer(**kwargs):
    return WeightFormer(**{'arch': 'test', **kwargs})


def veca(**kwargs):
    return VECA(**{'arch': 'test', **kwargs})


# One constructor per backbone, for the cases that every backbone must answer alike.
BACKBONES = dict(infvit=infvit, weightformer=weightformer, veca=veca)

# (case, call, exception type, regex the message must match)
CASES = [
    ('unknown arch', lambda: InfViT(arch='huge'), ValueError,
     r"unknown arch 'huge'; allowed: 'infvit-4l', 'infvit-24l'"),
    ('unknown arch', lambda: VECA(arch='giant'), ValueError,
     r"unknown arch 'giant'; allowed: .*'small'.*'base'.*'large'"),
    ('unknown arch', lambda: WeightFormer(arch='x'), ValueError,
     r"unknown arch 'x'; allowed: 't', 'tiny', 's'"),
    ('incomplete arch dict', lambda: InfViT(arch=dict(embed_dims=8)), ValueError,
     r'a custom arch must be a dict with exactly the keys \[.embed_dims., '),
    ('out_indices out of range', lambda: infvit(out_indices=7), ValueError,
     r'out_indices must hold integers in \[-2, 1\] \(the model has 2 layers\), got \(7,\)'),
    ('out_indices not integers', lambda: weightformer(out_indices=('a', )), ValueError,
     r'out_indices must hold integers in \[-2, 1\]'),
    ('out_indices repeat a layer', lambda: infvit(out_indices=(1, -1)), ValueError,
     r'out_indices names layer 1 twice'),
    ('out_indices bool', lambda: infvit(out_indices=True), ValueError,
     r'out_indices must hold integers'),
    ('active_cores not allowed', lambda: VECA(arch='test', active_cores=12), ValueError,
     r'active_cores must be one of \(8, 16, 24, 32, 40, 48, 56, 64\).*got 12'),
    ('active_cores not allowed', lambda: VECA(arch='test')
     (torch.randn(1, 3, 32, 32), active_cores=72), ValueError,
     r'active_cores must be one of \(8, 16, 24, 32, 40, 48, 56, 64\).*got 72'),
    ('unknown attn_type', lambda: infvit(attn_type='flash'), ValueError,
     r"unknown attn_type 'flash'; allowed: 'softmax', 'pure', 'linear', 'none', "
     r"'elu_linear', 'performer', 'linformer', 'nystromformer', 'agent'"),
    ('unknown out_type', lambda: weightformer(out_type='cls_token'), ValueError,
     r"unknown out_type 'cls_token'; allowed: 'featmap', 'avg_featmap'"),
    ('frozen_stages out of range', lambda: infvit(frozen_stages=9), ValueError,
     r'frozen_stages must lie in \[-1, 2\], got 9'),
    ('unknown rho_mode', lambda: infvit(rho_mode='x'), ValueError,
     r"unknown rho_mode 'x'; allowed: 'per_head', 'per_layer', 'fixed'"),
    ('input rank', lambda: infvit()(torch.randn(3, 32, 32)), ValueError,
     r'expected images of shape \(B, 3, H, W\), got \(3, 32, 32\)'),
    ('channel count', lambda: weightformer()(torch.randn(1, 1, 32, 32)), ValueError,
     r'expected images of shape \(B, 3, H, W\), got \(1, 1, 32, 32\)'),
    ('input rank', lambda: VECA(arch='test')(torch.randn(3, 32, 32)), ValueError,
     r'expected images of shape \(B, 3, H, W\), got \(3, 32, 32\)'),
    ('smaller than a patch', lambda: infvit()(torch.randn(1, 3, 8, 32)), ValueError,
     r'images must be at least one patch \(16x16\) large, got 8x32'),
    ('smaller than a patch', lambda: weightformer()(torch.randn(1, 3, 32, 15)), ValueError,
     r'images must be at least one patch \(16x16\) large, got 32x15'),
    ('padding mask shape', lambda: infvit()
     (torch.randn(1, 3, 32, 32), torch.zeros(1, 16, 32, dtype=torch.bool)), ValueError,
     r'padding_mask must have shape \(B, H, W\) = \(1, 32, 32\), got \(1, 16, 32\)'),
    ('active_cores positional', lambda: VECA(arch='test')(torch.randn(1, 3, 32, 32), None, 16),
     TypeError, r'takes from 2 to 3 positional arguments but 4 were given'),
]
for name, build in BACKBONES.items():
    CASES += [
        (f'{name}: float padding mask', lambda build=build: build()
         (torch.randn(1, 3, 32, 32), torch.zeros(1, 32, 32)), TypeError,
         r'padding_mask must be a bool tensor \(True on padded pixels\), got dtype '
         r'torch.float32'),
        (f'{name}: integer padding mask', lambda build=build: build()
         (torch.randn(1, 3, 32, 32), torch.zeros(1, 32, 32, dtype=torch.uint8)), TypeError,
         r'padding_mask must be a bool tensor .*got dtype torch.uint8'),
        (f'{name}: uint8 image', lambda build=build: build()
         (torch.zeros(1, 3, 32, 32, dtype=torch.uint8)), TypeError,
         r'expected floating-point images \(B, C, H, W\), normalised as the data '
         r'preprocessor does, got dtype torch.uint8'),
    ]


@pytest.mark.parametrize('case,call,error,message', CASES, ids=[c[0] for c in CASES])
def test_misuse_gives_a_clear_error(case, call, error, message):
    with pytest.raises(error, match=message):
        call()


def checkpoint_with_wrong_keys(tmp_path):
    state = infvit().state_dict()
    state.pop('cls_token')
    state['blocks.0.extra.weight'] = torch.zeros(1)
    path = tmp_path / 'wrong_keys.pth'
    torch.save(dict(state_dict=state), path)
    return str(path)


def test_checkpoint_with_missing_and_unexpected_keys_is_reported(tmp_path, mmengine_log):
    path = checkpoint_with_wrong_keys(tmp_path)
    with pytest.raises(RuntimeError) as info:
        load_checkpoint(infvit(), path, strict=True)
    assert 'missing keys in source state_dict: cls_token' in str(info.value)
    assert 'unexpected key in source state_dict: blocks.0.extra.weight' in str(info.value)

    # Non-strict loading (as init_cfg=dict(type='Pretrained') does) loads the rest and
    # reports both lists in the log.
    model = InfViT(arch='test', init_cfg=dict(type='Pretrained', checkpoint=path))
    model.init_weights()
    report = '\n'.join(mmengine_log)
    assert 'missing keys in source state_dict: cls_token' in report
    assert 'unexpected key in source state_dict: blocks.0.extra.weight' in report


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_an_all_padding_image_gives_finite_features_and_leaves_the_batch_alone(name):
    """An image that is all padding is computed from a 1 x 1 valid region: its features are
    finite, and the other images of the batch are unaffected by it."""
    torch.manual_seed(0)
    model = BACKBONES[name](out_type='featmap').eval()
    x = torch.randn(2, 3, 48, 64)
    mask = torch.zeros(2, 48, 64, dtype=torch.bool)
    mask[0, 32:] = True  # a partly padded image
    mask[1] = True  # all padding
    with torch.no_grad():
        both = model(x, mask)[0]
        alone = model(x[:1], mask[:1])[0]
    assert torch.isfinite(both).all()
    torch.testing.assert_close(both[:1], alone, atol=1e-5, rtol=1e-5)
