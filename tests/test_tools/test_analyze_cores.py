import json
import os.path as osp

import pytest
import torch
from analysis_tools_loader import load_tool
from conftest import REPO_ROOT

from mmlinear.apis import build_backbone, input_normalization, load_images
from mmlinear.visualization import half_mass_area

analyze_cores = load_tool('analyze_cores')
DEMO = osp.join(REPO_ROOT, 'configs', 'demo', 'veca-demo_shapes-cls.py')

ADE_DEMO = osp.join(REPO_ROOT, 'configs', 'demo', 'linear_veca-demo-elastic_shapes-ade.py')


def images(tiny_data):
    return ['--images', osp.join(tiny_data, 'coco', 'images', 'val'), '--max-images', '2']


def ade_images(tiny_data):
    return ['--images', osp.join(tiny_data, 'ade', 'images', 'validation'), '--max-images', '2']


def test_writes_the_figures_and_the_numbers(tiny_data, tmp_path):
    teacher = 'vit_base_patch16_dinov3.lvd1689m'
    analyze_cores.main([
        ADE_DEMO, *ade_images(tiny_data), '--img-size', '64', '--active-cores', '16', '8',
        '--grid-cores', '3', '--teacher', teacher, '--teacher-options', 'embed_dim=64', 'depth=2',
        'num_heads=2', 'img_size=64', '--projections', 'pca', '--labels',
        osp.join(tiny_data, 'ade', 'annotations', 'validation'), '--out',
        str(tmp_path)
    ])
    for name in ('trajectories', 'attention_grid', 'isotropy', 'budgets', 'global_cosine',
                 'features'):
        assert (tmp_path / f'{name}.png').read_bytes()[:4] == b'\x89PNG', name
    result = json.loads((tmp_path / 'cores.json').read_text())
    student = 'linear_veca-demo-elastic_shapes-ade (K = 16)'
    assert result['feature_columns'] == [f'{student}, PCA', f'{teacher}, PCA']
    # The figures of one budget take the largest.
    assert result['active_cores'] == 16 and result['grid_cores'] == [0, 8, 15]
    blocks = 4  # the demo VECA
    assert len(result['isotropy_per_block']) == blocks
    assert all(0 < v <= 1 + 1e-6 for v in result['isotropy_per_block'])
    coords = torch.tensor(result['core_coordinates'])
    assert coords.shape == (blocks, 2, 16, 2) and bool((coords.abs() < 1).all())
    # A half-mass area per budget and block, between 1 patch and half of the 8 x 8 (8-px
    # patches at 64 px).
    assert result['num_patches'] == 64
    areas = result['half_mass_area_per_block']
    assert sorted(areas) == ['16', '8'] and all(len(v) == blocks for v in areas.values())
    assert all(1 <= v <= 32 for v in areas['8'] + areas['16'])
    cosine = result['global_patch_cosine']
    assert sorted(cosine) == sorted([student, teacher, 'correlation_with_teacher'])
    for title in (student, teacher):
        assert len(cosine[title]['per_image']) == 2
        assert all(-1 <= cosine[title][key] <= 1 for key in ('mean', 'objects', 'background'))
    assert -1 <= cosine['correlation_with_teacher']['mean'] <= 1


def test_the_budgets_are_measured_on_the_attention_the_backbone_gives(tiny_data, tmp_path):
    """The half-mass areas of cores.json are those of the backbone's own attention maps at
    each budget, the core columns dropped and the heads averaged."""
    backbone = build_backbone(ADE_DEMO, dict(out_type='featmap')).eval()
    checkpoint = tmp_path / 'backbone.pth'
    torch.save(backbone.state_dict(), checkpoint)
    analyze_cores.main([
        ADE_DEMO, '--checkpoint',
        str(checkpoint), *ade_images(tiny_data), '--img-size', '64', '--active-cores', '8', '24',
        '--projections', 'pca', '--out',
        str(tmp_path)
    ])
    result = json.loads((tmp_path / 'cores.json').read_text())
    x, _ = load_images(result['images'], 64, *input_normalization(ADE_DEMO))
    for budget in (8, 24):
        with torch.no_grad():
            maps = backbone.forward_attention_maps(x, active_cores=budget)
        expected = [float(half_mass_area(a.mean(1)[..., budget:]).mean()) for a in maps]
        assert result['half_mass_area_per_block'][str(budget)] == pytest.approx(expected)


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
    (['--active-cores', '8', '12'], '8, 16, 24'),
    (['--labels', '/nonexistent'], 'no label map /nonexistent/'),
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
