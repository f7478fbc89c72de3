"""tools/analysis_tools/training_step.py: one checked training step (forward, backward,
optimizer step), the first non-finite tensor named, bad input refused."""
import json
import math
import re

import pytest
import torch
from analysis_tools_loader import load_tool, run_tool_main
from mmengine.optim import build_optim_wrapper

step = load_tool('training_step')

CONFIG = 'configs/demo/infvit-demo-linear_shapes-cls.py'


def classifier(with_cp=False):
    """The demo classifier at its seeded initial weights, in training mode, and its
    optimizer wrapper."""
    cfg = step.classifier_config(CONFIG, with_cp)
    torch.manual_seed(0)
    model = step.build_classifier(cfg).train()
    return model, build_optim_wrapper(model, cfg.optim_wrapper)


def batch():
    images = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    return images, torch.tensor([0, 2])


def test_a_step_is_finite_and_updates_the_weights():
    model, optim_wrapper = classifier()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    result = step.training_step(model, optim_wrapper, *batch(), None)
    assert math.isfinite(result['loss']) and result['loss'] > 0
    assert result['grad_norm'] > 0
    assert result['total_s'] == pytest.approx(result['forward_s'] + result['backward_s'] +
                                              result['step_s'])
    for name in ('head.fc.weight', 'backbone.blocks.0.attn.q_proj.weight',
                 'backbone.patch_embed.projection.weight'):
        assert not torch.equal(dict(model.named_parameters())[name], before[name]), name
    assert all(p.grad is None for p in model.parameters())  # zeroed for the next step


def test_checkpointing_gives_the_same_step():
    plain, plain_optim = classifier(with_cp=False)
    checkpointed, cp_optim = classifier(with_cp=True)
    assert checkpointed.backbone.with_cp and not plain.backbone.with_cp
    loss = step.training_step(plain, plain_optim, *batch(), None)['loss']
    assert step.training_step(checkpointed, cp_optim, *batch(), None)['loss'] == loss
    for (name, p), q in zip(plain.named_parameters(), checkpointed.parameters()):
        torch.testing.assert_close(q, p, msg=name)


def test_a_nan_weight_is_named_before_the_step():
    model, optim_wrapper = classifier()
    with torch.no_grad():
        model.backbone.blocks[1].ffn.fc1.weight[0, 0] = float('nan')
    with pytest.raises(
            step.NonFiniteError,
            match=re.escape('weight before the step: backbone.blocks.1.ffn.fc1.weight')):
        step.training_step(model, optim_wrapper, *batch(), None)


def test_a_nan_input_shows_as_a_non_finite_loss():
    model, optim_wrapper = classifier()
    images, labels = batch()
    images[1, 0, 5, 5] = float('nan')
    with pytest.raises(step.NonFiniteError, match='non-finite loss: loss holds NaN or inf'):
        step.training_step(model, optim_wrapper, images, labels, None)


def test_the_first_non_finite_gradient_is_named_with_the_count():
    model, optim_wrapper = classifier()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    # Finite loss, infinite gradients in two blocks: the earlier parameter is named.
    for block in (3, 2):
        model.backbone.blocks[block].attn.k_proj.weight.register_hook(
            lambda grad: torch.full_like(grad, float('inf')))
    with pytest.raises(
            step.NonFiniteError,
            match=re.escape('non-finite gradient: backbone.blocks.2.attn.k_proj.weight holds '
                            'NaN or inf (the first of 2 of')):
        step.training_step(model, optim_wrapper, *batch(), None)
    # No optimizer step was taken.
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name


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
