"""InfViT with the efficient-attention baselines in its body: the backbone trains (every
parameter gets a finite gradient), Linformer's projection follows ``img_size``, and the
models of the three toolboxes build and train on the demo data."""
import os.path as osp

import pytest
import torch
from conftest import DEMO_TASKS
from demo_training import train_demo_briefly
from mmengine.runner import Runner

from mmlinear.models.backbones import InfViT
from mmlinear.models.layers.mixers import EFFICIENT_ATTENTIONS

BASELINES = list(EFFICIENT_ATTENTIONS)


@pytest.mark.parametrize('attn_type', BASELINES)
def test_every_parameter_gets_a_finite_gradient(attn_type):
    torch.manual_seed(0)
    model = InfViT(
        arch='test', attn_type=attn_type, img_size=48, patch_size=8, out_type='featmap').double()
    feats = model(torch.randn(2, 3, 48, 40, dtype=torch.float64))[-1]
    assert feats.shape == (2, 32, 6, 5)
    feats.square().mean().backward()
    for name, param in model.named_parameters():
        assert param.grad is not None and torch.isfinite(param.grad).all(), name


def test_linformer_projects_the_tokens_of_img_size():
    model = InfViT(arch='test', attn_type='linformer', img_size=32, patch_size=8)
    mixer = model.blocks[0].attn.mixer
    assert (mixer.max_tokens, mixer.proj_len) == (1 + 16, 4)
    assert InfViT(
        arch='test', attn_type='linformer', mixer_cfg=dict(proj_len=3), img_size=32,
        patch_size=8).blocks[1].attn.mixer.proj_len == 3
    model(torch.randn(1, 3, 24, 32))  # fewer tokens: the projection's first columns
    with pytest.raises(ValueError, match='at most max_tokens=17 tokens.*got 21'):
        model(torch.randn(1, 3, 32, 40))


def test_performer_features_are_kept_in_the_checkpoint():
    torch.manual_seed(0)
    model = InfViT(arch='test', attn_type='performer')
    torch.manual_seed(1)
    other = InfViT(arch='test', attn_type='performer')
    key = 'blocks.0.attn.mixer.projection'
    assert not torch.equal(model.state_dict()[key], other.state_dict()[key])
    other.load_state_dict(model.state_dict())
    x = torch.randn(1, 3, 32, 32)
    torch.testing.assert_close(other.eval()(x), model.eval()(x))


def test_interactions_per_layer_are_the_mixers():
    model = InfViT(arch='test', attn_type='nystromformer', mixer_cfg=dict(num_landmarks=8))
    # 64 x 64 with 16-pixel patches: 16 patches and the CLS token, more than 8 landmarks.
    assert model.attention_interactions((1, 3, 64, 64)) == [2 * 17 * 8 + 64] * 2
    assert InfViT(
        arch='test', attn_type="performer").attention_interactions((1, 3, 64, 64)) == [0, 0]
    # 4 agents: the 17 x 4 broadcast and 4 x 17 aggregation kernels.
    agent = InfViT(arch='test', attn_type='agent', mixer_cfg=dict(num_agents=4))
    assert agent.attention_interactions((1, 3, 64, 64)) == [2 * 17 * 4] * 2


def short_training(task: str, attn_type: str, data_root: str, work_dir: str) -> Runner:
    """Two training iterations of the demo config of ``task`` with ``attn_type``, from random
    weights (the fine-tuning demos otherwise start from the classifier's checkpoint)."""
    name, root, _ = DEMO_TASKS[task]
    return train_demo_briefly(name, osp.join(data_root, root), work_dir, attn_type=attn_type)


def check_trains(task, attn_type, tiny_data, tmp_path):
    runner = short_training(task, attn_type, tiny_data, str(tmp_path))
    backbone = runner.model.backbone
    assert backbone.attn_type == attn_type and runner.iter == 2
    for name, param in backbone.named_parameters():
        assert torch.isfinite(param).all(), name


@pytest.mark.parametrize('attn_type', BASELINES)
def test_classifier_trains_on_the_demo_data(attn_type, tiny_data, tmp_path):
    check_trains('cls', attn_type, tiny_data, tmp_path)


# One baseline per dense toolbox in the default suite, every other one with --run-slow.
@pytest.mark.parametrize('task,attn_type', [
    pytest.param(
        task,
        attn_type,
        marks=() if
        (task, attn_type) in (('det', 'performer'), ('seg', 'nystromformer')) else pytest.mark.slow)
    for task in ('det', 'seg') for attn_type in BASELINES
])
def test_detector_and_segmentor_train_on_the_demo_data(task, attn_type, tiny_data, tmp_path):
    check_trains(task, attn_type, tiny_data, tmp_path)
