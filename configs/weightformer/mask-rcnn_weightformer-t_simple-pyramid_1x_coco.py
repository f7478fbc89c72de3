# Mask R-CNN 1x on COCO with WeightFormer-T (the reference releases no detection recipe)
# through a simple pyramid, AdamW as the Swin-T template (the shared recipe in ../_base_/) with
# the reference weight-decay groups (no decay on 1-D parameters and biases, including the
# dynamic layers' `.b`), drop path 0.1. To start from an ImageNet checkpoint
# (tools/model_converters/weightformer2mmlinear.py or configs/weightformer/), add
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.').
_base_ = ['../_base_/mask-rcnn_simple-pyramid_adamw_1x_coco.py']

model = dict(
    backbone=dict(type='mmlinear.WeightFormer', arch='t', patch_size=16, drop_path_rate=0.1),
    neck=dict(in_channels=192))

optim_wrapper = dict(paramwise_cfg=dict(norm_decay_mult=0., bias_decay_mult=0., flat_decay_mult=0.))
