# UperNet on ADE20K (512x512 crops, 160k iterations) with VECA-B at K = 64 through a simple
# pyramid, AdamW as the Swin-T template (the shared recipe in ../_base_/), no decay on norms
# (the core bank is decayed, as in the reference distillation). The paper reports no ADE20K
# result; this config is provided untrained. Start from a distilled student with
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='student.').
_base_ = ['../_base_/upernet_simple-pyramid_adamw_160k_ade20k-512x512.py']

model = dict(
    backbone=dict(type='mmlinear.VECA', arch='base', active_cores=64),
    neck=dict(in_channels=768),
    decode_head=dict(in_channels=[192, 384, 768, 768]),
    auxiliary_head=dict(in_channels=768))

optim_wrapper = dict(paramwise_cfg=dict(norm_decay_mult=0.0))
