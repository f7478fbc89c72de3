# The DeiT-S baseline of WeightFormer-S's ADE20K comparison (the WeightFormer paper reports mIoU
# 44.0 for DeiT-S against 45.6 for WeightFormer-S with the same neck and schedule):
# mmpretrain's VisionTransformer (arch 'deit-small') in place of WeightFormer-S, and everything
# else as ./upernet_weightformer-s_8xb2-160k_ade20k-512x512.py: the simple pyramid, UperNet,
# 160k iterations, AdamW, drop path 0.2. Weight decay skips the norms, the biases, the position
# table and the class token, as DeiT trains. To start from an ImageNet DeiT-S checkpoint of
# mmpretrain, add
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.').
_base_ = [
    '../_base_/upernet_simple-pyramid_adamw_160k_ade20k-512x512.py', '../_base_/deit_variables.py'
]
custom_imports = dict(imports=['mmlinear.models', 'mmpretrain.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        type='mmpretrain.VisionTransformer',
        arch='deit-small',
        img_size=512,
        patch_size=16,
        drop_path_rate=0.2,
        out_indices=-1),  # mmpretrain's ViT rewrites its indices in place: not a tuple
    neck=dict(in_channels=384),
    decode_head=dict(in_channels=[96, 192, 384, 384]),
    auxiliary_head=dict(in_channels=384))

optim_wrapper = dict(paramwise_cfg={{_base_.deit_paramwise_cfg}})
