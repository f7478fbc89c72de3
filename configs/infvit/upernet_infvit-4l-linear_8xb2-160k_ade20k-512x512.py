# UperNet on ADE20K (512x512 crops, 160k iterations) with Linear-InfViT-4L through a simple
# pyramid, AdamW as the Swin-T template (the shared recipe in ../_base_/), no decay on norms /
# positions / rho. To start from an ImageNet checkpoint of configs/infvit/, add
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.').
_base_ = ['../_base_/upernet_simple-pyramid_adamw_160k_ade20k-512x512.py']

model = dict(
    backbone=dict(
        type='mmlinear.InfViT',
        arch='infvit-4l',
        attn_type='linear',
        img_size=512,
        patch_size=16,
        drop_path_rate=0.1),
    neck=dict(in_channels=1024),
    decode_head=dict(in_channels=[256, 512, 1024, 1024]),
    auxiliary_head=dict(in_channels=1024))

optim_wrapper = dict(
    paramwise_cfg=dict(
        custom_keys={
            'pos_embed': dict(decay_mult=0.),
            'cls_token': dict(decay_mult=0.),
            'rho_logit': dict(decay_mult=0.),
            'norm': dict(decay_mult=0.),
            'ln': dict(decay_mult=0.),
        }))
