# Mask R-CNN 1x on COCO for a plain stride-16 mmlinear backbone: its last map feeds a simple
# pyramid (strides 4-64, 256 channels) in place of FPN, and mmdet's data preprocessor also hands
# each batch's padding mask to the backbone. AdamW as the Swin-T template (lr 1e-4, wd 0.05,
# 1000-iteration warm-up, steps at 8 and 11), clipping 5.0.
# A child sets model.backbone (type and arch), model.neck.in_channels (the backbone width) and
# optim_wrapper.paramwise_cfg (which parameters skip weight decay).
_base_ = ['mmdet::mask_rcnn/mask-rcnn_r50_fpn_1x_coco.py']
custom_imports = dict(imports=['mmlinear.models'], allow_failed_imports=False)

model = dict(
    data_preprocessor=dict(type='mmlinear.PaddingMaskDetDataPreprocessor'),
    backbone=dict(_delete_=True, out_type='featmap', out_indices=(-1, )),
    neck=dict(
        _delete_=True,
        type='mmlinear.SimpleFeaturePyramid',
        out_channels=256,
        scale_factors=(4.0, 2.0, 1.0, 0.5),
        num_outs=5))

max_epochs = 12
train_cfg = dict(max_epochs=max_epochs)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.001, by_epoch=False, begin=0, end=1000),
    dict(type='MultiStepLR', begin=0, end=max_epochs, by_epoch=True, milestones=[8, 11], gamma=0.1)
]
optim_wrapper = dict(
    type='OptimWrapper',
    optimizer=dict(_delete_=True, type='AdamW', lr=0.0001, betas=(0.9, 0.999), weight_decay=0.05),
    clip_grad=dict(max_norm=5.0))
