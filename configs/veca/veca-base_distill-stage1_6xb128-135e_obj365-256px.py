# VECA-B stage 1: single-resolution nested distillation from DINOv3 ViT-B/16 on Objects365
# images (labels unused), the reference `PretrainConfig` (veca/config.py) and its training
# loop (veca/train_pretrain.py): 256 px crops (shorter side 288, bicubic), flip,
# TrivialAugmentWide; 6 GPUs x 128 = 768 images per step; 135 epochs, 25 of them a linear
# warm-up from lr_min; cosine 4e-4 -> 5e-5; weight decay 0.015 on every parameter (the core
# bank included); plain bf16 autocast without a loss scaler; no gradient clipping; one core
# budget per step (ElasticCoreBudgetHook); the student's patch projection copied from the
# teacher's. The lr does not follow the batch size (the reference fixes it); auto_scale_lr
# below is opt-in (--auto-scale-lr) and then scales the whole curve, lr_min included.
# Deviation: plain AdamW for every parameter, where the reference uses NorMuon for the 2-D
# block weights and AdamW for the rest (configs/veca/README.md); the effect is unknown.
# Distillation has no predictions, so there is no val/test loop (the reference validates the
# loss at K = 64); evaluate the student with the ImageNet / COCO / ADE20K configs here.
_base_ = [
    '../_base_/models/veca-distill_dinov3-vitb16.py',
    'mmpretrain::_base_/default_runtime.py',
]

data_root = 'data/objects365/'
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=288, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='RandomCrop', crop_size=256),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='NumpyToPIL', to_rgb=True),
    dict(type='torchvision/TrivialAugmentWide'),
    dict(type='PILToNumpy', to_bgr=True),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=128,
    num_workers=10,
    persistent_workers=True,
    drop_last=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    collate_fn=dict(type='default_collate'),
    dataset=dict(
        type='CustomDataset',
        data_root=data_root,
        data_prefix='train',
        with_label=False,
        pipeline=train_pipeline))
val_dataloader = None
val_evaluator = None
val_cfg = None
test_dataloader = None
test_evaluator = None
test_cfg = None

max_epochs = 135
warmup_epochs = 25
lr, lr_min = 4e-4, 5e-5
# bf16 autocast without a GradScaler, as the reference: a disabled scaler leaves the loss
# and the gradients unscaled and never skips a step (bf16 has float32's exponent range).
optim_wrapper = dict(
    type='AmpOptimWrapper',
    dtype='bfloat16',
    loss_scale=dict(enabled=False),
    optimizer=dict(type='AdamW', lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.015))
# The reference's get_cosine_schedule_with_warmup: a linear warm-up from lr_min (not from 0)
# to lr, then a cosine from lr down to lr_min that starts where the warm-up ends; in closed
# form (mmengine's LinearLR would reach lr one warm-up step early).
param_scheduler = [
    dict(
        type='mmlinear.WarmupCosineLR',
        warmup_length=warmup_epochs,
        warmup_start_factor=lr_min / lr,
        eta_min_ratio=lr_min / lr,
        warmup_prefix=True,
        by_epoch=True,
        begin=0,
        end=max_epochs,
        convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs)
auto_scale_lr = dict(base_batch_size=768)

custom_hooks = [dict(type='mmlinear.ElasticCoreBudgetHook')]
# Budgets below 64 leave core chunks without gradients in that step.
model_wrapper_cfg = dict(type='MMDistributedDataParallel', find_unused_parameters=True)
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=50),
    checkpoint=dict(type='CheckpointHook', interval=5, max_keep_ckpts=3))
# The reference seeds 42 + rank; ElasticCoreBudgetHook still shares rank 0's seed.
randomness = dict(seed=42, diff_rank_seed=True)
