"""The frozen-backbone linear evaluations (VECA paper: PASCAL Context-59, VOC 2012 aug, NYUv2
depth; VECA-B and its DINOv3 teacher): each config trains a few iterations and validates on
small data written in the dataset's own layout, and only the head learns."""
import glob
import os.path as osp

import cv2
import numpy as np
import pytest
import torch
from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.runner import Runner

from mmlinear.cli import fix_dataloaders

CONFIGS = sorted(
    osp.relpath(p, osp.join(REPO_ROOT, 'configs'))
    for p in glob.glob(osp.join(REPO_ROOT, 'configs', 'veca', 'linear-probe_*.py')))
DATASETS = ('pascal-context-59', 'voc12aug', 'nyu-depth')


def write_image(path: str, rng: np.random.Generator, shape) -> None:
    cv2.imwrite(path, rng.integers(0, 256, (*shape, 3), dtype=np.uint8))


def write_labelled_split(root: str, rng: np.random.Generator, names, label_dir: str,
                         split_list: str, num_labels: int) -> None:
    """JPEGImages/NAME.jpg, LABEL_DIR/NAME.png (labels 0 .. num_labels - 1) and the list of
    NAMEs, as the PASCAL datasets lay them out."""
    for name in names:
        write_image(f'{root}/JPEGImages/{name}.jpg', rng, (96, 128))
        cv2.imwrite(f'{root}/{label_dir}/{name}.png',
                    rng.integers(0, num_labels, (96, 128), dtype=np.uint8))
    with open(f'{root}/{split_list}', 'w') as f:
        f.write('\n'.join(names) + '\n')


def write_context(root: str, rng: np.random.Generator) -> None:
    """PascalContextDataset59: 0 is the background (ignored), then 59 classes."""
    for split, names in (('train', ['2008_000001', '2008_000002']), ('val', ['2008_000003'])):
        write_labelled_split(root, rng, names, 'SegmentationClassContext',
                             f'ImageSets/SegmentationContext/{split}.txt', 60)


def write_voc_aug(root: str, rng: np.random.Generator) -> None:
    """PascalVOCDataset with SBD: SegmentationClass (train, val) and SegmentationClassAug
    (aug), 21 classes."""
    splits = {'train': ['2007_000001'], 'aug': ['2007_000002'], 'val': ['2007_000003']}
    for split, names in splits.items():
        labels = 'SegmentationClassAug' if split == 'aug' else 'SegmentationClass'
        write_labelled_split(root, rng, names, labels, f'ImageSets/Segmentation/{split}.txt', 21)


def write_nyu(root: str, rng: np.random.Generator) -> None:
    """NYUDataset: 480 x 640 images (the Eigen crop of DepthMetric needs that size) and 16-bit
    depth in millimetres, 0 where missing."""
    for split, names in (('train', ['bedroom_0001', 'kitchen_0002']), ('test', ['office_0003'])):
        for name in names:
            write_image(f'{root}/images/{split}/{name}.jpg', rng, (480, 640))
            depth = rng.integers(500, 9000, (480, 640)).astype(np.uint16)
            depth[:8] = 0
            cv2.imwrite(f'{root}/annotations/{split}/{name}.png', depth)


WRITERS = {
    'pascal-context-59':
    (write_context, ('JPEGImages', 'SegmentationClassContext', 'ImageSets/SegmentationContext')),
    'voc12aug': (write_voc_aug, ('JPEGImages', 'SegmentationClass', 'SegmentationClassAug',
                                 'ImageSets/Segmentation')),
    'nyu-depth':
    (write_nyu, ('images/train', 'images/test', 'annotations/train', 'annotations/test')),
}


def dataset_of(config: str) -> str:
    return next(name for name in DATASETS if f'_{name}-512x512' in config)


def small_config(config: str, data_root: str, work_dir: str) -> Config:
    """The config on the small data, one process on the CPU, with a small backbone of the
    same kind and random weights (the released checkpoints are not used in tests)."""
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', config))
    backbone = cfg.model.backbone
    if backbone.type == 'mmlinear.VECA':
        backbone.update(arch='test', frozen_stages=2, init_cfg=None)
    else:
        backbone.checkpoint_path = None
        backbone.model_kwargs.update(embed_dim=64, depth=2, num_heads=2)
    cfg.model.decode_head.update(in_channels=64, norm_cfg=dict(type='BN', requires_grad=True))
    short_run(cfg, data_root, work_dir)
    return cfg


def short_run(cfg: Config, data_root: str, work_dir: str) -> None:
    """3 training iterations then validation, in this process, on the data under
    ``data_root``."""
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].num_workers = 0
    train = cfg.train_dataloader.dataset
    for dataset in [
            cfg.val_dataloader.dataset, cfg.test_dataloader.dataset,
            *train.get('datasets', [train])
    ]:
        dataset.data_root = data_root  # VOC aug trains on a ConcatDataset of two
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=3, val_interval=3)
    cfg.param_scheduler = []
    cfg.default_hooks.checkpoint = None
    cfg.work_dir = work_dir
    fix_dataloaders(cfg)


