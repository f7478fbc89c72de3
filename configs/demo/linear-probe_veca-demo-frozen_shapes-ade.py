# Demo: the frozen-backbone linear evaluation of configs/veca/linear-probe_* at demo scale. The
# VECA of the classification demo (4 blocks, 96 wide, 8x8 patches, K = 64), frozen whole, and
# mmlinear.LinearHead (BatchNorm + 1 x 1 convolution) on its last block's patch map, on the
# bundled 128x128 ADE-style shapes, evaluated by mIoU. Only the head learns, so the score
# measures how linearly the classifier's features separate the shapes from the background.
# Train the classifier into the default path first:
#   python tools/train.py configs/demo/veca-demo_shapes-cls.py \
#       --work-dir work_dirs/demo/veca-demo_shapes-cls
# or name another checkpoint with --cfg-options model.backbone.init_cfg.checkpoint=PATH.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./upernet_infvit-demo-linear_shapes-ade.py', '../_base_/veca_variables.py']

classifier_checkpoint = 'work_dirs/demo/veca-demo_shapes-cls/epoch_20.pth'
model = dict(
    _delete_=True,
    type='EncoderDecoder',
    data_preprocessor=dict(
        type='mmlinear.PaddingMaskSegDataPreprocessor',
        size={{_base_.crop_size}},
        mean=[127.5] * 3,
        std=[127.5] * 3),
    backbone=dict(
        type='mmlinear.VECA',
        arch={{_base_.veca_demo_arch}},
        patch_size=8,
        active_cores=64,
        out_type='featmap',
        out_indices=(-1, ),
        frozen_stages=4,
        init_cfg=dict(type='Pretrained', checkpoint=classifier_checkpoint, prefix='backbone.')),
    decode_head=dict(
        type='mmlinear.LinearHead',
        in_channels=96,
        num_classes=4,
        norm_cfg=dict(type='BN', requires_grad=True),
        align_corners=False,
        loss_decode=dict(
            type='CrossEntropyLoss', use_sigmoid=False, class_weight={{_base_.class_weight}})),
    train_cfg=dict(),
    test_cfg=dict(mode='whole'))

# The head alone: the InfViT demo's AdamW without its position-table and rho exceptions.
optim_wrapper = dict(paramwise_cfg=dict(_delete_=True))
