"""What the tests of streamed segmentation and detection share: the demo Mask R-CNNs with
random weights, images with structure, and the comparison of detections with mmdet's."""
import os.path as osp
from typing import Sequence, Union

import numpy as np
import torch
from conftest import REPO_ROOT
from mmengine.config import Config
from pycocotools import mask as mask_util
from random_demo_models import random_demo_model
from torch import nn

DEMO_MASK_RCNNS = {
    'infvit': 'mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py',
    'weightformer': 'mask-rcnn_weightformer-demo_simple-pyramid_shapes-coco.py',
    'veca': 'mask-rcnn_veca-demo_simple-pyramid_shapes-coco.py',
}


def demo_mask_rcnn(name: str, **cfg_options) -> nn.Module:
    """The demo Mask R-CNN of backbone ``name`` with its constructors' random weights
    (nothing loaded), ``cfg_options`` merged into its config."""
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', 'demo', DEMO_MASK_RCNNS[name]))
    cfg.merge_from_dict(cfg_options)
    return random_demo_model(cfg)


def scene(height: int, width: int, seed: int = 0) -> np.ndarray:
    """An (H, W, 3) uint8 image with structure (blocks of colour of 16 x 16 pixels), so that
    a random model's scores and classes do not all tie."""
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, size=(-(-height // 16), -(-width // 16), 3), dtype=np.uint8)
    return np.ascontiguousarray(np.repeat(np.repeat(blocks, 16, 0), 16, 1)[:height, :width])


def mask_maps(masks: Union[Sequence[dict], torch.Tensor]) -> np.ndarray:
    """(N, H, W) bool maps of masks given as N COCO RLEs or as an (N, H, W) bool tensor."""
    if isinstance(masks, torch.Tensor):
        return masks.cpu().numpy()
    return np.stack([mask_util.decode(rle) for rle in masks]).astype(bool)


def assert_same_detections(got, expected, size: int) -> None:
    """Streamed detections against mmdet's (the masks of either as COCO RLE or (N, H, W)
    bool, as :func:`mask_maps` takes them): more than five, the same labels in the same order,
    scores and boxes to 1e-4 (boxes of an image of ``size`` pixels), masks to 1e-4 of their
    pixels.

    Args:
        got (InstanceData | dict): The streamed ``pred_instances``.
        expected (InstanceData | dict): mmdet's.
        size (int): The image's larger side.
    """
    assert len(expected['labels']) > 5 and torch.equal(got['labels'], expected['labels'])
    torch.testing.assert_close(got['scores'], expected['scores'], rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(got['bboxes'], expected['bboxes'], rtol=1e-4, atol=1e-4 * size)
    masks, expected_masks = mask_maps(got['masks']), mask_maps(expected['masks'])
    assert masks.shape == expected_masks.shape and expected_masks.any()
    assert (masks != expected_masks).mean() < 1e-4
