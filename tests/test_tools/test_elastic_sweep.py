import json
import os
import os.path as osp

import pytest
from analysis_tools_loader import load_tool

elastic_sweep = load_tool('elastic_sweep')


def test_sweep_writes_loss_and_latency_per_budget(tiny_data, tmp_path):
    out = tmp_path / 'elastic'
    elastic_sweep.main([
        'veca-small', '--images',
        osp.join(tiny_data, 'cls', 'val', 'circle'), '--max-images', '2', '--img-size', '64',
        '--budgets', '8', '32', '64', '--repeats', '1', '--out',
        str(out)
    ])
    with open(out / 'elastic_sweep.json') as f:
        rows = json.load(f)['results']
    assert [r['active_cores'] for r in rows] == [8, 32, 64]
    assert rows[-1]['global_loss'] == pytest.approx(0, abs=1e-6)  # the reference budget
    assert all(r['latency_ms'] > 0 and r['global_loss'] >= -1e-6 for r in rows)
    assert (out / 'elastic_sweep.png').read_bytes()[:4] == b'\x89PNG'


def test_sweep_of_a_classifier_config_reports_top1(tiny_data, tmp_path):
    out = tmp_path / 'elastic_cls'
    root = osp.join(tiny_data, 'cls')
    elastic_sweep.main([
        'configs/demo/veca-demo_shapes-cls.py', '--img-size', '64', '--budgets', '8', '64',
        '--repeats', '1', '--cfg-options', f'test_dataloader.dataset.data_root={root}',
        'test_dataloader.num_workers=0', 'test_dataloader.persistent_workers=False', '--out',
        str(out)
    ])
    with open(out / 'elastic_sweep.json') as f:
        rows = json.load(f)['results']
    assert [r['active_cores'] for r in rows] == [8, 64]
    # Random weights on 3 balanced classes: any accuracy, but a real fraction of the val set.
    assert all(0 <= r['top1'] <= 100 and r['latency_ms'] > 0 for r in rows)
    # Three classes: a random classifier's cross-entropy is near log(3), never 0.
    assert all(0.5 < r['cross_entropy'] < 5 for r in rows)


SEG_DEMO = 'configs/demo/upernet_veca-demo_shapes-ade.py'


def seg_options(tiny_data):
    root = osp.join(tiny_data, 'ade')
    return [
        '--cfg-options', f'test_dataloader.dataset.data_root={root}',
        'test_dataloader.num_workers=0', 'test_dataloader.persistent_workers=False',
        'model.backbone.init_cfg=None'
    ]


def test_sweep_of_a_segmentation_config_runs_its_test_loop(tiny_data, tmp_path):
    out = tmp_path / 'elastic_seg'
    elastic_sweep.main([
        SEG_DEMO, '--img-size', '128', '--budgets', '8', '64', '--repeats', '1', '--out',
        str(out)
    ] + seg_options(tiny_data))
    with open(out / 'elastic_sweep.json') as f:
        rows = json.load(f)['results']
    assert [r['active_cores'] for r in rows] == [8, 64]
    # mmseg's IoUMetric on the val split (random weights: any value, but a real percentage).
    assert all(0 <= r['mIoU'] <= 100 and 0 <= r['aAcc'] <= 100 for r in rows)
    # The cores cost what patches cost in every layer: more cores, more FLOPs.
    assert 0 < rows[0]['gflops'] < rows[1]['gflops']
    assert (out / 'elastic_sweep.png').read_bytes()[:4] == b'\x89PNG'


def test_a_checkpoint_of_another_model_is_refused(tiny_data, tmp_path):
    import torch
    path = tmp_path / 'other.pth'
    torch.save({'state_dict': {'backbone.blocks.0.weight': torch.zeros(1)}}, path)
    with pytest.raises(SystemExit, match='other.pth does not hold the model of .*upernet_veca'):
        elastic_sweep.main(
            [SEG_DEMO, '--checkpoint', str(path), '--out',
             str(tmp_path)] + seg_options(tiny_data))


def test_an_unknown_metric_names_the_reported_ones(tiny_data, tmp_path):
    with pytest.raises(SystemExit, match=r"--metric 'top1' is not among .*'mIoU'"):
        elastic_sweep.main([
            SEG_DEMO, '--img-size', '64', '--budgets', '8', '--repeats', '1', '--metric', 'top1',
            '--out',
            str(tmp_path)
        ] + seg_options(tiny_data))


def test_an_elastically_trained_config_runs_at_every_budget(tiny_data, tmp_path, monkeypatch):
    """The pairs demo carries the ElasticCoreBudgetHook, which sets its evaluation budget
    before every test epoch; the sweep's test loops must still run at each budget."""
    from mmlinear.models.backbones import VECA
    seen = []
    forward = VECA.forward

    def recording_forward(self, *args, **kwargs):
        seen.append(kwargs.get('active_cores', self.active_cores))
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(VECA, 'forward', recording_forward)
    root = osp.join(tiny_data, 'pairs')
    elastic_sweep.main([
        'configs/demo/upernet_veca-demo-elastic_shapes-pairs.py', '--img-size', '128', '--budgets',
        '8', '64', '--warmup', '0', '--repeats', '1', '--out',
        str(tmp_path), '--cfg-options', f'test_dataloader.dataset.data_root={root}',
        'test_dataloader.num_workers=0', 'test_dataloader.persistent_workers=False'
    ])
    # Per budget: the timed forward, the FLOP count's, then one per validation image.
    images = len(os.listdir(osp.join(root, 'images', 'validation')))
    assert seen.count(8) >= images and seen.count(64) >= images
