"""mmlinear.apis.image_inference: the task a config's model has, and one image through each
task's inferencer into plain arrays and a drawn picture."""
import os.path as osp

import numpy as np
import pytest
from conftest import REPO_ROOT
from mmengine.config import Config

from mmlinear.apis import detect_task, infer_image

DEMO = osp.join(REPO_ROOT, 'configs', 'demo')


@pytest.mark.parametrize('config,task', [
    ('infvit-demo-linear_shapes-cls.py', 'classification'),
    ('veca-demo-elastic_shapes-cls.py', 'classification'),
    ('mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py', 'detection'),
    ('mask-rcnn_weightformer-demo_simple-pyramid_shapes-coco.py', 'detection'),
    ('upernet_infvit-demo-linear_shapes-ade.py', 'segmentation'),
    ('upernet_veca-demo_shapes-ade.py', 'segmentation'),
])
def test_task_follows_the_model(config, task):
    assert detect_task(Config.fromfile(osp.join(DEMO, config))).name == task


def test_task_does_not_need_a_default_scope():
    cfg = Config(dict(model=dict(type='EncoderDecoder')))
    assert detect_task(cfg).scope == 'mmseg'
    cfg = Config(dict(model=dict(type='mmdet.RetinaNet')))
    assert detect_task(cfg).name == 'detection'


@pytest.mark.parametrize('model', [dict(type='mmlinear.VECADistiller'), dict(type='NoSuchModel')])
def test_models_of_other_kinds_are_refused_with_the_supported_ones(model):
    cfg = Config(dict(model=model, default_scope='mmpretrain'))
    with pytest.raises(ValueError) as error:
        detect_task(cfg)
    message = str(error.value)
    assert f"the config's model '{model['type']}' is not an image classifier" in message
    for kind in ('mmpretrain classifiers', 'BaseClassifier', 'mmdet detectors', 'BaseDetector',
                 'mmseg segmentors', 'BaseSegmentor'):
        assert kind in message
    with pytest.raises(ValueError, match='the config has no model'):
        detect_task(Config(dict(default_scope='mmdet')))


def test_missing_files_are_named(demo_checkpoints, tmp_path):
    demo = demo_checkpoints['cls']
    with pytest.raises(FileNotFoundError, match='image not found: .*nothing.png'):
        infer_image(str(tmp_path / 'nothing.png'), demo.config, demo.checkpoint)
    with pytest.raises(FileNotFoundError, match='checkpoint not found: .*nothing.pth'):
        infer_image(demo.image, demo.config, str(tmp_path / 'nothing.pth'))


def test_classification_gives_scores_over_the_checkpoint_classes(demo_checkpoints):
    demo = demo_checkpoints['cls']
    result = infer_image(demo.image, demo.config, demo.checkpoint)
    assert result.task.name == 'classification' and result.model_type == 'ImageClassifier'
    assert tuple(result.classes) == demo.classes
    scores = result.prediction['scores']
    assert scores.shape == (3, ) and abs(scores.sum() - 1) < 1e-5
    assert result.prediction['label'] == scores.argmax()
    assert result.visualization.shape == (64, 64, 3) and result.visualization.dtype == np.uint8
    assert f'top-1 {demo.classes[scores.argmax()]}' in result.summary


def test_detection_keeps_instances_above_the_score_threshold(demo_checkpoints):
    demo = demo_checkpoints['det']
    options = {'model.test_cfg.rcnn.score_thr': 0.0}
    every = infer_image(
        demo.image, demo.config, demo.checkpoint, score_thr=0.0, cfg_options=options)
    labels, scores = every.prediction['labels'], every.prediction['scores']
    num = len(labels)
    assert num >= 2 and every.prediction['bboxes'].shape == (num, 4)
    assert set(labels.tolist()) <= {0, 1, 2}
    masks = every.prediction['masks']
    assert masks.shape == (num, 128, 128) and masks.dtype == bool
    assert every.visualization.shape == (128, 128, 3)
    assert every.summary.startswith(f'detection (mmdet MaskRCNN): {num} instances')
    # A threshold between the scores keeps exactly those above it.
    threshold = float(np.median(scores))
    kept = infer_image(
        demo.image, demo.config, demo.checkpoint, score_thr=threshold, cfg_options=options)
    np.testing.assert_array_equal(kept.prediction['scores'], scores[scores >= threshold])
    assert kept.prediction['masks'].shape[0] == len(kept.prediction['scores'])


def test_segmentation_gives_a_label_map_of_the_image(demo_checkpoints):
    demo = demo_checkpoints['seg']
    result = infer_image(demo.image, demo.config, demo.checkpoint)
    sem_seg = result.prediction['sem_seg']
    assert sem_seg.shape == (128, 128)
    assert set(np.unique(sem_seg).tolist()) <= set(range(len(demo.classes)))
    assert result.visualization.shape == (128, 128, 3)
    assert result.summary.startswith('segmentation (mmseg EncoderDecoder): 128x128 label map')
