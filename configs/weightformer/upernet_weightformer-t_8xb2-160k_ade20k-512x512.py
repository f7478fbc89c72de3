# UperNet on ADE20K (512x512 crops, 160k iterations) with WeightFormer-T (no reference
# segmentation recipe exists) through a simple pyramid, AdamW as the Swin-T template
# (the shared recipe in ../_base_/) with the reference weight-decay groups (no decay on 1-D
# parameters and biases, including the dynamic layers' `.b`), drop path 0.1. To start from an
# ImageNet checkpoint, add
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.').
_base_ = ['../_base_/upernet_simple-pyramid_adamw_160k_ade20k-512x512.py']

model = dict(
    backbone=dict(type='mmlinear.WeightFormer', arch='t', patch_size=16, drop_path_rate=0.1),
    neck=dict(in_channels=192),
    decode_head=dict(in_channels=[48, 96, 192, 192]),
    auxiliary_head=dict(in_channels=192))

optim_wrapper = dict(paramwise_cfg=dict(norm_decay_mult=0., bias_decay_mult=0., flat_decay_mult=0.))
