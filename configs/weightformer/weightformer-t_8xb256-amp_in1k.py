# WeightFormer-T on ImageNet-1K from scratch, the reference recipe (its `config.py` defaults,
# `cfg/wfm_t.yaml` and `main.py`): 8 GPUs x 256 (global 2048), AdamW, wd 0.05, betas
# (0.9, 0.999), eps 1e-8; no decay on 1-D parameters and biases (LayerNorms, biases, the
# dynamic layers' `.b`) while the dynamic `w`, `w1`, `w2` are decayed (the reference's
# `set_weight_decay_and_lr`); the lr follows the total batch as the reference's linear
# scaling rule: base 5e-4, warm-up start 5e-7 and floor 5e-6 per 512 images (2e-3, 2e-6 and
# 2e-5 at 2048); timm's per-iteration cosine over all 300 epochs with a 20-epoch linear
# warm-up replacing its start (warmup_prefix=False); gradient clipping 5.0; fp16 AMP with a
# dynamic loss scale; Mixup 0.8 / CutMix 1.0, label smoothing 0.1, RandAugment m9-mstd0.5,
# random erasing 0.25; no EMA; drop path 0 (T).
# Evaluation: square bicubic resize to 256 x 256, then a 224 centre crop.
_base_ = [
    '../_base_/models/weightformer-t.py',
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
]

# mmlinear.engine registers the learning-rate schedule below.
custom_imports = dict(imports=['mmlinear.models', 'mmlinear.engine'], allow_failed_imports=False)

img_size = 224
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(
        type='Resize',
        scale=(img_size * 256 // 224, ) * 2,
        backend='pillow',
        interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=img_size),
    dict(type='PackInputs'),
]
train_dataloader = dict(batch_size=256)
val_dataloader = dict(batch_size=256, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

optim_wrapper = dict(
    type='AmpOptimWrapper',
    optimizer=dict(
        type='AdamW', lr=5e-4 * 2048 / 512, weight_decay=0.05, eps=1e-8, betas=(0.9, 0.999)),
    paramwise_cfg=dict(
        _delete_=True,
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        # every 1-D parameter, which catches the dynamic layers' `.b` (not named `.bias`)
        flat_decay_mult=0.0),
    clip_grad=dict(max_norm=5.0),
)
# mmlinear.WarmupCosineLR as timm's CosineLRScheduler (warmup_prefix=False) that the
# reference updates after every optimizer step (lag_one_step); warm-up start and floor are
# relative to the lr, so that auto_scale_lr scales the base, warm-up and minimum lr together.
param_scheduler = [
    dict(
        type='mmlinear.WarmupCosineLR',
        warmup_length=20,
        warmup_start_factor=1e-3,
        eta_min_ratio=1e-2,
        warmup_prefix=False,
        lag_one_step=True,
        by_epoch=True,
        begin=0,
        end=300,
        convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=300, val_interval=1)
# On by default: the reference always scales the lr by (total batch / 512); the lr above is
# the value at the base batch size 2048.
auto_scale_lr = dict(base_batch_size=2048, enable=True)
randomness = dict(seed=0)
