# Mask R-CNN 1x on COCO with VECA-B at K = 64 through a simple pyramid, AdamW as the Swin-T
# template (the shared recipe in ../_base_/), no decay on norms (the core bank is decayed, as
# in the reference distillation). The paper reports no COCO result; this config is provided
# untrained. Start from a distilled student with
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='student.').
_base_ = ['../_base_/mask-rcnn_simple-pyramid_adamw_1x_coco.py']

model = dict(
    backbone=dict(type='mmlinear.VECA', arch='base', active_cores=64), neck=dict(in_channels=768))

optim_wrapper = dict(paramwise_cfg=dict(norm_decay_mult=0.0))
