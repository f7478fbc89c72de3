"""mmlinear.ImageNetV2: class folders named by ImageNet-1K index, labelled by that index."""
import os
import os.path as osp

import numpy as np
import pytest
from mmengine.config import Config
from mmengine.registry import init_default_scope
from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
from PIL import Image

import mmlinear  # noqa: F401  (the mmlinear:: scope and registries)
from mmlinear.datasets import ImageNetV2

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
CONFIG = osp.join(REPO_ROOT, 'configs', 'infvit',
                  'infvit-4l-linear_16xb64_in1k_test-imagenet-v2.py')
PREFIX = 'imagenetv2-matched-frequency-format-val'


def make_tree(root, folders, images_per_folder=2):
    """An ImageNet-V2-like archive: ``root/PREFIX/<folder>/<n>.jpeg``, 40 x 30 images."""
    rng = np.random.default_rng(0)
    for folder in folders:
        path = osp.join(root, PREFIX, folder)
        for n in range(images_per_folder):
            pixels = rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)
            os.makedirs(path, exist_ok=True)
            Image.fromarray(pixels).save(osp.join(path, f'{n}.jpeg'))
    return str(root)


def test_labels_are_the_folders_imagenet_indices_not_their_string_order(tmp_path):
    """Sorted as strings the folders are 0, 10, 100, 2, 999; their labels are the numbers."""
    root = make_tree(tmp_path, ['0', '2', '10', '100', '999'])
    dataset = ImageNetV2(data_root=root, data_prefix=PREFIX)
    labels = {
        osp.basename(osp.dirname(info['img_path'])): info['gt_label']
        for info in dataset.load_data_list()
    }
    assert labels == {'0': 0, '2': 2, '10': 10, '100': 100, '999': 999}
    assert len(dataset) == 10
    assert dataset.CLASSES == tuple(IMAGENET_CATEGORIES) and len(dataset.CLASSES) == 1000


def test_the_test_config_reads_imagenet_v2_with_the_in1k_test_pipeline(tmp_path):
    cfg = Config.fromfile(CONFIG)
    base = Config.fromfile(
        osp.join(REPO_ROOT, 'configs', 'infvit', 'infvit-4l-linear_16xb64_in1k.py'))
    dataset_cfg = cfg.test_dataloader.dataset
    assert dataset_cfg.type == 'mmlinear.ImageNetV2' and dataset_cfg.data_prefix == PREFIX
    # The same preprocessing as the ImageNet-1K test set it is compared with.
    assert [{k: v for k, v in t.items() if k != '_scope_'} for t in dataset_cfg.pipeline] == \
        base.test_dataloader.dataset.pipeline
    assert cfg.model == base.model
    init_default_scope('mmpretrain')
    from mmpretrain.registry import DATASETS
    dataset = DATASETS.build(dict(dataset_cfg, data_root=make_tree(tmp_path, ['7', '42'])))
    samples = [dataset[i] for i in range(len(dataset))]
    assert all(tuple(sample['inputs'].shape) == (3, 224, 224) for sample in samples)
    assert sorted(sample['data_samples'].gt_label.item() for sample in samples) == [7, 7, 42, 42]


@pytest.mark.parametrize('folder', ['n01440764', '1000', '-1', 'cat'])
def test_a_folder_that_is_not_an_imagenet_index_is_refused(tmp_path, folder):
    root = make_tree(tmp_path, ['3', folder])
    with pytest.raises(
            ValueError, match=r'named by their ImageNet-1K index, 0 to 999; got .*' + folder):
        ImageNetV2(data_root=root, data_prefix=PREFIX)


def test_an_empty_archive_and_an_annotation_file_are_refused(tmp_path):
    os.makedirs(osp.join(tmp_path, PREFIX, '5'))
    with pytest.raises(RuntimeError, match='found no image'):
        ImageNetV2(data_root=str(tmp_path), data_prefix=PREFIX)
    with pytest.raises(ValueError, match='ann_file'):
        ImageNetV2(data_root=str(tmp_path), data_prefix=PREFIX, ann_file='meta/val.txt')


DEMO_CLASSES = ('circle', 'square', 'triangle')
DEMO_CONFIG = osp.join(REPO_ROOT, 'configs', 'demo', 'infvit-demo-linear_shapes-cls_test-v2.py')


def test_a_class_list_in_metainfo_labels_the_folders_by_their_index_in_it(tmp_path):
    root = make_tree(tmp_path, ['2', '0', '1'])
    dataset = ImageNetV2(data_root=root, data_prefix=PREFIX, metainfo=dict(classes=DEMO_CLASSES))
    labels = {
        osp.basename(osp.dirname(info['img_path'])): info['gt_label']
        for info in dataset.load_data_list()
    }
    assert labels == {'0': 0, '1': 1, '2': 2}
    assert dataset.CLASSES == DEMO_CLASSES and len(dataset) == 6


@pytest.mark.parametrize('folder', ['3', 'circle', '-1'])
def test_a_folder_beyond_the_metainfo_class_list_is_refused(tmp_path, folder):
    root = make_tree(tmp_path, ['0', folder])
    with pytest.raises(
            ValueError,
            match=r'index in the 3 classes of metainfo \(circle, square, triangle\), 0 to 2; '
            r'got .*' + folder):
        ImageNetV2(data_root=root, data_prefix=PREFIX, metainfo=dict(classes=DEMO_CLASSES))


def test_the_demo_v2_config_reads_the_generated_split_in_the_training_class_order(tiny_data):
    """The demo's re-collected split (class folders 0, 1, 2) is labelled as the classifier's
    training set numbers its class folders (circle, square, triangle, sorted by name), and is
    tested with the demo's model and test pipeline."""
    cfg = Config.fromfile(DEMO_CONFIG)
    base = Config.fromfile(
        osp.join(REPO_ROOT, 'configs', 'demo', 'infvit-demo-linear_shapes-cls.py'))
    assert cfg.model == base.model and cfg.test_evaluator == base.test_evaluator
    dataset_cfg = cfg.test_dataloader.dataset
    assert (dataset_cfg.type, dataset_cfg.data_root) == ('mmlinear.ImageNetV2',
                                                         'data/shapes/cls_v2')
    assert [{k: v for k, v in t.items() if k != '_scope_'} for t in dataset_cfg.pipeline] == \
        base.test_dataloader.dataset.pipeline
    init_default_scope('mmpretrain')
    from mmpretrain.registry import DATASETS
    train = DATASETS.build(
        dict(base.train_dataloader.dataset, data_root=osp.join(tiny_data, 'cls')))
    v2 = DATASETS.build(dict(dataset_cfg, data_root=osp.join(tiny_data, 'cls_v2')))
    assert v2.CLASSES == train.CLASSES == DEMO_CLASSES
    assert len(v2) == max(6, round(300 * 0.05))  # the fixture's --scale
    for index in range(len(v2)):
        info = v2.get_data_info(index)
        assert info['gt_label'] == int(osp.basename(osp.dirname(info['img_path'])))
    sample = v2[0]
    assert tuple(sample['inputs'].shape) == (3, 64, 64)
    assert {v2.get_data_info(i)['gt_label'] for i in range(len(v2))} == {0, 1, 2}
