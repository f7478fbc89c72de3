"""segment_slide: mmseg's slide mode on an image taken as segment_large_image takes it."""
import os.path as osp

import numpy as np
import pytest
import torch
from conftest import REPO_ROOT
from random_demo_models import random_demo_model

from mmlinear.apis import segment_large_image
from mmlinear.apis.channel_view import ChannelView
from mmlinear.cli.slide_segmentation import segment_slide

CONFIG = osp.join(REPO_ROOT, 'configs', 'demo', 'upernet_infvit-demo-linear_shapes-ade.py')


@pytest.fixture(scope='module')
def model():
    """The demo UperNet with its constructors' random weights."""
    return random_demo_model(CONFIG)


def uint16_scene(size=128, seed=0):
    """(size, size, 4) uint16 blocks of 16 px, as a 4-channel 16-bit raster holds them."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 65536, (size // 16, size // 16, 4), dtype=np.uint16)
    return np.repeat(np.repeat(blocks, 16, 0), 16, 1)


def test_one_crop_covering_the_image_equals_the_whole_image(model):
    view = ChannelView(uint16_scene(), (2, 1, 0), 255 / 65535)
    whole_map, whole = segment_large_image(model, view, return_logits=True)
    slide_map, slide = segment_slide(model, view, (128, 128), (85, 85))
    assert slide.shape == (4, 128, 128) and slide_map.shape == (128, 128)
    scale = whole.abs().max().item()
    torch.testing.assert_close(slide, whole, rtol=0, atol=1e-4 * scale)
    top2 = whole.topk(2, dim=0).values
    differ = slide_map != whole_map.long()
    assert ((top2[0] - top2[1])[differ] < 1e-4 * scale).all()
    # With overlapping crops the logits are averages of crops that each see less.
    _, overlapped = segment_slide(model, view, (96, 96), (32, 32))
    assert (overlapped - whole).abs().max() > 1e-3 * scale
    assert model.test_cfg.get('mode', 'whole') == 'whole'  # the model's own is restored


@pytest.mark.parametrize('crop, stride', [((0, 128), (85, 85)), ((128, 128), (85, )),
                                          ((128, 128), (8.5, 8))])
def test_crops_and_strides_must_be_two_positive_integers(model, crop, stride):
    with pytest.raises(ValueError, match=r'must be two positive integers \(height, width\)'):
        segment_slide(model, np.zeros((64, 64, 3), np.float32), crop, stride)
