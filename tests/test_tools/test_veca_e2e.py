"""End-to-end runs of tools/train.py and tools/test.py with the VECA demo configs (the tiny
'test' VECA preset: 64 wide, 2 blocks) on the tiny shapes sets, one distillation run, and a
few distillation iterations from a (shrunk, random) timm DINOv3 teacher."""
import json
import math
import os
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.hooks import Hook
from mmengine.registry import init_default_scope
from mmengine.runner import Runner, load_checkpoint
from test_train_test_e2e import DEMO, last_checkpoint, run, train_then_test, write_config

from mmlinear.cli import fix_dataloaders
from mmlinear.engine.hooks import ElasticCoreBudgetHook
from mmlinear.registry import MODELS

LOADERS = '''
train_dataloader = dict(batch_size={batch}, num_workers=0, persistent_workers=False,
                        dataset=dict(data_root='{root}'))
val_dataloader = dict(num_workers=0, persistent_workers=False, dataset=dict(data_root='{root}'))
test_dataloader = val_dataloader
'''


def veca_config(tmp_path, data, task):
    """The VECA demo config of ``task`` with the 'test' preset and tiny schedules."""
    if task == 'cls':
        return write_config(
            tmp_path, 'veca_cls.py', f'''
            _base_ = ['{DEMO}/veca-demo_shapes-cls.py']
            model = dict(backbone=dict(arch='test'), head=dict(in_channels=64))
            {LOADERS.format(batch=16, root=f"{data}/cls").strip()}
            train_cfg = dict(max_epochs=1, val_interval=1)
            default_hooks = dict(checkpoint=dict(interval=1))
        '''.replace('\n            ', '\n'))
    if task == 'det':
        return write_config(
            tmp_path, 'veca_det.py', f'''
            _base_ = ['{DEMO}/mask-rcnn_veca-demo_simple-pyramid_shapes-coco.py']
            model = dict(backbone=dict(arch='test'), neck=dict(in_channels=64),
                         test_cfg=dict(rcnn=dict(score_thr=0.0)))
            {LOADERS.format(batch=4, root=f"{data}/coco/").strip()}
            val_evaluator = dict(ann_file='{data}/coco/annotations/instances_val.json')
            test_evaluator = val_evaluator
            train_cfg = dict(max_epochs=1, val_interval=1)
            default_hooks = dict(checkpoint=dict(interval=1))
        '''.replace('\n            ', '\n'))
    return write_config(
        tmp_path, 'veca_seg.py', f'''
        _base_ = ['{DEMO}/upernet_veca-demo_shapes-ade.py']
        model = dict(backbone=dict(arch='test'), neck=dict(in_channels=64),
                     decode_head=dict(in_channels=[16, 32, 64, 64]),
                     auxiliary_head=dict(in_channels=64))
        {LOADERS.format(batch=2, root=f"{data}/ade").strip()}
        train_cfg = dict(max_iters=4, val_interval=4)
        default_hooks = dict(checkpoint=dict(interval=4))
    '''.replace('\n        ', '\n'))


# det and seg take 70-80 s on 2 busy cores (two processes each, mmdet/mmseg imports, COCO
# evaluation); the configs are also built and run forward in tests/test_configs.
@pytest.mark.parametrize('task', [
    'cls',
    pytest.param('det', marks=pytest.mark.slow),
    pytest.param('seg', marks=pytest.mark.slow)
])
def test_veca_train_then_test(task, tiny_data, tmp_path):
    checkpoint = train_then_test(veca_config(tmp_path, tiny_data, task), task, tmp_path)
    # The trained weights are VECA's: the chunked core bank and the coordinate heads.
    state = torch.load(checkpoint, map_location='cpu', weights_only=True)['state_dict']
    assert 'backbone.query_token_chunks.7' in state and 'backbone.pos_alpha' in state


def distill_config(tmp_path, data):
    return write_config(
        tmp_path, 'veca_distill.py', f'''
        _base_ = ['{DEMO}/veca-demo_distill_shapes.py']
        model = dict(student=dict(arch='test'))
        train_dataloader = dict(batch_size=8, num_workers=0, persistent_workers=False,
                                dataset=dict(data_root='{data}/cls'))
        train_cfg = dict(max_epochs=2)
        default_hooks = dict(logger=dict(interval=1), checkpoint=dict(interval=2))
    ''')


def read_train_log(work_dir):
    logs = [
        osp.join(root, name) for root, _, names in os.walk(work_dir) for name in names
        if name.endswith('.json')
    ]
    with open(logs[0]) as f:
        return [json.loads(line) for line in f if 'loss' in line]


