"""The demo's workflow: the detection and segmentation demos start from the backbone of the
classification demo, through ``init_cfg=dict(type='Pretrained', prefix='backbone.')``."""
import os.path as osp

import pytest
import torch
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope

import mmlinear  # noqa: F401
import mmlinear.cli.demo as demo_plan
from mmlinear.models.utils import resize_pos_embed

FINE_TUNING = {
    'mmdet': 'configs/demo/mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py',
    'mmseg': 'configs/demo/upernet_infvit-demo-linear_shapes-ade.py',
}


def load(config: str) -> Config:
    return Config.fromfile(osp.join(REPO_ROOT, config))


def build(cfg: Config):
    init_default_scope(cfg.default_scope)
    return MODELS.build(cfg.model)


@pytest.mark.parametrize('scope', sorted(FINE_TUNING))
def test_default_checkpoint_is_where_the_demo_writes_the_classifier(scope):
    classifier = load(demo_plan.CLASSIFIER.config)
    expected = osp.join(
        demo_plan.work_dir_of(demo_plan.CLASSIFIER, 'work_dirs/demo'),
        f'epoch_{classifier.train_cfg.max_epochs}.pth')
    init_cfg = load(FINE_TUNING[scope]).model.backbone.init_cfg
    assert dict(init_cfg) == dict(type='Pretrained', checkpoint=expected, prefix='backbone.')


def test_demo_hands_the_classifier_checkpoint_to_the_fine_tuning_runs():
    classifier, detector, segmenter = demo_plan.DEMOS
    assert classifier is demo_plan.CLASSIFIER and not classifier.fine_tunes_classifier
    assert [detector.config, segmenter.config] == [FINE_TUNING['mmdet'], FINE_TUNING['mmseg']]
    assert '--cfg-options' not in demo_plan.train_command(classifier, 'w', None)
    for demo in (detector, segmenter):
        cmd = demo_plan.train_command(demo, 'w', 'w/cls/epoch_3.pth')
        assert cmd[-2:] == ['--cfg-options', 'model.backbone.init_cfg.checkpoint=w/cls/epoch_3.pth']
        with pytest.raises(ValueError, match='train it first'):
            demo_plan.train_command(demo, 'w', None)


@pytest.mark.parametrize('scope', sorted(FINE_TUNING))
def test_fine_tuning_backbone_starts_from_the_classifier_weights(scope, tmp_path):
    torch.manual_seed(0)
    classifier = build(load(demo_plan.CLASSIFIER.config))
    path = str(tmp_path / 'classifier.pth')
    torch.save(dict(state_dict=classifier.state_dict(), meta=dict()), path)

    cfg = load(FINE_TUNING[scope])
    cfg.model.backbone.init_cfg.checkpoint = path
    model = build(cfg)
    model.init_weights()
    source, loaded = classifier.backbone.state_dict(), model.backbone.state_dict()
    assert loaded.keys() == source.keys()
    for key, value in loaded.items():
        expected = source[key]
        if key == 'pos_embed':  # the classifier's 8 x 8 table, resized to the larger images
            assert value.shape != expected.shape
            expected = resize_pos_embed(expected, classifier.backbone.patch_resolution,
                                        model.backbone.patch_resolution, 'bicubic', 1)
        torch.testing.assert_close(value, expected, msg=key)
