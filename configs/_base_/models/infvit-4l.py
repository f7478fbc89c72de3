# InfViT-4L ImageNet classifier (Linear-InfSA by default): the DeiT head and augments.
custom_imports = dict(imports=['mmlinear.models'], allow_failed_imports=False)
model = dict(
    type='ImageClassifier',
    backbone=dict(
        type='mmlinear.InfViT',
        arch='infvit-4l',
        attn_type='linear',
        img_size=224,
        patch_size=16,
        out_type='cls_token',
        drop_path_rate=0.1),
    neck=None,
    head=dict(
        type='VisionTransformerClsHead',
        num_classes=1000,
        in_channels=1024,
        loss=dict(type='LabelSmoothLoss', label_smooth_val=0.1, mode='original')),
    init_cfg=[
        dict(type='TruncNormal', layer='Linear', std=.02),
        dict(type='Constant', layer='LayerNorm', val=1., bias=0.),
    ],
    train_cfg=dict(augments=[dict(type='Mixup', alpha=0.8),
                             dict(type='CutMix', alpha=1.0)]),
)
