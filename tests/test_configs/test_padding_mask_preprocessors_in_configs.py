"""Every detection and segmentation config hands the padding mask to its backbone."""
import glob
import os.path as osp

import pytest
from conftest import REPO_ROOT
from mmengine.config import Config

DENSE = sorted(
    p for p in glob.glob(osp.join(REPO_ROOT, 'configs', '**', '*.py'), recursive=True)
    if osp.basename(p).startswith(('mask-rcnn_', 'upernet_')))


def test_there_are_dense_configs_for_every_backbone():
    names = ' '.join(osp.basename(p) for p in DENSE)
    for backbone in ('infvit', 'weightformer', 'veca'):
        assert f'mask-rcnn_{backbone}' in names and f'upernet_{backbone}' in names


@pytest.mark.parametrize('path', DENSE, ids=[osp.basename(p) for p in DENSE])
def test_dense_config_uses_the_padding_mask_preprocessor(path):
    cfg = Config.fromfile(path)
    expected = ('mmlinear.PaddingMaskDetDataPreprocessor'
                if cfg.default_scope == 'mmdet' else 'mmlinear.PaddingMaskSegDataPreprocessor')
    assert cfg.model.data_preprocessor.type == expected
