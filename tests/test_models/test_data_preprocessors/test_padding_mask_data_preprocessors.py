"""The mmdet / mmseg data preprocessors of our configs hand each batch's padding to the backbone,
so a detector's or segmentor's backbone features of an image do not depend on its batch."""
import os.path as osp

import pytest
import torch
from conftest import REPO_ROOT
from mmengine.config import Config, ConfigDict
from mmengine.registry import init_default_scope

DEMO = osp.join(REPO_ROOT, 'configs', 'demo')
SMALL, LARGE = (64, 96), (100, 120)
CASES = {
    'det': ('mmdet', 'mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py'),
    'seg': ('mmseg', 'upernet_infvit-demo-linear_shapes-ade.py'),
}


def build_model(task):
    scope, name = CASES[task]
    cfg = Config.fromfile(osp.join(DEMO, name))
    init_default_scope(scope)
    registry = __import__(f'{scope}.registry', fromlist=['MODELS']).MODELS
    model = registry.build(cfg.model).eval()
    model.cfg = cfg
    return model


def data_sample(task, shape):
    if task == 'det':
        from mmdet.structures import DetDataSample
        sample = DetDataSample()
    else:
        from mmengine.structures import PixelData
        from mmseg.structures import SegDataSample
        sample = SegDataSample()
        sample.gt_sem_seg = PixelData(data=torch.zeros(1, *shape, dtype=torch.long))
    sample.set_metainfo(dict(img_shape=shape, ori_shape=shape))
    return sample


def images(*shapes):
    generator = torch.Generator().manual_seed(0)
    return [torch.randint(0, 256, (3, *s), generator=generator, dtype=torch.uint8) for s in shapes]


def preprocess(model, task, *shapes):
    """The data preprocessor's batch of ``images(*shapes)`` with their data samples."""
    return model.data_preprocessor(
        dict(inputs=images(*shapes), data_samples=[data_sample(task, s) for s in shapes]),
        training=(task == 'seg'))  # mmseg pads to the crop size only when training


@pytest.mark.parametrize('task', sorted(CASES))
def test_padding_mask_reaches_the_backbone(task):
    torch.manual_seed(0)
    model = build_model(task)
    assert type(model.data_preprocessor).__name__ == ('PaddingMask' + task.capitalize() +
                                                      'DataPreprocessor')
    inputs = preprocess(model, task, SMALL, LARGE)['inputs']
    H, W = inputs.shape[-2:]
    # mmdet pads to a multiple of 32 (100 x 120 -> 128 x 128); mmseg to the 128 x 128 crop.
    assert (H, W) == (128, 128)
    expected = torch.ones(2, H, W, dtype=torch.bool)
    expected[0, :64, :96] = False
    expected[1, :100, :120] = False
    assert torch.equal(inputs.padding_mask, expected)
    if task == 'seg':  # mmseg's own preprocessor, from the config's arguments: the same batch
        from mmseg.models import SegDataPreProcessor
        args = dict(model.cfg.model.data_preprocessor)
        assert args.pop('type') == 'mmlinear.PaddingMaskSegDataPreprocessor'
        data = dict(
            inputs=images(SMALL, LARGE),
            data_samples=[data_sample(task, s) for s in (SMALL, LARGE)])
        assert torch.equal(inputs, SegDataPreProcessor(**args)(data, training=True)['inputs'])

    alone = preprocess(model, task, SMALL)  # the same first image
    alone_inputs = alone['inputs'][..., :64, :96]  # mmseg pads the image alone to the crop too
    patch = model.backbone.patch_size
    with torch.no_grad():
        in_batch = model.backbone(inputs)[-1][0, :, :64 // patch, :96 // patch]
        by_itself = model.backbone(alone_inputs)[-1][0]
    torch.testing.assert_close(in_batch, by_itself, atol=2e-5, rtol=1e-4)


def test_batches_without_samples_pass_through():
    model = build_model('det')
    data = model.data_preprocessor(dict(inputs=images((64, 64))), training=False)
    assert not hasattr(data['inputs'], 'padding_mask')


def test_a_detector_whose_batch_is_replaced_before_the_backbone_refuses_it():
    model = build_model('det')
    data = preprocess(model, 'det', SMALL, LARGE)
    channels_last = data['inputs'].contiguous(memory_format=torch.channels_last)
    with torch.no_grad(), pytest.raises(RuntimeError, match='without it: something between'):
        model.extract_feat(channels_last)


def test_slide_inference_over_a_padded_batch_refuses_it():
    """mmseg's 'slide' mode crops the batch, and the crops carry no mask."""
    model = build_model('seg')
    data = preprocess(model, 'seg', SMALL, LARGE)
    model.test_cfg = ConfigDict(mode='slide', crop_size=(64, 64), stride=(64, 64))
    with torch.no_grad(), pytest.raises(RuntimeError, match="'slide' test mode crops"):
        model.predict(data['inputs'], data['data_samples'])
