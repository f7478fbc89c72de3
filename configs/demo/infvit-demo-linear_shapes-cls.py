# Demo: Linear-InfViT classifier on the bundled 64x64 shapes (circle / square / triangle).
# The detection and segmentation demos start from its backbone (their init_cfg reads
# work_dirs/demo/infvit-demo-linear_shapes-cls/epoch_20.pth, where `make demo` writes it).
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['mmpretrain::_base_/default_runtime.py']
custom_imports = dict(imports=['mmlinear.models'], allow_failed_imports=False)

data_root = 'data/shapes/cls'
num_classes = 3
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='mmlinear.InfViT',
        arch='infvit-demo',
        attn_type='linear',
        img_size=64,
        patch_size=8,
        out_type='avg_featmap'),
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=num_classes,
        in_channels=96,
        loss=dict(type='CrossEntropyLoss', loss_weight=1.0),
        topk=(1, )))

data_preprocessor = dict(num_classes=num_classes, mean=[127.5] * 3, std=[127.5] * 3, to_rgb=True)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
test_pipeline = [dict(type='LoadImageFromFile'), dict(type='PackInputs')]
train_dataloader = dict(
    batch_size=64,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=True),
    dataset=dict(
        type='CustomDataset', data_root=data_root, data_prefix='train', pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=100,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='CustomDataset', data_root=data_root, data_prefix='val', pipeline=test_pipeline))
val_evaluator = dict(type='Accuracy', topk=(1, ))
test_dataloader = val_dataloader
test_evaluator = val_evaluator

# InfSA needs gradient clipping and a warm-up to train stably (docs/design.md).
optim_wrapper = dict(
    optimizer=dict(type='AdamW', lr=2e-3, weight_decay=0.05),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={
            '.cls_token': dict(decay_mult=0.0),
            '.pos_embed': dict(decay_mult=0.0)
        }),
    clip_grad=dict(max_norm=1.0))
max_epochs = 20
# One cycle: 10% warm-up to the peak, then cosine annealing.
param_scheduler = [
    dict(
        type='OneCycleLR',
        eta_max=2e-3,
        pct_start=0.1,
        by_epoch=True,
        begin=0,
        end=max_epochs,
        convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=10)
val_cfg = dict()
test_cfg = dict()
default_hooks = dict(
    logger=dict(type='LoggerHook', interval=20),
    checkpoint=dict(type='CheckpointHook', interval=10, max_keep_ckpts=2))
randomness = dict(seed=0)
