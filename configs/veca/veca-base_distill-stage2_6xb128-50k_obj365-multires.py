# VECA-B stage 2: multi-resolution nested fine-tuning of the stage-1 student, the reference
# `MultiResFinetuneConfig` (veca/config.py, veca/train_multires_finetune.py): one resolution
# per step shared by all ranks (MultiResolutionHook: 256/384/512 with P = 0.35/0.35/0.30 for
# 7k steps, then 256/384/512/768 with 0.15/0.25/0.30/0.30), one core budget per step; 50k
# steps, 7k warm-up from lr_min, cosine 8e-5 -> 3e-5, weight decay 0.01 on every parameter;
# 128 images per GPU at every resolution; bf16 autocast without a loss scaler (stage 1's).
# The loader crops 768 px from a 864 px shorter side and the hook resizes the batch to the
# drawn size (the reference's 1.125x resize-then-crop, same field of view).
# Set load_from to the stage-1 checkpoint (the whole distiller: student, projection, teacher).
_base_ = ['./veca-base_distill-stage1_6xb128-135e_obj365-256px.py']

load_from = 'work_dirs/veca-base_distill-stage1_6xb128-135e_obj365-256px/epoch_135.pth'
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=864, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='RandomCrop', crop_size=768),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='NumpyToPIL', to_rgb=True),
    dict(type='torchvision/TrivialAugmentWide'),
    dict(type='PILToNumpy', to_bgr=True),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    sampler=dict(type='InfiniteSampler', shuffle=True), dataset=dict(pipeline=train_pipeline))

max_iters = 50000
warmup_iters = 7000
lr, lr_min = 8e-5, 3e-5
optim_wrapper = dict(optimizer=dict(lr=lr, weight_decay=0.01))
param_scheduler = [
    dict(
        type='mmlinear.WarmupCosineLR',
        warmup_length=warmup_iters,
        warmup_start_factor=lr_min / lr,
        eta_min_ratio=lr_min / lr,
        warmup_prefix=True,
        by_epoch=False,
        begin=0,
        end=max_iters),
]
train_cfg = dict(_delete_=True, type='IterBasedTrainLoop', max_iters=max_iters)

custom_hooks = [
    dict(type='mmlinear.ElasticCoreBudgetHook'),
    dict(type='mmlinear.MultiResolutionHook'),
]
default_hooks = dict(
    logger=dict(log_metric_by_epoch=False),
    checkpoint=dict(by_epoch=False, interval=10000, max_keep_ckpts=5))
log_processor = dict(by_epoch=False)
