"""mmlinear.StreamedTwoStageDetector: its test_cfg ``streamed`` against mmdet's own ``predict``
of the same Mask R-CNN on the same padded batch, with and without rescaling, masks as bool maps
and as RLE, and its checks."""
import pytest
import torch
from mmcv.transforms import Compose
from mmengine.dataset import pseudo_collate
from mmengine.structures import InstanceData
from streamed_checks import (DEMO_MASK_RCNNS, assert_same_detections, demo_mask_rcnn, mask_maps,
                             scene)

#: Backbone bands of 3 patch rows and head bands of 5 rows: every level is cut.
STREAMED = dict(band_rows=3, head_rows=5)


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
    or in the resized ones'; the masks are mmdet's pixel for pixel, as (N, H, W) bool maps by
    default and as COCO RLE with mask_format='rle'."""
    model = streamed_detector(name)
    images = [scene(96, 128, seed=1), scene(150, 70, seed=2)]
    expected = predict(model, images, rescale)
    bitmaps = predict(model, images, rescale, streamed=STREAMED)
    rles = predict(model, images, rescale, streamed=dict(STREAMED, mask_format='rle'))
    for bitmap, rle, expected_sample, image in zip(bitmaps, rles, expected, images):
        assert bitmap.img_shape == rle.img_shape == expected_sample.img_shape
        shape = image.shape[:2] if rescale else bitmap.img_shape
        expected_masks = expected_sample.pred_instances.masks
        masks = bitmap.pred_instances.masks
        assert masks.dtype == torch.bool and masks.shape[1:] == shape
        # The compiled CPU kernels round the banded features differently from the whole
        # ones, so a pixel whose probability sits on mask_thr_binary may flip: at most 0.1 %.
        assert (masks != expected_masks).float().mean() <= 1e-3
        assert all(item['size'] == list(shape) for item in rle.pred_instances.masks)
        decoded = torch.from_numpy(mask_maps(rle.pred_instances.masks))
        assert torch.equal(decoded, masks)
        for got in (bitmap, rle):
            assert_same_detections(got.pred_instances, expected_sample.pred_instances, max(shape))
    assert bitmaps[1].scale_factor != (1.0, 1.0)


def test_no_detection_gives_empty_masks_of_the_image():
    """With every box scored out, mmdet's empty results: (0, H, W) bool maps or no RLE."""
    model = streamed_detector('infvit')
    model.test_cfg.rcnn.score_thr = 1.1
    images = [scene(96, 128)]
    expected, = predict(model, images, True)
    bitmap, = predict(model, images, True, streamed=STREAMED)
    rle, = predict(model, images, True, streamed=dict(STREAMED, mask_format='rle'))
    masks = bitmap.pred_instances.masks
    assert masks.shape == expected.pred_instances.masks.shape == (0, 96, 128)
    assert masks.dtype == expected.pred_instances.masks.dtype == torch.bool
    assert len(rle.pred_instances) == 0 and rle.pred_instances.masks == []


def test_the_retired_chunk_rows_key_keeps_working_with_a_warning():
    """test_cfg.streamed.chunk_rows is band_rows for one release, as in segmentation's
    test_cfg (docs/design.md, section 3)."""
    model = streamed_detector('infvit')
    images = [scene(96, 128)]
    expected, = predict(model, images, True, streamed=STREAMED)
    with pytest.warns(
            FutureWarning,
            match="test_cfg.streamed: 'chunk_rows' is deprecated .* use 'band_rows'"):
        old, = predict(model, images, True, streamed=dict(chunk_rows=3, head_rows=5))
    assert torch.equal(old.pred_instances.bboxes, expected.pred_instances.bboxes)
    assert torch.equal(old.pred_instances.scores, expected.pred_instances.scores)
    assert torch.equal(old.pred_instances.masks, expected.pred_instances.masks)
    with pytest.raises(TypeError, match="got both 'chunk_rows' and its new spelling 'band_rows'"):
        predict(model, images, True, streamed=dict(chunk_rows=3, band_rows=3))


def test_streamed_options_are_checked_before_any_work():
    model = streamed_detector('infvit')
    calls = []
    model.backbone.register_forward_pre_hook(lambda *args: calls.append(args))
    images = [scene(64, 96)]
    with pytest.raises(
            ValueError,
            match=r"unknown keys \['band'\] in test_cfg.streamed; allowed: band_rows, "
            'head_rows, mem_limit_gb, buffer, buffer_dir, progress, mask_format$'):
        predict(model, images, True, streamed=dict(band=3))
    with pytest.raises(
            ValueError,
            match="unknown test_cfg.streamed.mask_format 'png'; allowed: 'rle', 'bitmap'"):
        predict(model, images, True, streamed=dict(mask_format='png'))
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
