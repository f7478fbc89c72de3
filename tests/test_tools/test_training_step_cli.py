"""tools/analysis_tools/training_step.py: the command line of one checked training step (the
step itself is tested in tests/test_apis/test_training_step.py), bad input refused."""
import json
import math

import pytest
import torch
from analysis_tools_loader import load_tool, run_tool_main

step = load_tool('training_step')

CONFIG = 'configs/demo/infvit-demo-linear_shapes-cls.py'


def test_cli_records_a_finite_bf16_step(tmp_path):
    run = run_tool_main(step, CONFIG, '--img-size', 64, '--batch-size', 2, '--dtype', 'bf16',
                        '--with-cp', '--out', tmp_path)
    assert run.returncode == 0, run.stderr
    assert 'finite; loss' in run.stdout
    with open(tmp_path / 'training_step.json') as f:
        result = json.load(f)
    assert result['status'] == 'ok'
    assert result['settings']['dtype'] == 'bf16' and result['settings']['with_cp']
    assert math.isfinite(result['loss']) and result['peak_mem_mb'] >= 0
    assert {'cpu', 'date', 'load_average'} <= set(result['machine'])


def test_cli_exits_non_zero_naming_the_nan_parameter(tmp_path, monkeypatch):
    build = step.build_classifier

    def with_a_nan_head(cfg):
        model = build(cfg)
        with torch.no_grad():
            model.head.fc.bias[1] = float('nan')
        return model

    monkeypatch.setattr(step, 'build_classifier', with_a_nan_head)
    run = run_tool_main(step, CONFIG, '--img-size', 64, '--out', tmp_path)
    assert run.returncode == 1
    assert 'training step non-finite' in run.stderr and 'head.fc.bias' in run.stderr
    with open(tmp_path / 'training_step.json') as f:
        result = json.load(f)
    assert result['status'] == 'non-finite' and 'head.fc.bias' in result['error']


@pytest.mark.parametrize('args,message',
                         [(('--img-size', 0), '--img-size must be positive, got 0'),
                          (('--batch-size', -1), '--batch-size must be positive, got -1'),
                          (('--mem-limit-gb', 0), '--mem-limit-gb must be positive'),
                          (('--dtype', 'fp16'), "invalid choice: 'fp16'")])
def test_bad_options_are_refused(args, message, tmp_path):
    run = run_tool_main(step, CONFIG, *args, '--out', tmp_path)
    assert run.returncode != 0
    assert message in run.stderr
    assert not (tmp_path / 'training_step.json').exists()


def test_a_config_that_is_not_a_classifier_is_refused(tmp_path):
    missing = run_tool_main(step, 'configs/demo/no_such_config.py', '--out', tmp_path)
    assert missing.returncode == 1
    assert 'config not found: configs/demo/no_such_config.py' in missing.stderr
    segmentor = run_tool_main(step, 'configs/demo/upernet_infvit-demo-linear_shapes-ade.py',
                              '--out', tmp_path)
    assert segmentor.returncode == 1
    assert 'has no classification head' in segmentor.stderr
    assert not (tmp_path / 'training_step.json').exists()
