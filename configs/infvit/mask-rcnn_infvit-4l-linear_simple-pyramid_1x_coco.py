# Mask R-CNN 1x on COCO with Linear-InfViT-4L through a simple pyramid, AdamW as the Swin-T
# template (the shared recipe in ../_base_/), no decay on norms / positions / rho. To start from
# an ImageNet checkpoint of configs/infvit/, add
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.').
_base_ = ['../_base_/mask-rcnn_simple-pyramid_adamw_1x_coco.py']

model = dict(
    backbone=dict(
        type='mmlinear.InfViT',
        arch='infvit-4l',
        attn_type='linear',
        img_size=224,
        patch_size=16,
        drop_path_rate=0.1),
    neck=dict(in_channels=1024))

optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys={
            'pos_embed': dict(decay_mult=0.),
            'cls_token': dict(decay_mult=0.),
            'rho_logit': dict(decay_mult=0.),
            'norm': dict(decay_mult=0.),
            'ln': dict(decay_mult=0.),
        }))
