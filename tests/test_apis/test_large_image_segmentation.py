"""segment_large_image against mmseg's own whole-image inference (``inference_model``) on the
demo UperNets, its inputs (arrays, files, memmaps) and its refusals."""
import os.path as osp
import warnings

import mmcv
import numpy as np
import pytest
import torch
from mmengine.config import Config
from mmseg.apis import inference_model, init_model
from streamed_checks import scene

from mmlinear.apis import plan_large_image
from mmlinear.apis.large_image_segmentation import segment_large_image

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DEMO_UPERNETS = {
    'infvit': 'upernet_infvit-demo-linear_shapes-ade.py',
    'weightformer': 'upernet_weightformer-demo_shapes-ade.py',
    'veca': 'upernet_veca-demo_shapes-ade.py',
}


def demo_upernet(name, **cfg_options):
    """A demo UperNet with its constructors' random weights (nothing loaded)."""
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', 'demo', DEMO_UPERNETS[name]))
    cfg.model.backbone.init_cfg = None
    cfg.merge_from_dict(cfg_options)
    torch.manual_seed(0)
    return init_model(cfg, None, device='cpu')


def mmseg_whole(model, image):
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        result = inference_model(model, image)
    return result.seg_logits.data, result.pred_sem_seg.data[0]


def assert_same_segmentation(class_map, logits, expected_logits, expected_map):
    scale = expected_logits.abs().max()
    assert scale > 0.01
    torch.testing.assert_close(logits, expected_logits, rtol=0, atol=1e-4 * scale.item())
    # The same argmax, except where the best two scores tie to rounding.
    top2 = expected_logits.topk(2, dim=0).values
    differ = class_map.long() != expected_map
    assert ((top2[0] - top2[1])[differ] < 1e-4 * scale).all()
    assert differ.float().mean() < 1e-3


@pytest.mark.parametrize('name', sorted(DEMO_UPERNETS))
def test_equals_mmseg_whole_inference(name):
    """200 x 136: partial patches (8 x 8), odd maps at every level (25 x 17 tokens, a 13 x 9
    top map); small bands, so that every level is cut several times."""
    model = demo_upernet(name)
    image = scene(200, 136)
    class_map, logits = segment_large_image(
        model, image, return_logits=True, band_rows=4, head_rows=8)
    assert class_map.shape == (200, 136) and class_map.dtype == torch.uint8
    assert logits.shape == (4, 200, 136) and logits.dtype == torch.float32
    assert_same_segmentation(class_map, logits, *mmseg_whole(model, image))


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(DEMO_UPERNETS))
def test_equals_mmseg_whole_inference_at_2048(name):
    """2048 x 2048 (65,536 patches of 8 x 8), bands picked by the default band size."""
    model = demo_upernet(name)
    image = scene(2048, 2048, seed=7)
    class_map, logits = segment_large_image(model, image, return_logits=True)
    assert_same_segmentation(class_map, logits, *mmseg_whole(model, image))


@pytest.mark.parametrize('name', ['infvit', 'weightformer'])
def test_context_window_equals_mmseg_whole_inference_with_the_window(name):
    """The head's window (``model.decode_head.context_window``, as a config sets it) or
    segment_large_image's own argument: the streamed logits equal mmseg's whole-image
    inference of the head with that window, and differ from the whole map's pooling, which
    the argument 'whole' asks for whatever the head's window."""
    model = demo_upernet(name, **{'model.decode_head.context_window': 4})
    image = scene(200, 136)
    expected = mmseg_whole(model, image)
    class_map, logits = segment_large_image(
        model, image, return_logits=True, band_rows=4, head_rows=8)
    assert_same_segmentation(class_map, logits, *expected)
    # 'whole' overrides the head's window: the pooling of the whole map, as with no window
    _, whole_map_logits = segment_large_image(
        model, image, return_logits=True, head_rows=8, context_window='whole')
    assert (whole_map_logits - logits).abs().max() > 1e-3
    model.decode_head.context_window = None
    _, no_window_logits = segment_large_image(model, image, return_logits=True, head_rows=8)
    assert torch.equal(no_window_logits, whole_map_logits)
    _, argument_logits = segment_large_image(
        model, image, return_logits=True, head_rows=8, context_window=(4, 4))
    torch.testing.assert_close(argument_logits, logits, rtol=0, atol=1e-5)


