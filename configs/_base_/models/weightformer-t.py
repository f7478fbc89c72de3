# WeightFormer-T ImageNet classifier: mean-pooled tokens and a linear head, as the reference
# (LeapLabTHU/WeightFormer `VisionTransformer`), with Mixup 0.8 / CutMix 1.0 (switch 0.5) and
# label smoothing 0.1.
custom_imports = dict(imports=['mmlinear.models'], allow_failed_imports=False)
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='mmlinear.WeightFormer',
        arch='t',
        patch_size=16,
        out_type='avg_featmap',
        drop_path_rate=0.0),
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=192,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original'),
        init_cfg=dict(type='TruncNormal', layer='Linear', std=.02, bias=0.)),
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8),
                             dict(type='CutMix', alpha=1.0)]),
)
