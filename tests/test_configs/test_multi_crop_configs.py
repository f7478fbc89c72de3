"""The multi-crop recipes (docs/large_images.md, "Sixth measurement"): one crop of several
sizes per sample, cut at the native scale, batched with padding that the backbone and the
losses leave out."""
import os.path as osp

import numpy as np
import pytest
import torch
from conftest import REPO_ROOT
from mmcv.transforms import Compose
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmengine.structures import PixelData
from mmseg.apis import init_model
from mmseg.structures import SegDataSample
from PIL import Image

DEMO = 'configs/demo/upernet_infvit-demo-linear_multi-crop_shapes-ade.py'
#: The demo's multi-crop UperNets: the recipe applied to each backbone's demo UperNet.
DEMOS = [
    DEMO, 'configs/demo/upernet_weightformer-demo_multi-crop_shapes-ade.py',
    'configs/demo/upernet_veca-demo_multi-crop_shapes-ade.py'
]
PAPER = 'configs/infvit/upernet_infvit-4l-linear_multi-crop_8xb2-160k_ade20k-512x512.py'
LARGE_SCENES = 'configs/demo/upernet_infvit-demo-linear_large-scenes-1800it_shapes-ade.py'
# How docs/large_images.md trained the "ablation x4" whose figures the LARGE_SCENES config cites.
ABLATION_X4_OPTIONS = {
    'train_dataloader.dataset.pipeline.2.prob': [1.0, 0.0, 0.0],
    'train_cfg.max_iters': 1800,
    'train_cfg.val_interval': 1800,
    'param_scheduler.1.end': 1800,
    'default_hooks.checkpoint.interval': 1800,
}
IGNORE = 255


def crop_sizes(pipeline):
    """The (h, w) crops of the pipeline's RandomChoice, one per candidate."""
    choice, = [step for step in pipeline if step['type'] == 'RandomChoice']
    return [
        tuple(crop['crop_size']) for candidate in choice['transforms'] for crop in candidate
        if crop['type'] == 'RandomCrop'
    ]


@pytest.mark.parametrize(('path', 'sizes'),
                         [(demo, (128, 192, 256)) for demo in DEMOS] + [(PAPER, (512, 768, 1024))])
def test_the_recipe_crops_each_listed_size_and_pads_batches_to_the_largest(path, sizes):
    cfg = Config.fromfile(osp.join(REPO_ROOT, path))
    assert crop_sizes(cfg.train_dataloader.dataset.pipeline) == [(s, s) for s in sizes]
    preprocessor = cfg.model.data_preprocessor
    assert preprocessor.size is None and max(sizes) % preprocessor.size_divisor == 0
    # Validation and the head's window stay those of the base recipe's crop.
    assert tuple(cfg.crop_size) == (sizes[0], sizes[0])


