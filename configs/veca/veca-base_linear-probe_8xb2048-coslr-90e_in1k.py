# Frozen VECA-B (K = 64) linear probe on ImageNet-1K: the global token (core 0 after the
# final norm) through a BatchNorm neck and a linear head, mmpretrain's MAE linear-probe recipe
# (mae/benchmarks/vit-base-p16_8xb2048-linear-coslr-90e_in1k.py: LARS lr 6.4 at 8 x 2048,
# 10-epoch warm-up, cosine over 90 epochs, no weight decay, fp16 AMP with a dynamic loss
# scale). The paper reports a frozen-backbone ImageNet result (81.93 top-1) but not its
# protocol (linear or k-NN, which features, schedule): this is one common choice.
# Set the checkpoint: a distillation checkpoint of configs/veca/ (prefix 'student.') or a
# released reference checkpoint after tools/model_converters/veca2mmlinear.py.
_base_ = [
    '../_base_/models/veca-base.py',
    'mmpretrain::_base_/datasets/imagenet_bs32_pil_resize.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
]

model = dict(
    backbone=dict(
        frozen_stages=12,
        init_cfg=dict(
            type='Pretrained',
            checkpoint='work_dirs/veca-base_distill-stage2_6xb128-50k_obj365-multires/'
            'iter_50000.pth',
            prefix='student.')),
    neck=dict(_delete_=True, type='ClsBatchNormNeck', input_features=768),
    head=dict(init_cfg=[dict(type='TruncNormal', layer='Linear', std=0.01)]))

train_dataloader = dict(batch_size=2048, drop_last=True)
optim_wrapper = dict(
    _delete_=True,
    type='AmpOptimWrapper',
    optimizer=dict(type='LARS', lr=6.4, weight_decay=0.0, momentum=0.9))
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-4,
        by_epoch=True,
        begin=0,
        end=10,
        convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        T_max=80,
        by_epoch=True,
        begin=10,
        end=90,
        eta_min=0.0,
        convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=90)
auto_scale_lr = dict(base_batch_size=16384)
default_hooks = dict(checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=3))
randomness = dict(seed=0, diff_rank_seed=True)
