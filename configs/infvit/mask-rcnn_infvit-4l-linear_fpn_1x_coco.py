# Mask R-CNN 1x on COCO with Linear-InfViT-4L, AdamW as the Swin-T template
# (lr 1e-4, wd 0.05, no decay on norms / positions / rho, 1000-iteration warm-up, steps at 8 and
# 11). The plain stride-16 backbone feeds a simple pyramid (strides 4-64, 256 channels) in
# place of FPN. To start from an ImageNet checkpoint of configs/infvit/, add
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.').
_base_ = ['mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py']
custom_imports = dict(imports=['mmlinear.models'], allow_failed_imports=False)

model = dict(
    # mmdet's preprocessor, also handing each batch's padding mask to the backbone.
    data_preprocessor=dict(type='mmlinear.PaddingMaskDetDataPreprocessor'),
    backbone=dict(
        _delete_=True,
        type='mmlinear.InfViT',
        arch='infvit-4l',
        attn_type='linear',
        img_size=224,
        patch_size=16,
        out_type='featmap',
        out_indices=(-1, ),
        drop_path_rate=0.1),
    neck=dict(
        _delete_=True,
        type='mmlinear.SimpleFeaturePyramid',
        in_channels=1024,
        out_channels=256,
        scale_factors=(4.0, 2.0, 1.0, 0.5),
        num_outs=5))

max_epochs = 12
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=1000),
    dict(
        type='MultiStepLR',
        begin=0,
        end=max_epochs,
        by_epoch=True,
        milestones=[8, 11],
        gamma=0.1)
]
optim_wrapper = dict(
    type='OptimWrapper',
    paramwise_cfg=dict(
        custom_keys={
            'pos_embed': dict(decay_mult=0.),
            'cls_token': dict(decay_mult=0.),
            'rho_logit': dict(decay_mult=0.),
            'norm': dict(decay_mult=0.),
            'ln': dict(decay_mult=0.),
        }),
    optimizer=dict(
        _delete_=True, type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.05),
    clip_grad=dict(max_norm=5.0))
