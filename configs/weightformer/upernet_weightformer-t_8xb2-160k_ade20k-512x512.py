# UperNet on ADE20K (512x512 crops, 160k iterations, 8 GPUs x 2 images) with WeightFormer-T
# (no reference segmentation recipe exists, spec 6.3): AdamW as the Swin-T template (lr 6e-5,
# wd 0.01, 1500-iteration warm-up, then linear decay) with the reference weight-decay groups
# (no decay on 1-D parameters and biases, including the dynamic layers' `.b`), clipping 5.0,
# drop path 0.1. The stride-16 map goes through a simple pyramid (strides 4/8/16/32). To
# start from an ImageNet checkpoint, add
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.').
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
        type='mmlinear.WeightFormer',
        arch='t',
        patch_size=16,
        out_type='featmap',
        out_indices=(-1, ),
        drop_path_rate=0.1),
    neck=dict(
        type='mmlinear.SimpleFeaturePyramid',
        in_channels=192,
        scale_factors=(4.0, 2.0, 1.0, 0.5)),
    decode_head=dict(in_channels=[48, 96, 192, 192], num_classes=150),
    auxiliary_head=dict(in_channels=192, in_index=2, num_classes=150))

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.00006, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=dict(norm_decay_mult=0., bias_decay_mult=0., flat_decay_mult=0.),
    clip_grad=dict(max_norm=5.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=160000, by_epoch=False)
]

train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
