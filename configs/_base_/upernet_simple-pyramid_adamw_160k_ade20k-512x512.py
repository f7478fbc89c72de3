# UperNet on ADE20K (512x512 crops, 160k iterations, 8 GPUs x 2 images) for a plain stride-16
# mmlinear backbone: its last map goes through a simple pyramid (strides 4/8/16/32, widths
# C/4, C/2, C, C), and mmseg's data preprocessor also hands each batch's padding mask to the
# backbone. AdamW as the Swin-T template (lr 6e-5, wd 0.01, 1500-iteration warm-up, then
# linear decay), clipping 5.0.
# A child sets model.backbone (type and arch), the widths model.neck.in_channels = C,
# model.decode_head.in_channels = [C/4, C/2, C, C], model.auxiliary_head.in_channels = C, and
# optim_wrapper.paramwise_cfg (which parameters skip weight decay).
_base_ = [
    'mmseg::_base_/models/upernet_r50.py',
    'mmseg::_base_/datasets/ade20k.py',
    'mmseg::_base_/default_runtime.py',
    'mmseg::_base_/schedules/schedule_160k.py',
]
custom_imports = dict(imports=['mmlinear.models'], allow_failed_imports=False)

crop_size = (512, 512)
data_preprocessor = dict(type='mmlinear.PaddingMaskSegDataPreprocessor', size=crop_size)
model = dict(
    data_preprocessor=data_preprocessor,
    pretrained=None,
    backbone=dict(_delete_=True, out_type='featmap', out_indices=(-1, )),
    neck=dict(type='mmlinear.SimpleFeaturePyramid', scale_factors=(4.0, 2.0, 1.0, 0.5)),
    decode_head=dict(num_classes=150),
    auxiliary_head=dict(in_index=2, num_classes=150))

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.00006, betas=(0.9, 0.999), weight_decay=0.01),
    clip_grad=dict(max_norm=5.0))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=160000, by_epoch=False)
]

train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
