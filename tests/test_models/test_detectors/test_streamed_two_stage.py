"""mmlinear.StreamedTwoStageDetector: its test_cfg ``streamed`` against mmdet's own ``predict``
of the same Mask R-CNN on the same padded batch, with and without rescaling, and its checks."""
import pytest
import torch
from mmcv.transforms import Compose
from mmengine.dataset import pseudo_collate
from mmengine.structures import InstanceData
from streamed_checks import DEMO_MASK_RCNNS, assert_same_detections, demo_mask_rcnn, scene

#: Backbone bands of 3 patch rows and head bands of 5 rows: every level is cut.
STREAMED = dict(chunk_rows=3, head_rows=5)


def streamed_detector(name):
    """A demo Mask R-CNN as mmlinear.StreamedTwoStageDetector (random weights)."""
    return demo_mask_rcnn(name, **{'model.type': 'mmlinear.StreamedTwoStageDetector'})


def padded_batch(model, images):
    """``images`` through the config's test pipeline (Resize to 128, keep ratio) and the data
    preprocessor (padding to a multiple of 32, the padding mask attached), as one batch."""
    steps = list(model.cfg.test_dataloader.dataset.pipeline)
    steps[0] = dict(type='mmdet.LoadImageFromNDArray')
    pipeline = Compose(steps)
    data = [pipeline(dict(img=image, img_id=index)) for index, image in enumerate(images)]
    return model.data_preprocessor(pseudo_collate(data), False)


def predict(model, images, rescale, streamed=None):
    model.test_cfg.streamed = streamed
    batch = padded_batch(model, images)
    with torch.no_grad():
        return model.predict(batch['inputs'], batch['data_samples'], rescale=rescale)


@pytest.mark.parametrize('rescale', [True, False])
@pytest.mark.parametrize('name', sorted(DEMO_MASK_RCNNS))
def test_streamed_equals_mmdet_predict(name, rescale):
    """A batch of two: 96 x 128, which the Resize keeps, and 150 x 70, resized to 128 x 60
    (scale factors 0.857 and 0.853); the batch is padded to 128 x 128, so each image is
    padded on another side. Boxes and masks in the original images' coordinates (rescale)
    or in the resized ones'."""
    model = streamed_detector(name)
    images = [scene(96, 128, seed=1), scene(150, 70, seed=2)]
    expected = predict(model, images, rescale)
    got = predict(model, images, rescale, streamed=STREAMED)
    for got_sample, expected_sample, image in zip(got, expected, images):
        assert got_sample.img_shape == expected_sample.img_shape
        shape = image.shape[:2] if rescale else got_sample.img_shape
        assert all(rle['size'] == list(shape) for rle in got_sample.pred_instances.masks)
        assert_same_detections(got_sample.pred_instances, expected_sample.pred_instances,
                               max(shape))
    assert got[1].scale_factor != (1.0, 1.0)


def test_streamed_options_are_checked_before_any_work():
    model = streamed_detector('infvit')
    calls = []
    model.backbone.register_forward_pre_hook(lambda *args: calls.append(args))
    images = [scene(64, 96)]
    with pytest.raises(
            ValueError,
            match=r"unknown keys \['band'\] in test_cfg.streamed; allowed: chunk_rows, "
            'head_rows, mem_limit_gb, buffer, buffer_dir, progress'):
        predict(model, images, True, streamed=dict(band=3))
    with pytest.raises(ValueError, match=r'streamed detection needs \d+\.\d+ GB .*limit 1e-06 GB'):
        predict(model, images, True, streamed=dict(mem_limit_gb=1e-6))
    with pytest.raises(ValueError, match="unknown buffer 'swap'"):
        predict(model, images, True, streamed=dict(buffer='swap'))
    batch = padded_batch(model, images)
    batch['data_samples'][0].proposals = InstanceData(bboxes=torch.zeros(1, 4))
    with pytest.raises(ValueError, match='precomputed ones; remove streamed'):
        model.predict(batch['inputs'], batch['data_samples'])
    model.train()
    with pytest.raises(RuntimeError, match='streamed detection is inference only'):
        predict(model, images, True, streamed={})
    assert not calls