def test_veca_distillation_trains_and_its_student_reloads(tiny_data, tmp_path):
    config = distill_config(tmp_path, tiny_data)
    work_dir = str(tmp_path / 'work')
    run(['tools/train.py', config, '--work-dir', work_dir])
    records = read_train_log(work_dir)
    for key in ('loss', 'loss_global', 'loss_patch_cos', 'loss_patch_mse'):
        assert all(math.isfinite(r[key]) for r in records), key
    # Starting from a random student, the distillation loss falls within two epochs.
    assert records[-1]['loss'] < records[0]['loss']
    # The logged budgets are the hook's draws (seed 0 from randomness.seed, shared by rank 0).
    hook = ElasticCoreBudgetHook(seed=0)
    assert [r['active_cores'] for r in records] == [hook.draw(r['iter'] - 1) for r in records]

    # The checkpoint reloads into the distiller, and its student into a VECA classifier.
    checkpoint = last_checkpoint(work_dir)
    cfg = Config.fromfile(config)
    init_default_scope('mmpretrain')
    model = MODELS.build(cfg.model)
    load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    saved = torch.load(checkpoint, map_location='cpu', weights_only=True)['state_dict']
    torch.testing.assert_close(model.student.query_token_chunks[0],
                               saved['student.query_token_chunks.0'])
    backbone = MODELS.build(
        dict(
            type='mmlinear.VECA',
            arch='test',
            out_channels=64,
            out_type='cls_token',
            init_cfg=dict(type='Pretrained', checkpoint=checkpoint, prefix='student.')))
    backbone.init_weights()
    for key, value in backbone.state_dict().items():
        torch.testing.assert_close(value, saved[f'student.{key}'])


class PatchEmbedRecorder(Hook):
    """Keeps the student's and the teacher's patch projections as training starts (after the
    runner initialised the weights) and every iteration's losses."""

    def __init__(self):
        self.at_start = None
        self.losses = []

    def before_train(self, runner):
        model = runner.model
        self.at_start = [
            p.detach().clone() for p in (model.student.patch_embed.proj.weight,
                                         model.teacher.timm_model.patch_embed.proj.weight)
        ]

    def after_train_iter(self, runner, batch_idx, data_batch=None, outputs=None):
        self.losses.append({k: v.item() for k, v in outputs.items()})


def test_distillation_from_a_timm_dinov3_teacher_starts_from_its_patch_embedding(
        tiny_data, tmp_path):
    cfg = Config.fromfile(osp.join(DEMO, 'veca-demo_distill_shapes.py'))
    assert cfg.model.init_patch_embed_from_teacher is True
    # The stage-1 teacher (timm's DINOv3 through TIMMBackbone) shrunk to the student's width
    # (64), random weights; CLS + 4 registers + 16 patches on the 64 px images.
    cfg.model.student.arch = 'test'
    cfg.model.teacher = dict(
        type='mmpretrain.TIMMBackbone',
        model_name='vit_base_patch16_dinov3',
        pretrained=False,
        embed_dim=64,
        depth=2,
        num_heads=2,
        img_size=64)
    cfg.model.teacher_num_register_tokens = 4
    cfg.train_dataloader.update(batch_size=8, num_workers=0, persistent_workers=False)
    cfg.train_dataloader.dataset.data_root = f'{tiny_data}/cls'
    cfg.train_cfg = dict(by_epoch=False, max_iters=4)
    cfg.param_scheduler = []
    cfg.default_hooks.checkpoint = None
    cfg.work_dir = str(tmp_path)
    fix_dataloaders(cfg)
    runner = Runner.from_cfg(cfg)
    recorder = PatchEmbedRecorder()
    runner.register_hook(recorder, priority='LOW')
    runner.train()

    student_start, teacher_start = recorder.at_start
    assert torch.equal(student_start, teacher_start)
    with open(osp.join(runner.log_dir, f'{runner.timestamp}.log')) as f:
        log = f.read()
    assert ('init_patch_embed_from_teacher: copied teacher.timm_model.patch_embed.proj '
            '(weight (64, 3, 16, 16)) into student.patch_embed.proj') in log
    assert len(recorder.losses) == 4
    for record in recorder.losses:
        for key in ('loss_global', 'loss_patch_cos', 'loss_patch_mse'):
            assert math.isfinite(record[key]), (key, record)
    # The student trained away from the copy; the frozen teacher kept its projection.
    model = runner.model
    assert not torch.equal(model.student.patch_embed.proj.weight, student_start)
    assert torch.equal(model.teacher.timm_model.patch_embed.proj.weight, teacher_start)