def coordinate_scene(path, size=384):
    """A PNG whose pixels spell their own row and column (R = row // 2, G = column // 2,
    B = the parities), and a label map of (row + column) mod 4."""
    rows, cols = np.indices((size, size))
    rgb = np.stack([rows // 2, cols // 2, (rows % 2) * 2 + cols % 2], -1).astype(np.uint8)
    Image.fromarray(rgb).save(path / 'scene.png')
    Image.fromarray(((rows + cols) % 4).astype(np.uint8)).save(path / 'labels.png')


def load_scene(pipeline, path):
    """One training sample of the scene `coordinate_scene` wrote into ``path``."""
    return pipeline(
        dict(
            img_path=str(path / 'scene.png'),
            seg_map_path=str(path / 'labels.png'),
            reduce_zero_label=False,
            seg_fields=[]))


def test_the_demo_crops_are_windows_of_the_scene_at_its_scale(tmp_path):
    """Each sample is a crop of one of the sizes whose pixels are consecutive rows and columns
    of the scene (a horizontal flip reverses the columns): nothing is rescaled."""
    coordinate_scene(tmp_path)
    cfg = Config.fromfile(osp.join(REPO_ROOT, DEMO))
    init_default_scope('mmseg')
    pipeline = Compose(cfg.train_dataloader.dataset.pipeline)
    np.random.seed(0)
    seen = set()
    for _ in range(15):
        sample = load_scene(pipeline, tmp_path)
        bgr = sample['inputs'].numpy().astype(int)  # (3, h, w), mmcv's BGR
        rows = 2 * bgr[2] + bgr[0] // 2
        cols = 2 * bgr[1] + bgr[0] % 2
        height, width = rows.shape
        seen.add((height, width))
        assert (np.diff(rows, axis=0) == 1).all()
        steps = np.unique(np.diff(cols, axis=1))
        assert len(steps) == 1 and abs(steps[0]) == 1
        labels = sample['data_samples'].gt_sem_seg.data[0].numpy()
        assert (labels == (rows + cols) % 4).all()
    assert seen == {(s, s) for s in (128, 192, 256)}


@pytest.mark.parametrize('path', DEMOS)
def test_a_batch_of_mixed_crops_reaches_the_backbone_masked_and_the_loss_ignores_padding(path):
    """The padded crop's features are the crop's alone: the backbone sees the padding mask."""
    cfg = Config.fromfile(osp.join(REPO_ROOT, path))
    cfg.model.backbone.init_cfg = None
    torch.manual_seed(0)
    model = init_model(cfg, None, device='cpu')
    generator = torch.Generator().manual_seed(0)
    inputs, samples = [], []
    for size in (128, 192):
        inputs.append(
            torch.randint(0, 256, (3, size, size), generator=generator, dtype=torch.uint8))
        sample = SegDataSample()
        sample.gt_sem_seg = PixelData(
            data=torch.randint(0, 4, (1, size, size), generator=generator))
        sample.set_metainfo(dict(img_shape=(size, size), ori_shape=(size, size)))
        samples.append(sample)
    data = model.data_preprocessor(dict(inputs=inputs, data_samples=samples), training=True)
    batch, samples = data['inputs'], data['data_samples']
    assert batch.shape == (2, 3, 192, 192)
    expected_mask = torch.ones(2, 192, 192, dtype=torch.bool)
    expected_mask[0, :128, :128] = False
    expected_mask[1] = False
    assert torch.equal(batch.padding_mask, expected_mask)
    labels = samples[0].gt_sem_seg.data[0]
    assert (labels[expected_mask[0]] == IGNORE).all() and (labels[:128, :128] < 4).all()
    assert tuple(samples[0].img_shape) == (128, 128)
    model.eval()
    with torch.no_grad():
        padded = model.backbone(batch)[0][0]
        alone = model.backbone(batch[:1, :, :128, :128])[0][0]
    stride = 192 // padded.shape[-1]
    torch.testing.assert_close(padded[:, :128 // stride, :128 // stride], alone)
    model.train()
    losses = model.loss(batch, samples)
    assert all(torch.isfinite(value) for key, value in losses.items() if 'loss' in key)


def test_the_large_scenes_config_is_the_recorded_ablation_x4_run():
    """The shipped config builds the run that docs/large_images.md measured (the multi-crop
    config with the recorded --cfg-options): every setting the runner reads is equal, so the
    recorded figures are this config's. Only module-level helpers differ (the base's
    ``max_iters`` and ``train_pipeline``, read when the base is parsed)."""
    shipped = Config.fromfile(osp.join(REPO_ROOT, LARGE_SCENES)).to_dict()
    recorded = Config.fromfile(osp.join(REPO_ROOT, DEMO))
    recorded.merge_from_dict(ABLATION_X4_OPTIONS)
    recorded = recorded.to_dict()
    helpers = {'max_iters', 'train_pipeline'}
    assert set(shipped) == set(recorded)
    assert {key: shipped[key] for key in set(shipped) - helpers} == \
        {key: recorded[key] for key in set(recorded) - helpers}
    assert shipped['train_cfg']['max_iters'] == 1800
    pipeline = shipped['train_dataloader']['dataset']['pipeline']
    assert crop_sizes(pipeline) == [(128, 128), (192, 192), (256, 256)]
    assert pipeline[2]['prob'] == [1.0, 0.0, 0.0]


def test_the_large_scenes_config_draws_only_128_pixel_crops(tmp_path):
    coordinate_scene(tmp_path)
    cfg = Config.fromfile(osp.join(REPO_ROOT, LARGE_SCENES))
    init_default_scope('mmseg')
    pipeline = Compose(cfg.train_dataloader.dataset.pipeline)
    np.random.seed(0)
    shapes = {tuple(load_scene(pipeline, tmp_path)['inputs'].shape[1:]) for _ in range(10)}
    assert shapes == {(128, 128)}
