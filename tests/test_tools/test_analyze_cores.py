import json
import os.path as osp

import pytest
import torch
from analysis_tools_loader import load_tool
from conftest import REPO_ROOT

from mmlinear.apis import build_backbone

analyze_cores = load_tool('analyze_cores')
DEMO = osp.join(REPO_ROOT, 'configs', 'demo', 'veca-demo_shapes-cls.py')


def images(tiny_data):
    return ['--images', osp.join(tiny_data, 'coco', 'images', 'val'), '--max-images', '2']


def test_writes_the_four_figures_and_the_numbers(tiny_data, tmp_path):
    analyze_cores.main([
        DEMO, *images(tiny_data), '--img-size', '64', '--active-cores', '16', '--grid-cores', '3',
        '--teacher', 'vit_base_patch16_dinov3.lvd1689m', '--teacher-options', 'embed_dim=64',
        'depth=2', 'num_heads=2', 'img_size=64', '--projections', 'pca', '--out',
        str(tmp_path)
    ])
    for name in ('trajectories', 'attention_grid', 'isotropy', 'features'):
        assert (tmp_path / f'{name}.png').read_bytes()[:4] == b'\x89PNG', name
    result = json.loads((tmp_path / 'cores.json').read_text())
    assert result['feature_columns'] == [
        'veca-demo_shapes-cls (K = 16), PCA', 'vit_base_patch16_dinov3.lvd1689m, PCA'
    ]
    assert result['active_cores'] == 16 and result['grid_cores'] == [0, 8, 15]
    blocks = 4  # the demo VECA
    assert len(result['isotropy_per_block']) == blocks
    assert all(0 < v <= 1 + 1e-6 for v in result['isotropy_per_block'])
    coords = torch.tensor(result['core_coordinates'])
    assert coords.shape == (blocks, 2, 16, 2) and bool((coords.abs() < 1).all())


@pytest.mark.slow
def test_draws_the_dense_features_by_pca_beside_umap(tiny_data, tmp_path):
    """Both projections of the demo VECA's 2 x 64 patch features (umap-learn's first call
    compiles its kernels: tens of seconds)."""
    analyze_cores.main([DEMO, *images(tiny_data), '--img-size', '64', '--out', str(tmp_path)])
    assert (tmp_path / 'features.png').read_bytes()[:4] == b'\x89PNG'
    result = json.loads((tmp_path / 'cores.json').read_text())
    assert result['feature_columns'] == [
        'veca-demo_shapes-cls (K = 64), PCA', 'veca-demo_shapes-cls (K = 64), UMAP'
    ]


@pytest.mark.parametrize('argv,message', [
    (['--active-cores', '12'], '8, 16, 24'),
    (['--img-size', '8'], r'--img-size must be at least one patch \(16\), got 8'),
    (['--max-images', '1', '--img-size', '24'
      ], 'umap: UMAP with n_neighbors=15 needs more than 15 feature vectors, got 9'),
])
def test_bad_options_are_refused(tiny_data, tmp_path, argv, message):
    with pytest.raises(SystemExit, match=message):
        analyze_cores.main([DEMO, *images(tiny_data), '--out', str(tmp_path)] + argv)


def test_another_backbone_or_its_checkpoint_is_refused(tiny_data, tmp_path):
    with pytest.raises(SystemExit, match='builds a WeightFormer, not VECA'):
        analyze_cores.main(['weightformer-test', *images(tiny_data), '--out', str(tmp_path)])
    path = tmp_path / 'weightformer.pth'
    torch.save(build_backbone('weightformer-test').state_dict(), path)
    with pytest.raises(SystemExit, match='cannot load .* with .*weightformer.pth: Error'):
        analyze_cores.main(
            [DEMO, '--checkpoint',
             str(path), *images(tiny_data), '--out',
             str(tmp_path)])
