# The linear depth evaluation on NYUv2 (mmseg's NYUDataset, 512 x 512 crops): mmseg's
# DepthEstimator with mmlinear.LinearDepthHead (256 bins over 0.001-10 m, read out as AdaBins,
# scale-invariant log loss) on the frozen backbone, and mmseg's DepthMetric (RMSE and the
# rest, Eigen crop). mmseg's training pipeline with its albumentations colour jitter replaced
# by PhotoMetricDistortion (albumentations is not in the stack). A child sets the backbone.
_base_ = [
    'mmseg::_base_/datasets/nyu_512x512.py',
    './linear-probe_adamw-40k.py',
    './frozen_dense_backbones.py',
]
crop_size = (512, 512)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadDepthAnnotation', depth_rescale_factor=1e-3),
    dict(type='RandomDepthMix', prob=0.25),
    dict(type='RandomFlip', prob=0.5),
    dict(type='RandomResize', scale=(768, 512), ratio_range=(0.8, 1.5), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size),
    dict(type='PhotoMetricDistortion'),
    dict(
        type='PackSegInputs',
        meta_keys=('img_path', 'depth_map_path', 'ori_shape', 'img_shape', 'pad_shape',
                   'scale_factor', 'flip', 'flip_direction', 'category_id')),
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
model = dict(
    type='DepthEstimator',
    data_preprocessor=dict(size=crop_size, seg_pad_val=0),
    decode_head=dict(
        _delete_=True,
        type='mmlinear.LinearDepthHead',
        num_bins=256,
        min_depth=0.001,
        max_depth=10.0,
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        loss_decode=dict(type='SiLogLoss')))
default_hooks = dict(checkpoint=dict(save_best='rmse', rule='less', max_keep_ckpts=1))
