# UperNet on ADE20K (512x512 crops, 160k iterations, 8 GPUs x 2 images) with VECA-B at C = 64,
# AdamW as the Swin-T template (lr 6e-5, wd 0.01, none on norms and the core bank,
# 1500-iteration warm-up, then linear decay). The stride-16 map goes through a simple pyramid
# (strides 4/8/16/32). The paper reports no ADE20K result; this config is provided untrained.
# Start from a distilled student with
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='student.').
_base_ = [
    'mmseg::_base_/models/upernet_r50.py',
    'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py',
    'mmseg::_base_/schedules/schedule_160k.py',
]
custom_imports = dict(imports=['mmlinear.models'], allow_failed_imports=False)

crop_size = (512, 512)
# mmseg's preprocessor, also handing each batch's padding mask to the backbone.
data_preprocessor = dict(type='mmlinear.PaddingMaskSegDataPreprocessor', size=crop_size)
model = dict(
    data_preprocessor=data_preprocessor,
    pretrained=None,
    backbone=dict(
        _delete_=True,
        type='mmlinear.VECA',
        arch='base',
        active_cores=64,
        out_type='featmap',
        out_indices=(-1, )),
    neck=dict(
        type='mmlinear.SimpleFeaturePyramid',
        in_channels=768,
        scale_factors=(4.0, 2.0, 1.0, 0.5)),
    decode_head=dict(in_channels=[192, 384, 768, 768], num_classes=150),
    auxiliary_head=dict(in_channels=768, in_index=2, num_classes=150))

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.00006, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        custom_keys={
            'query_token_chunks': dict(decay_mult=0.),
            'qcoord_chunks': dict(decay_mult=0.),
            'pos_alpha': dict(decay_mult=0.),
        }),
    clip_grad=dict(max_norm=5.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=160000, by_epoch=False)
]

train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
