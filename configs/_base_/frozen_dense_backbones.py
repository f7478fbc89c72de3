# The frozen backbones of the linear dense evaluations (configs/veca/linear-probe*), as
# variables that a config picks with {{_base_.NAME}}. Both are frozen whole and give their last
# block's patch tokens after the final norm as a stride-16 map, 768 wide (the ImageNet probe of
# DINOv3 takes its class token instead: the last variable).
# VECA-B at K = 64 from the stage-2 distillation (configs/veca/; a released reference
# checkpoint after tools/model_converters/veca2mmlinear.py takes prefix 'backbone.').
veca_base_frozen = dict(
    type='mmlinear.VECA',
    arch='base',
    active_cores=64,
    out_type='featmap',
    out_indices=(-1, ),
    frozen_stages=12,
    init_cfg=dict(
        type='Pretrained',
        checkpoint='work_dirs/veca-base_distill-stage2_6xb128-50k_obj365-multires/'
        'iter_50000.pth',
        prefix='student.'))
# VECA's padded batches keep padding out of the cores (mmseg's preprocessing, with the mask).
veca_data_preprocessor = dict(type='mmlinear.PaddingMaskSegDataPreprocessor')
# The DINOv3 ViT-B/16 teacher of the distillation, through timm (the weights as in
# configs/veca/README.md, "teacher").
dinov3_vitb16_frozen = dict(
    type='mmlinear.TimmViTFeatures',
    model_name='vit_base_patch16_dinov3.lvd1689m',
    checkpoint_path='checkpoints/dinov3-vitb16-lvd1689m_timm.safetensors',
    frozen=True,
    # Test images resized to a 512 short side need not be multiples of 16: pad them to whole
    # patches at the bottom / right, as VECA does.
    model_kwargs=dict(dynamic_img_pad=True))
dinov3_data_preprocessor = dict(type='SegDataPreProcessor')
# The same DINOv3 giving its class token after the final norm, 768 wide, in place of an image
# classifier's backbone (the ImageNet probe; `_delete_` drops the base config's backbone).
dinov3_vitb16_frozen_cls_token = dict(_delete_=True, **dinov3_vitb16_frozen, out_type='cls_token')
