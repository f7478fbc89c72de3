"""Misuse of the backbones: each case gives a clear error naming the problem and what is allowed."""
import logging

import pytest
import torch
from mmengine.logging import MMLogger
from mmengine.runner import load_checkpoint

from mmlinear.models.backbones import VECA, InfViT, WeightFormer

WFM_TINY = dict(embed_dims=32, num_layers=2, feedforward_channels=64)


def infvit(**kwargs):
    return InfViT(**{'arch': 'infvit-test', **kwargs})


def weightformer(**kwargs):
    return WeightFormer(**{'arch': WFM_TINY, **kwargs})


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
    ('active_cores not allowed', lambda: VECA(arch='test')(torch.randn(1, 3, 32, 32), 72),
     ValueError, r'active_cores must be one of \(8, 16, 24, 32, 40, 48, 56, 64\).*got 72'),
    ('unknown attn_type', lambda: infvit(attn_type='flash'), ValueError,
     r"unknown attn_type 'flash'; allowed: 'softmax', 'pure', 'linear', 'none'"),
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
    ('padding mask shape', lambda: infvit()(torch.randn(1, 3, 32, 32),
                                            torch.zeros(1, 16, 32, dtype=torch.bool)),
     ValueError, r'padding_mask must have shape \(B, H, W\) = \(1, 32, 32\), got \(1, 16, 32\)'),
]


@pytest.mark.parametrize('case,call,error,message', CASES, ids=[c[0] for c in CASES])
def test_misuse_gives_a_clear_error(case, call, error, message):
    with pytest.raises(error, match=message):
        call()


def checkpoint_with_wrong_keys(tmp_path):
    state = infvit().state_dict()
    state.pop('cls_token')
    state['layers.0.extra.weight'] = torch.zeros(1)
    path = tmp_path / 'wrong_keys.pth'
    torch.save(dict(state_dict=state), path)
    return str(path)


def test_checkpoint_with_missing_and_unexpected_keys_is_reported(tmp_path):
    path = checkpoint_with_wrong_keys(tmp_path)
    with pytest.raises(RuntimeError) as info:
        load_checkpoint(infvit(), path, strict=True)
    assert 'missing keys in source state_dict: cls_token' in str(info.value)
    assert 'unexpected key in source state_dict: layers.0.extra.weight' in str(info.value)

    # Non-strict loading (as init_cfg=dict(type='Pretrained') does) loads the rest and
    # reports both lists in the log.
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        model = InfViT(arch='infvit-test',
                       init_cfg=dict(type='Pretrained', checkpoint=path))
        model.init_weights()
    finally:
        logger.removeHandler(handler)
    report = '\n'.join(r.getMessage() for r in records)
    assert 'missing keys in source state_dict: cls_token' in report
    assert 'unexpected key in source state_dict: layers.0.extra.weight' in report
