# UperNet for a plain stride-16 mmlinear backbone, without a dataset: its last map goes through
# a simple pyramid (strides 4/8/16/32, widths C/4, C/2, C, C), and the data preprocessor
# (mmseg's, for any number of channels) also hands each batch's padding mask to the backbone.
# AdamW as the Swin-T template (lr 6e-5, wd 0.01), clipping 5.0, in mmseg's 160k-iteration
# loop (a child may shorten it). A child adds a dataset (e.g.
# ./upernet_simple-pyramid_adamw_160k_ade20k-512x512.py),
# data_preprocessor.size, the number of classes and the learning-rate schedule, and sets
# model.backbone (type and arch), the widths
# model.neck.in_channels = C, model.decode_head.in_channels = [C/4, C/2, C, C],
# model.auxiliary_head.in_channels = C, and optim_wrapper.paramwise_cfg (which parameters
# skip weight decay).
_base_ = [
    'mmseg::_base_/models/upernet_r50.py',
    'mmseg::_base_/default_runtime.py',
    'mmseg::_base_/schedules/schedule_160k.py',
]
custom_imports = dict(imports=['mmlinear.models'], allow_failed_imports=False)

model = dict(
    data_preprocessor=dict(type='mmlinear.PaddingMaskSegDataPreprocessor'),
    pretrained=None,
    backbone=dict(_delete_=True, out_type='featmap', out_indices=(-1, )),
    neck=dict(type='mmlinear.SimpleFeaturePyramid', scale_factors=(4.0, 2.0, 1.0, 0.5)),
    auxiliary_head=dict(in_index=2))

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=0.00006, betas=(0.9, 0.999), weight_decay=0.01),
    clip_grad=dict(max_norm=5.0))
