"""mmlinear.apis.training_step: one checked training step (forward, backward, optimizer
step), the first non-finite tensor named."""
import math
import re

import pytest
import torch
from mmengine.optim import build_optim_wrapper

from mmlinear.apis import build_classifier
from mmlinear.apis.training_step import NonFiniteError, classifier_config, training_step

CONFIG = 'configs/demo/infvit-demo-linear_shapes-cls.py'


def classifier(with_cp=False):
    """The demo classifier at its seeded initial weights, in training mode, and its
    optimizer wrapper."""
    cfg = classifier_config(CONFIG, with_cp)
    torch.manual_seed(0)
    model = build_classifier(cfg).train()
    return model, build_optim_wrapper(model, cfg.optim_wrapper)


def batch():
    images = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    return images, torch.tensor([0, 2])


def test_a_step_is_finite_and_updates_the_weights():
    model, optim_wrapper = classifier()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    result = training_step(model, optim_wrapper, *batch(), None)
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
    loss = training_step(plain, plain_optim, *batch(), None)['loss']
    assert training_step(checkpointed, cp_optim, *batch(), None)['loss'] == loss
    for (name, p), q in zip(plain.named_parameters(), checkpointed.parameters()):
        torch.testing.assert_close(q, p, msg=name)


def test_a_nan_weight_is_named_before_the_step():
    model, optim_wrapper = classifier()
    with torch.no_grad():
        model.backbone.blocks[1].ffn.fc1.weight[0, 0] = float('nan')
    with pytest.raises(
            NonFiniteError,
            match=re.escape('weight before the step: backbone.blocks.1.ffn.fc1.weight')):
        training_step(model, optim_wrapper, *batch(), None)


def test_a_nan_input_shows_as_a_non_finite_loss():
    model, optim_wrapper = classifier()
    images, labels = batch()
    images[1, 0, 5, 5] = float('nan')
    with pytest.raises(NonFiniteError, match='non-finite loss: loss holds NaN or inf'):
        training_step(model, optim_wrapper, images, labels, None)


def test_the_first_non_finite_gradient_is_named_with_the_count():
    model, optim_wrapper = classifier()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    # Finite loss, infinite gradients in two blocks: the earlier parameter is named.
    for block in (3, 2):
        model.backbone.blocks[block].attn.k_proj.weight.register_hook(
            lambda grad: torch.full_like(grad, float('inf')))
    with pytest.raises(
            NonFiniteError,
            match=re.escape('non-finite gradient: backbone.blocks.2.attn.k_proj.weight holds '
                            'NaN or inf (the first of 2 of')):
        training_step(model, optim_wrapper, *batch(), None)
    # No optimizer step was taken.
    for name, p in model.named_parameters():
        assert torch.equal(p, before[name]), name