def test_every_dataset_has_a_veca_and_a_dinov3_config():
    assert [dataset_of(c) for c in CONFIGS].count('nyu-depth') == 2
    for dataset in DATASETS:
        names = [osp.basename(c) for c in CONFIGS if dataset_of(c) == dataset]
        assert sorted(n.split('_')[1]
                      for n in names) == ['dinov3-vitb16-frozen', 'veca-base-frozen']


@pytest.mark.parametrize('config', CONFIGS)
def test_the_real_config_freezes_the_whole_backbone(config):
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', config))
    backbone = cfg.model.backbone
    if backbone.type == 'mmlinear.VECA':
        assert backbone.arch == 'base' and backbone.frozen_stages == 12
        assert backbone.init_cfg.prefix == 'student.'
    else:
        assert backbone.type == 'mmlinear.TimmViTFeatures' and backbone.frozen
        assert backbone.model_name == 'vit_base_patch16_dinov3.lvd1689m'
    assert cfg.model.decode_head.in_channels == 768
    assert cfg.model.data_preprocessor.size == (512, 512)
    head = {'pascal-context-59': 59, 'voc12aug': 21, 'nyu-depth': 256}[dataset_of(config)]
    key = 'num_bins' if dataset_of(config) == 'nyu-depth' else 'num_classes'
    assert cfg.model.decode_head[key] == head


class ParameterRecorder:
    """Copies of the backbone's and the head's parameters before training."""

    def __init__(self, model):
        self.backbone = {k: v.detach().clone() for k, v in model.backbone.state_dict().items()}
        self.head = {k: v.detach().clone() for k, v in model.decode_head.named_parameters()}


def run_cases():
    """Every config; the segmentation runs are opt-in (``slow``), to keep the suite short: the
    PASCAL Context and VOC probes share one head and recipe, which tools/reproduce.py's
    released VECA check trains on PASCAL Context in the suite, checking the frozen backbone
    as here (test_reproduce_released.py); the depth runs, another head, run by default."""
    for config in CONFIGS:
        slow = dataset_of(config) != 'nyu-depth'
        yield pytest.param(config, marks=pytest.mark.slow) if slow else config


@pytest.mark.parametrize('config', list(run_cases()))
def test_trains_the_head_only_and_validates(config, tmp_path):
    dataset = dataset_of(config)
    writer, folders = WRITERS[dataset]
    root = tmp_path / 'data'
    for folder in folders:
        (root / folder).mkdir(parents=True)
    writer(str(root), np.random.default_rng(0))
    torch.manual_seed(0)
    runner = Runner.from_cfg(small_config(config, str(root), str(tmp_path / 'work')))
    model = runner.model
    assert not any(p.requires_grad for p in model.backbone.parameters())
    before = ParameterRecorder(model)
    runner.train()
    after = model.backbone.state_dict()
    for name, value in before.backbone.items():
        assert torch.equal(after[name], value), name  # BatchNorm statistics included
    moved = [
        name for name, value in model.decode_head.named_parameters()
        if not torch.equal(value, before.head[name])
    ]
    assert 'conv_seg.weight' in moved and 'bn.weight' in moved
    metrics = runner.val_loop.run()
    expected = 'rmse' if dataset == 'nyu-depth' else 'mIoU'
    assert np.isfinite(metrics[expected])


# The demo-scale probes: (config, its set of the bundled data, the metric it reports).
DEMOS = (
    ('demo/linear-probe_veca-demo-frozen_shapes-ade.py', 'ade', 'mIoU'),
    ('demo/linear-probe_veca-demo-frozen_shapes-depth.py', 'depth', 'rmse'),
)


@pytest.mark.parametrize('config,data,metric', DEMOS, ids=[d[1] for d in DEMOS])
def test_demo_probes_the_frozen_classification_demo_backbone(config, data, metric, tiny_data,
                                                             tmp_path):
    from mmlinear.apis import build_classifier
    torch.manual_seed(0)
    classifier = build_classifier(osp.join(REPO_ROOT, 'configs', 'demo', 'veca-demo_shapes-cls.py'))
    checkpoint = str(tmp_path / 'classifier.pth')
    torch.save({'state_dict': classifier.state_dict()}, checkpoint)
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', config))
    assert cfg.model.backbone.init_cfg.checkpoint == (
        'work_dirs/demo/veca-demo_shapes-cls/epoch_20.pth')
    cfg.model.backbone.init_cfg.checkpoint = checkpoint
    short_run(cfg, f'{tiny_data}/{data}', str(tmp_path / 'work'))
    runner = Runner.from_cfg(cfg)
    before = ParameterRecorder(runner.model)
    runner.train()
    # The classifier's backbone, loaded through the 'backbone.' prefix, and left as it was,
    # without a gradient; the head learnt.
    trained = runner.model.backbone.state_dict()
    for name, value in classifier.backbone.state_dict().items():
        assert torch.equal(trained[name], value), name
    assert all(p.grad is None for p in runner.model.backbone.parameters())
    assert not torch.equal(runner.model.decode_head.conv_seg.weight, before.head['conv_seg.weight'])
    assert np.isfinite(runner.val_loop.run()[metric])
