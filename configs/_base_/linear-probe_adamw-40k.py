# Frozen-backbone linear evaluation of dense features, without a dataset: the backbone's last
# patch map (stride 16) goes through mmlinear.LinearHead (BatchNorm + 1 x 1 convolution) and
# nothing else learns. The recipe of DINOv2's linear evaluations as mmseg configs: 40k
# iterations at 8 GPUs x 2 images (a child sets the batch), AdamW lr 1e-3 (wd 1e-4), 1.5k
# linear warm-up then poly decay, whole-image inference. The VECA paper states its protocol
# (frozen backbone, linear head, 512 px) but not the optimiser: this is the DINOv2 one, our
# choice.
# A child adds a dataset, data_preprocessor.size, the number of classes, and the backbone
# (frozen, its checkpoint set) with model.decode_head.in_channels = its width.
_base_ = [
    'mmseg::_base_/default_runtime.py',
    'mmseg::_base_/schedules/schedule_40k.py',
]
custom_imports = dict(imports=['mmlinear.models'], allow_failed_imports=False)

model = dict(
    type='EncoderDecoder',
    data_preprocessor=dict(
        type='SegDataPreProcessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        bgr_to_rgb=True,
        pad_val=0,
        seg_pad_val=255),
    decode_head=dict(
        type='mmlinear.LinearHead',
        norm_cfg=dict(type='SyncBN', requires_grad=True),
        align_corners=False,
        loss_decode=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0)),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, betas=(0.9, 0.999), weight_decay=1e-4))
param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=40000, by_epoch=False),
]