def test_band_heights_do_not_change_the_result():
    model = demo_upernet('infvit')
    image = scene(96, 80)
    reference = segment_large_image(model, image, band_rows=1000, head_rows=1000)
    for band_rows, head_rows in ((1, 1), (3, 5)):
        assert torch.equal(
            segment_large_image(model, image, band_rows=band_rows, head_rows=head_rows), reference)
    with pytest.warns(FutureWarning, match="'chunk_rows' is deprecated .* use 'band_rows'"):
        assert torch.equal(segment_large_image(model, image, chunk_rows=3, head_rows=5), reference)
    with pytest.warns(FutureWarning, match="'chunk_rows' is deprecated .* use 'band_rows'"):
        assert plan_large_image(
            model, image, chunk_rows=3) == plan_large_image(
                model, image, band_rows=3)


def test_files_memmaps_and_disk_buffers(tmp_path):
    model = demo_upernet('infvit')
    image = scene(64, 88, seed=3)
    expected_logits, expected_map = mmseg_whole(model, image)
    png = str(tmp_path / 'scene.png')
    mmcv.imwrite(image, png)
    npy = str(tmp_path / 'scene.npy')
    np.save(npy, image)
    for source in (png, npy, np.load(npy, mmap_mode='r')):
        class_map, logits = segment_large_image(
            model, source, return_logits=True, buffer='disk', buffer_dir=str(tmp_path), head_rows=4)
        assert_same_segmentation(class_map, logits, expected_logits, expected_map)
    # The disk buffers are anonymous files: nothing is left beside the inputs.
    assert sorted(p.name for p in tmp_path.iterdir()) == ['scene.npy', 'scene.png']


def test_a_resize_in_the_test_pipeline_is_skipped_with_a_warning():
    model = demo_upernet('infvit')
    model.cfg.test_pipeline = [
        dict(type='LoadImageFromFile'),
        dict(type='Resize', scale=(64, 64), keep_ratio=True),
        dict(type='PackSegInputs'),
    ]
    with pytest.warns(UserWarning, match="own resolution: the test pipeline's Resize is skipped"):
        class_map = segment_large_image(model, scene(96, 72))
    assert class_map.shape == (96, 72)


def test_the_streamed_test_mode_equals_mode_whole():
    """mmlinear.StreamedEncoderDecoder with test_cfg mode 'streamed', through mmseg's own
    inference_model, against the same weights in mode 'whole'."""
    model = demo_upernet(
        'weightformer',
        model=dict(
            type='mmlinear.StreamedEncoderDecoder',
            test_cfg=dict(mode='streamed', band_rows=2, head_rows=6)))
    image = scene(104, 120, seed=5)
    streamed_logits, streamed_map = mmseg_whole(model, image)
    model.test_cfg.mode = 'whole'
    assert_same_segmentation(streamed_map, streamed_logits, *mmseg_whole(model, image))
    model.test_cfg = dict(mode='streamed', chunk_rows=2, head_rows=6)
    with pytest.warns(
            FutureWarning,
            match=r"test_cfg \(mode 'streamed'\): 'chunk_rows' is deprecated .* 'band_rows'"):
        old = inference_model(model, image)
    assert torch.equal(old.seg_logits.data, streamed_logits)
    model.test_cfg = dict(mode='streamed', band=3)
    with pytest.raises(
            ValueError,
            match=r"unknown keys \['band'\] in test_cfg \(mode 'streamed'\); allowed: band_rows"):
        mmseg_whole(model, image)
    model.test_cfg = dict(mode='tiles')
    with pytest.raises(
            ValueError, match="unknown test_cfg mode 'tiles'; allowed: 'whole', "
            "'slide', 'streamed'"):
        mmseg_whole(model, image)


def test_memory_limit_picks_bands_or_refuses_before_any_work():
    model = demo_upernet('infvit')
    image = scene(64, 64)
    assert torch.equal(
        segment_large_image(model, image, mem_limit_gb=1.0), segment_large_image(model, image))
    calls = []
    model.backbone.register_forward_pre_hook(lambda *args: calls.append(args))
    with pytest.raises(
            ValueError, match=r'streamed segmentation needs \d+\.\d+ GB .*limit '
            r'1e-06 GB'):
        segment_large_image(model, image, mem_limit_gb=1e-6)
    assert not calls


