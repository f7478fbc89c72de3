# Demo: UperNet with a Linear-InfViT backbone on the bundled 128x128 ADE-style shapes
# (background, circle, square, triangle), evaluated by mIoU. As the papers fine-tune their
# ImageNet backbones, it starts from the backbone of the classification demo: `init_cfg` loads
# the classifier checkpoint's `backbone.` weights (same 8x8 patches; its 8x8 position table is
# resized to these 16x16 tokens). Train the classifier into the default path first:
#   python tools/train.py configs/demo/infvit-demo-linear_shapes-cls.py \
#       --work-dir work_dirs/demo/infvit-demo-linear_shapes-cls
# or name another checkpoint with --cfg-options model.backbone.init_cfg.checkpoint=PATH
# (`make demo` trains the classifier and passes its checkpoint this way).
# The simple pyramid gives UperNet strides 4, 8 and 16.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = [
    'mmseg::_base_/models/upernet_r50.py',
    'mmseg::_base_/default_runtime.py',
]
custom_imports = dict(imports=['mmlinear.models'], allow_failed_imports=False)

data_root = 'data/shapes/ade'
classes = ('background', 'circle', 'square', 'triangle')
palette = [[0, 0, 0], [220, 20, 60], [0, 128, 255], [255, 200, 0]]
crop_size = (128, 128)
classifier_checkpoint = 'work_dirs/demo/infvit-demo-linear_shapes-cls/epoch_20.pth'
# One process: plain BN (mmengine would also revert SyncBN outside distributed runs).
norm_cfg = dict(type='BN', requires_grad=True)
# Cross-entropy weighted per class by about the square root of the background's pixel share over
# the class's (training split: background 88.3 %, circle 5.5 %, square 3.8 %, triangle 2.4 % of
# the pixels). Unweighted, the classes were learnt in the order of their pixel shares: at
# iteration 150 the UperNet labelled every shape a circle (square and triangle IoU 0.0), and
# whether the triangle was learnt by the end depended on the CPU's floating-point path (mIoU
# 96.8 on an AMD EPYC; 70.0 with triangle IoU 0.1 on an Intel Xeon with AMX). Weighted, every
# class is predicted by iteration 150 (triangle IoU 71.6) and above 90 at the end.
class_weight = [1.0, 4.0, 4.9, 6.0]
model = dict(
    # mmseg's preprocessing (for any number of channels), also handing each batch's padding
    # mask to the backbone.
    data_preprocessor=dict(
        type='mmlinear.PaddingMaskSegDataPreprocessor',
        size=crop_size,
        mean=[127.5] * 3,
        std=[127.5] * 3),
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='mmlinear.InfViT',
        arch='infvit-demo',
        attn_type='linear',
        img_size=128,
        patch_size=8,
        out_type='featmap',
        out_indices=(-1, ),
        init_cfg=dict(type='Pretrained', checkpoint=classifier_checkpoint, prefix='backbone.')),
    neck=dict(type='mmlinear.SimpleFeaturePyramid', in_channels=96, scale_factors=(2.0, 1.0, 0.5)),
    # mmseg's UPerHead (same weights) whose pyramid pooling sees the 8 x 8 cells of the
    # stride-16 top level around each position: the 128-pixel training crop. On a crop that is
    # the whole map, as UPerHead; on a large image every position keeps its training context
    # (whole-image mIoU level with slide mode: docs/large_images.md). 'whole' (e.g.
    # --cfg-options model.decode_head.context_window=whole) pools the whole image instead.
    decode_head=dict(
        type='mmlinear.ContextWindowUPerHead',
        context_window=8,
        in_channels=[48, 96, 96],
        in_index=[0, 1, 2],
        channels=64,
        num_classes=len(classes),
        norm_cfg=norm_cfg,
        loss_decode=dict(class_weight=class_weight)),
    auxiliary_head=dict(
        in_channels=96,
        in_index=1,
        channels=32,
        num_classes=len(classes),
        norm_cfg=norm_cfg,
        loss_decode=dict(class_weight=class_weight)))

dataset = dict(
    type='BaseSegDataset',
    data_root=data_root,
    metainfo=dict(classes=classes, palette=palette),
    img_suffix='.jpg',
    seg_map_suffix='.png',
    reduce_zero_label=False)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    batch_size=8,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='InfiniteSampler', shuffle=True),
    dataset=dict(
        **dataset,
        data_prefix=dict(img_path='images/training', seg_map_path='annotations/training'),
        pipeline=train_pipeline))
val_dataloader = dict(
    batch_size=1,
    num_workers=2,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        **dataset,
        data_prefix=dict(img_path='images/validation', seg_map_path='annotations/validation'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
test_evaluator = val_evaluator

max_iters = 450
train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters, val_interval=max_iters)
val_cfg = dict(type='ValLoop')
test_cfg = dict(type='TestLoop')
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=2e-3, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=dict(
        custom_keys={
            'pos_embed': dict(decay_mult=0.),
            'cls_token': dict(decay_mult=0.),
            'rho_logit': dict(decay_mult=0.),
        }),
    clip_grad=dict(max_norm=1.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=50),
    dict(type='PolyLR', eta_min=1e-5, power=1.0, begin=50, end=max_iters, by_epoch=False),
]
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=50, log_metric_by_epoch=False),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', by_epoch=False, interval=max_iters, max_keep_ckpts=2),
    sampler_seed=dict(type='DistSamplerSeedHook'),
    visualization=dict(type='SegVisualizationHook'))
randomness = dict(seed=0)
