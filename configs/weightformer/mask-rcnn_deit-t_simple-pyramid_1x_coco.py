# The DeiT-T baseline of WeightFormer-T's COCO comparison (the WeightFormer paper reports box /
# mask AP 44.4 / 38.1 for DeiT-T against 45.0 / 38.3 for WeightFormer-T with the same neck and
# schedule): mmpretrain's VisionTransformer (arch 'deit-tiny', its position table interpolated
# to each batch's grid) in place of WeightFormer-T, and everything else as
# ./mask-rcnn_weightformer-t_simple-pyramid_1x_coco.py: the simple pyramid from the last map,
# the 1x schedule, AdamW, drop path 0.1. Weight decay skips the norms, the biases, the position
# table and the class token, as DeiT trains. The ViT attends to the padding of a batch (it takes
# no padding mask), as every mmdet ViT does. To start from an ImageNet DeiT-T checkpoint of
# mmpretrain, add
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.').
_base_ = ['../_base_/mask-rcnn_simple-pyramid_adamw_1x_coco.py', '../_base_/deit_variables.py']
custom_imports = dict(imports=['mmlinear.models', 'mmpretrain.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmpretrain.VisionTransformer',
        arch='deit-tiny',
        patch_size=16,
        drop_path_rate=0.1,
        out_indices=-1),  # mmpretrain's ViT rewrites its indices in place: not a tuple
    neck=dict(in_channels=192))

optim_wrapper = dict(paramwise_cfg={{_base_.deit_paramwise_cfg}})
