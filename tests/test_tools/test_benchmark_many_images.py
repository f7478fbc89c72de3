"""tools/analysis_tools/benchmark_many_images.py end to end on a reduced folder (the demo
UperNet's random weights): every check passes and the report holds each run."""
import json
import os.path as osp

import pytest
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT

CONFIG = osp.join(REPO_ROOT, 'configs', 'demo', 'upernet_infvit-demo-linear_shapes-ade.py')


@pytest.mark.slow
def test_reduced_folder_passes_every_check(tmp_path):
    tool = load_tool('benchmark_many_images')
    result = run_tool_main(tool, CONFIG, '--work-dir', tmp_path, '--scale', '0.02')
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((tmp_path / 'report.json').read_text())
    assert len(report['rasters']) == 20 and report['checks'] and all(report['checks'].values())
    assert set(report['runs']) == {'batch', 'sharded', 'single', 'resume'}
    assert report['runs']['batch']['exit_status'] == 1
    assert sorted(report['runs']['sharded']['done_by_rank'].values()) and \
        sum(report['runs']['sharded']['done_by_rank'].values()) == 18
    assert report['runs']['resume']['skipped_on_rerun'] == \
        report['runs']['resume']['done_before_kill'] > 0
    assert 'ratio_to_batch' in report['runs']['sharded']
    assert '| sharded |' in (tmp_path / 'report.md').read_text()
