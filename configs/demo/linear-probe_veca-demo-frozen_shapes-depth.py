# Demo: the frozen-backbone linear depth evaluation of configs/veca/linear-probe_*_nyu-depth-*
# at demo scale. The frozen VECA of the classification demo (as in
# linear-probe_veca-demo-frozen_shapes-ade.py, whose recipe this keeps) and
# mmlinear.LinearDepthHead (256 bins over 0.001-10 m, scale-invariant log loss, NYUv2's head)
# on its last block's patch map, on the bundled 128x128 depth scenes (mmseg's NYUDataset
# layout: shapes standing on a ground plane 2-6 m away, depth in millimetres), evaluated by
# mmseg's DepthMetric (RMSE, delta1 and the rest; no Eigen crop, which is for NYUv2's 480x640
# frames). Train the classifier into the default path first:
#   python tools/train.py configs/demo/veca-demo_shapes-cls.py \
#       --work-dir work_dirs/demo/veca-demo_shapes-cls
# or name another checkpoint with --cfg-options model.backbone.init_cfg.checkpoint=PATH.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./linear-probe_veca-demo-frozen_shapes-ade.py']

data_root = 'data/shapes/depth'
model = dict(
    type='DepthEstimator',
    data_preprocessor=dict(seg_pad_val=0),
    decode_head=dict(
        _delete_=True,
        type='mmlinear.LinearDepthHead',
        in_channels=96,
        num_bins=256,
        min_depth=0.001,
        max_depth=10.0,
        norm_cfg=dict(type='BN', requires_grad=True),
        align_corners=False,
        loss_decode=dict(type='SiLogLoss')))

meta_keys = ('img_path', 'depth_map_path', 'ori_shape', 'img_shape', 'pad_shape', 'scale_factor',
             'flip', 'flip_direction', 'category_id')
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadDepthAnnotation', depth_rescale_factor=1e-3),
    # Mirroring keeps the ground's slope (top to bottom): the only augmentation that does.
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadDepthAnnotation', depth_rescale_factor=1e-3),
    dict(type='PackSegInputs', meta_keys=meta_keys),
]
train_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='NYUDataset',
        data_root=data_root,
        data_prefix=dict(img_path='images/train', depth_map_path='annotations/train'),
        pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='NYUDataset',
        data_root=data_root,
        test_mode=True,
        data_prefix=dict(img_path='images/test', depth_map_path='annotations/test'),
        pipeline=test_pipeline))
test_dataloader = val_dataloader
val_evaluator = dict(
    _delete_=True, type='DepthMetric', min_depth_eval=0.001, max_depth_eval=10.0, crop_type=None)
test_evaluator = val_evaluator
default_hooks = dict(checkpoint=dict(save_best='rmse', rule='less'))
