# WeightFormer-B on ImageNet-1K: the S architecture trained from scratch at 448 x 448 with the
# T / S recipe (weightformer-t_8xb256-amp_in1k.py), drop path 0.2, in fp32 (the reference's
# cfg/wfm_b.yaml does not enable AMP).
# Evaluation: square bicubic resize to 512 x 512, then a 448 centre crop.
_base_ = ['./weightformer-t_8xb256-amp_in1k.py']

model = dict(backbone=dict(arch='b', drop_path_rate=0.2), head=dict(in_channels=384))

img_size = 448
bgr_mean = [103.53, 116.28, 123.675]
bgr_std = [57.375, 57.12, 58.395]
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomResizedCrop', scale=img_size, backend='pillow', interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(
        type='RandAugment',
        policies='timm_increasing',
        num_policies=2,
        total_level=10,
        magnitude_level=9,
        magnitude_std=0.5,
        hparams=dict(pad_val=[round(x) for x in bgr_mean], interpolation='bicubic')),
    dict(
        type='RandomErasing',
        erase_prob=0.25,
        mode='rand',
        min_area_ratio=0.02,
        max_area_ratio=1 / 3,
        fill_color=bgr_mean,
        fill_std=bgr_std),
    dict(type='PackInputs'),
]
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
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader

optim_wrapper = dict(type='OptimWrapper')