def test_a_plan_made_beforehand_runs_as_the_options_would():
    """plan_large_image predicts what segment_large_image would pick; run with that plan,
    the result is the same, and the backbone and head run with the plan's heights."""
    model = demo_upernet('infvit')
    image = scene(96, 80)
    plan = plan_large_image(model, image, mem_limit_gb=1.0, return_logits=True)
    assert 0 < plan.predicted_peak_gb == plan.memory.total_bytes / 2**30 <= 1.0
    expected = segment_large_image(model, image, mem_limit_gb=1.0, return_logits=True)
    heights = []
    forward_streamed = model.backbone.forward_streamed

    def record_heights(*args, **kwargs):
        heights.append(kwargs['band_rows'])
        return forward_streamed(*args, **kwargs)

    model.backbone.forward_streamed = record_heights
    planned = segment_large_image(model, image, plan=plan, return_logits=True)
    assert heights == [plan.band_rows]
    for result, reference in zip(planned, expected):
        assert torch.equal(result, reference)
    one_row = plan._replace(band_rows=1, head_rows=1)
    assert torch.equal(segment_large_image(model, image, plan=one_row), expected[0])
    assert heights[-1] == 1


def test_planning_refuses_what_the_run_would_refuse():
    model = demo_upernet('infvit')
    with pytest.raises(ValueError, match=r'streamed segmentation needs .* limit 1e-06 GB'):
        plan_large_image(model, scene(64, 64), mem_limit_gb=1e-6)
    with pytest.raises(ValueError, match="buffer.*'memory', 'disk'"):
        plan_large_image(model, scene(64, 64), buffer='ram')
    with pytest.raises(TypeError, match='mmseg segmentor .* or an mmdet two-stage detector'):
        plan_large_image(model.backbone, scene(64, 64))


def test_bad_inputs_name_the_problem(tmp_path):
    model = demo_upernet('infvit')
    with pytest.raises(FileNotFoundError, match="no image file '.*missing.png'"):
        segment_large_image(model, str(tmp_path / 'missing.png'))
    truncated = tmp_path / 'truncated.png'
    mmcv.imwrite(scene(64, 64), str(truncated))
    truncated.write_bytes(truncated.read_bytes()[:60])
    with pytest.raises(ValueError, match='truncated or not an image'):
        segment_large_image(model, str(truncated))
    with pytest.raises(ValueError, match=r'takes images of 3 channels, the image has 4'):
        segment_large_image(model, np.zeros((64, 64, 4), np.uint16))
    with pytest.raises(ValueError, match=r'at least one patch \(8x8\) large, got 4x64'):
        segment_large_image(model, np.zeros((4, 64, 3), np.uint8))
    with pytest.raises(ValueError, match=r"expected an \(H, W, C\) or \(H, W\) image"):
        segment_large_image(model, np.zeros((1, 3, 64, 64), np.uint8))
    with pytest.raises(ValueError, match="head_rows must be an integer >= 1"):
        segment_large_image(model, scene(64, 64), head_rows=0)
    with pytest.raises(ValueError, match="unknown buffer .swap.; allowed: .memory., .disk."):
        segment_large_image(model, scene(64, 64), buffer='swap')


@pytest.mark.parametrize('bgr_to_rgb', [False, True])
def test_four_channel_16_bit_images_equal_mmseg_whole_inference(bgr_to_rgb):
    """N channels: a 4-channel model (the patch embedding's in_channels) normalised per channel by
    the data preprocessor, on 16-bit data; on either stack (mmlinear's preprocessor normalises
    the channels itself, where onedl's mmseg takes 1 or 3 mean / std values). A config's
    ``bgr_to_rgb=True`` (inherited from a 3-channel base, say) leaves a 4-channel image as it
    is in the preprocessor, and so in whole-image inference."""
    model = demo_upernet(
        'infvit',
        model=dict(
            backbone=dict(in_channels=4),
            data_preprocessor=dict(
                mean=[500.0, 800.0, 600.0, 2000.0],
                std=[150.0, 200.0, 180.0, 600.0],
                bgr_to_rgb=bgr_to_rgb)))
    rng = np.random.default_rng(4)
    blocks = rng.integers(0, 4096, (7, 9, 4), dtype=np.uint16)
    image = np.ascontiguousarray(np.repeat(np.repeat(blocks, 16, 0), 16, 1)[:100, :136])
    class_map, logits = segment_large_image(model, image, return_logits=True, head_rows=6)
    assert logits.shape == (4, 100, 136)
    assert_same_segmentation(class_map, logits, *mmseg_whole(model, image))
