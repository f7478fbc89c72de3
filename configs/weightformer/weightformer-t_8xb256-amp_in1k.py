# WeightFormer-T on ImageNet-1K from scratch, the reference recipe (WeightFormer spec 6.1):
# 8 GPUs x 256 (global 2048), AdamW lr 2e-3 (5e-4 per 512 images), wd 0.05, betas
# (0.9, 0.999), eps 1e-8; no decay on 1-D parameters and biases (LayerNorms, biases, the
# dynamic layers' `.b`) while the dynamic `w`, `w1`, `w2` are decayed (spec 9.5, 13.5);
# 20-epoch linear warm-up from 2e-6 then per-iteration cosine to 2e-5 over 300 epochs;
# gradient clipping 5.0; fp16 AMP; Mixup 0.8 / CutMix 1.0, label smoothing 0.1,
# RandAugment m9-mstd0.5, random erasing 0.25; no EMA; drop path 0 (T).
# Evaluation: square bicubic resize to 256 x 256, then a 224 centre crop.
_base_ = [
    '../_base_/models/weightformer-t.py',
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
]

img_size = 224
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(img_size * 256 // 224, ) * 2, backend='pillow',
         interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=img_size),
    dict(type='PackInputs'),
]
train_dataloader = dict(batch_size=256)
val_dataloader = dict(batch_size=256, dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

optim_wrapper = dict(
    type='AmpOptimWrapper',
    optimizer=dict(type='AdamW', lr=5e-4 * 2048 / 512, weight_decay=0.05, eps=1e-8,
                   betas=(0.9, 0.999)),
    paramwise_cfg=dict(
        _delete_=True,
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        # every 1-D parameter, which catches the dynamic layers' `.b` (not named `.bias`)
        flat_decay_mult=0.0),
    clip_grad=dict(max_norm=5.0),
)
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-3, by_epoch=True, end=20,
         convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=2e-5, by_epoch=True, begin=20,
         convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=300, val_interval=1)
auto_scale_lr = dict(base_batch_size=2048)
randomness = dict(seed=0)
