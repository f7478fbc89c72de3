"""detect_large_image against mmdet's own whole-image inference (``inference_detector``) on
the demo Mask R-CNNs, with bands that really split the image, and its refusals."""
import copy
import os.path as osp
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest
import torch
from mmdet.apis import inference_detector
from mmengine.config import Config
from mmengine.hub import get_config
from random_demo_models import random_demo_model
from streamed_checks import DEMO_MASK_RCNNS, assert_same_detections, demo_mask_rcnn, scene

from mmlinear.apis import detect_large_image

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))


def mmdet_whole(model, image):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return inference_detector(model, image).pred_instances


@pytest.mark.parametrize('name', sorted(DEMO_MASK_RCNNS))
def test_equals_mmdet_whole_inference(name):
    """96 x 128 (a 12 x 16 grid of 8 x 8 patches; the test pipeline's Resize to 128 and the
    padding to 32 leave it as it is): backbone bands of 3 patch rows and head bands of 5 rows,
    so that every level is cut and the RPN keeps its best anchors band by band."""
    model = demo_mask_rcnn(name)
    image = scene(96, 128)
    expected = mmdet_whole(model, image)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        result = detect_large_image(model, image, band_rows=3, head_rows=5)
    assert result.metainfo['ori_shape'] == (96, 128)
    assert_same_detections(result.pred_instances, expected, 128)


def test_score_threshold_and_disk_buffers_keep_the_detections():
    model = demo_mask_rcnn('infvit')
    image = scene(64, 96, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        memory = detect_large_image(model, image, band_rows=2).pred_instances
        disk = detect_large_image(model, image, band_rows=2, buffer='disk').pred_instances
        threshold = float(memory.scores[len(memory) // 2])
        # The same bands as the run the threshold is read from: a score equal to it must come
        # out bit for bit the same (other bands round the sums in another order).
        kept = detect_large_image(model, image, band_rows=2, score_thr=threshold).pred_instances
    assert torch.equal(disk.bboxes, memory.bboxes) and disk.masks == memory.masks
    with pytest.warns(FutureWarning, match="'chunk_rows' is deprecated .* use 'band_rows'"):
        old = detect_large_image(model, image, chunk_rows=2).pred_instances
    assert torch.equal(old.bboxes, memory.bboxes) and torch.equal(old.scores, memory.scores)
    assert len(kept) == int((memory.scores >= threshold).sum()) < len(memory)
    assert (kept.scores >= threshold).all()


def test_memory_limit_picks_bands_or_refuses_before_any_work():
    model = demo_mask_rcnn('infvit')
    image = scene(64, 96, seed=5)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        limited = detect_large_image(model, image, mem_limit_gb=1.0).pred_instances
        free = detect_large_image(model, image).pred_instances
    assert len(free) and torch.equal(limited.bboxes, free.bboxes)
    calls = []
    model.backbone.register_forward_pre_hook(lambda *args: calls.append(args))
    with pytest.raises(ValueError, match=r'streamed detection needs \d+\.\d+ GB .*limit 1e-06 GB'):
        detect_large_image(model, scene(64, 64), mem_limit_gb=1e-6)
    assert not calls


def test_bad_inputs_name_the_problem():
    model = demo_mask_rcnn('infvit')
    with pytest.raises(ValueError, match=r'at least one patch \(8x8\) large, got 4x64'):
        detect_large_image(model, np.zeros((4, 64, 3), np.uint8))
    with pytest.raises(ValueError, match=r'takes images of 3 channels, the image has 4'):
        detect_large_image(model, np.zeros((64, 64, 4), np.uint16))
    with pytest.raises(ValueError, match=r'score_thr must be a number in \[0, 1\], got 2'):
        detect_large_image(model, scene(64, 64), score_thr=2)
    with pytest.raises(ValueError, match="unknown buffer .swap.; allowed: .memory., .disk."):
        detect_large_image(model, scene(64, 64), buffer='swap')
    with pytest.raises(ValueError, match='head_rows must be an integer >= 1'):
        detect_large_image(model, scene(64, 64), head_rows=0)


def test_unsupported_detectors_are_refused():
    demo = Config.fromfile(osp.join(REPO_ROOT, 'configs', 'demo', DEMO_MASK_RCNNS['infvit']))
    # A one-stage detector (RetinaNet) on the same backbone and neck.
    retina = get_config('mmdet::retinanet/retinanet_r50_fpn_1x_coco.py')
    retina.model.backbone = copy.deepcopy(demo.model.backbone)
    retina.model.neck = copy.deepcopy(demo.model.neck)
    retina.model.bbox_head.update(in_channels=64, feat_channels=64)
    retina.model.data_preprocessor = copy.deepcopy(demo.model.data_preprocessor)
    with pytest.raises(
            TypeError,
            match='two-stage detector with an RPNHead and a '
            r'StandardRoIHead .*got RetinaNet'):
        detect_large_image(random_demo_model(retina), scene(64, 64))
    # Subclasses of the RoI head or the mask head predict otherwise (PointRend, ...).
    for part in ('roi_head', 'roi_head.mask_head'):
        model = demo_mask_rcnn('infvit')
        module = model.get_submodule(part)
        module.__class__ = type('Refined', (type(module), ), {})
        with pytest.raises(TypeError, match='streamed detection .*got .*Refined'):
            detect_large_image(model, scene(64, 64))
    # Mask R-CNN on a ResNet (mmdet's own config, no pretrained weights).
    resnet = get_config('mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py')
    resnet.model.backbone.depth = 18
    resnet.model.neck.in_channels = [64, 128, 256, 512]
    with pytest.raises(
            TypeError, match=r"an mmlinear backbone with out_type='featmap' .*got "
            'ResNet'):
        detect_large_image(random_demo_model(resnet), scene(64, 64))


#: Detects on a small image with the demo Mask R-CNN in a process where mmseg cannot be
#: imported (a None in sys.modules makes ``import`` raise and ``find_spec`` answer None).
WITHOUT_MMSEG = textwrap.dedent(f'''
    import sys
    import warnings

    sys.modules['mmseg'] = None

    import numpy as np
    from mmdet.apis import init_detector
    from mmengine.config import Config

    import mmlinear.apis as apis
    assert 'segment_large_image' not in apis.__all__, apis.__all__
    cfg = Config.fromfile({osp.join(REPO_ROOT, 'configs', 'demo', DEMO_MASK_RCNNS['infvit'])!r})
    cfg.model.backbone.init_cfg = None
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = init_detector(cfg, None, device='cpu')
        sample = apis.detect_large_image(model, np.zeros((64, 96, 3), np.uint8))
    print(tuple(sample.metainfo['img_shape']))
''')


def test_detects_without_mmseg():
    """Detection shares its input readers with segmentation, not segmentation's module."""
    result = subprocess.run([sys.executable, '-c', WITHOUT_MMSEG],
                            capture_output=True,
                            text=True,
                            cwd=REPO_ROOT,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    # The last line: a toolbox may print notes of its own on import (onedl-mmdetection does).
    assert result.stdout.strip().splitlines()[-1] == '(64, 96)', result.stdout
