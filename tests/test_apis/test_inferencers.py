"""The toolboxes' own inferencers (mmpretrain ImageClassificationInferencer, mmdet
DetInferencer, mmseg MMSegInferencer) run mmlinear's demo configs and checkpoints: the
mmlinear types resolve under their scopes, the weights load through mmlinear's weights-only
loader with the dataset meta, and the drawn results are written."""
import os.path as osp

import mmcv
import numpy as np
import torch
from mmengine.config import Config
from mmengine.registry import DefaultScope

from mmlinear.models import InfViT


def assert_checkpoint_loaded(model, checkpoint):
    """The model is mmlinear's InfViT-backed one and holds exactly the checkpoint's weights."""
    assert isinstance(model.backbone, InfViT)
    state = torch.load(checkpoint, map_location='cpu', weights_only=True)['state_dict']
    loaded = model.state_dict()
    assert loaded.keys() == state.keys()
    for key, value in state.items():
        assert torch.equal(loaded[key].cpu(), value), key


def test_image_classification_inferencer(demo_checkpoints, tmp_path):
    from mmpretrain.apis import ImageClassificationInferencer
    demo = demo_checkpoints['cls']
    # mmpretrain's inferencer builds its pipeline in the current default scope (mmdet's and
    # mmseg's inferencers set theirs, which another test may have left current).
    with DefaultScope.overwrite_default_scope('mmpretrain'):
        inferencer = ImageClassificationInferencer(
            demo.config, pretrained=demo.checkpoint, device='cpu')
        [result] = inferencer(demo.image, show_dir=str(tmp_path / 'vis'))
    assert_checkpoint_loaded(inferencer.model, demo.checkpoint)
    assert tuple(inferencer.classes) == demo.classes == ('circle', 'square', 'triangle')
    scores = np.asarray(result['pred_scores'])
    assert scores.shape == (3, ) and abs(scores.sum() - 1) < 1e-5
    assert result['pred_label'] == int(scores.argmax())
    assert result['pred_class'] == demo.classes[result['pred_label']]
    drawn = mmcv.imread(str(tmp_path / 'vis' / osp.basename(demo.image)))
    assert drawn.shape == mmcv.imread(demo.image).shape == (64, 64, 3)


def test_det_inferencer(demo_checkpoints, tmp_path):
    from mmdet.apis import DetInferencer
    demo = demo_checkpoints['det']
    cfg = Config.fromfile(demo.config)
    cfg.model.test_cfg.rcnn.score_thr = 0.0  # a random detector: keep its boxes to check
    inferencer = DetInferencer(cfg, weights=demo.checkpoint, device='cpu', show_progress=False)
    assert_checkpoint_loaded(inferencer.model, demo.checkpoint)
    assert inferencer.model.dataset_meta['classes'] == demo.classes
    out = inferencer(demo.image, out_dir=str(tmp_path), no_save_pred=False)
    [pred] = out['predictions']
    labels, scores, bboxes = (np.asarray(pred[k]) for k in ('labels', 'scores', 'bboxes'))
    num = len(labels)
    assert 1 <= num <= cfg.model.test_cfg.rcnn.max_per_img
    assert set(labels.tolist()) <= set(range(len(demo.classes)))
    assert scores.shape == (num, ) and ((scores >= 0) & (scores <= 1)).all()
    assert bboxes.shape == (num, 4)
    assert (bboxes[:, :2] <= bboxes[:, 2:]).all() and bboxes.min() >= 0 and bboxes.max() <= 128
    assert len(pred['masks']) == num  # RLE-encoded instance masks
    name = osp.basename(demo.image)
    assert mmcv.imread(str(tmp_path / 'vis' / name)).shape == (128, 128, 3)
    assert osp.getsize(tmp_path / 'preds' / (osp.splitext(name)[0] + '.json')) > 0


def test_mmseg_inferencer(demo_checkpoints, tmp_path):
    from mmseg.apis import MMSegInferencer
    demo = demo_checkpoints['seg']
    inferencer = MMSegInferencer(demo.config, weights=demo.checkpoint, device='cpu')
    assert_checkpoint_loaded(inferencer.model, demo.checkpoint)
    assert tuple(inferencer.model.dataset_meta['classes']) == demo.classes
    out = inferencer(demo.image, out_dir=str(tmp_path))
    sem_seg = np.asarray(out['predictions'])
    assert sem_seg.shape == (128, 128)
    assert set(np.unique(sem_seg).tolist()) <= set(range(len(demo.classes)))
    drawn = mmcv.imread(str(tmp_path / 'vis' / osp.basename(demo.image)))
    assert drawn.shape == (128, 128, 3)
    # The drawing is the input blended with the class palette, not the input alone.
    assert not np.array_equal(drawn, mmcv.imread(demo.image))
