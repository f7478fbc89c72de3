# VECA-B fine-tuned end to end on ImageNet-1K at K = 64 from a distilled checkpoint:
# mmpretrain's Swin/DeiT-style recipe (AdamW 1e-3 at batch 1024, wd 0.05 with none on norms,
# biases and 1-D parameters; the core bank is decayed, as in the reference distillation;
# 5-epoch warm-up, cosine over 100 epochs, RandAugment, random erasing, Mixup 0.8 / CutMix
# 1.0, label smoothing 0.1). The paper reports no fine-tuning result; this config is provided
# untrained.
_base_ = [
    '../_base_/models/veca-base.py',
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
]

model = dict(
    backbone=dict(
        init_cfg=dict(
            type='Pretrained',
            checkpoint='work_dirs/veca-base_distill-stage2_6xb128-50k_obj365-multires/'
            'iter_50000.pth',
            prefix='student.')),
    head=dict(
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=[dict(type='TruncNormal', layer='Linear', std=2e-5)]),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8),
                             dict(type='CutMix', alpha=1.0)]))

train_dataloader = dict(batch_size=128)
val_dataloader = dict(batch_size=128)
test_dataloader = val_dataloader
optim_wrapper = dict(optimizer=dict(lr=1e-3), clip_grad=dict(max_norm=5.0))
max_epochs = 100
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=5, convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        T_max=max_epochs - 5,
        eta_min=1e-6,
        by_epoch=True,
        begin=5,
        end=max_epochs,
        convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs)
