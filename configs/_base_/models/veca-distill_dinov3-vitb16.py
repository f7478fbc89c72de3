# VECA-B distilled from a frozen DINOv3 ViT-B/16, as the reference. The teacher is timm's
# DINOv3 (RoPE, layer scale, 4 register tokens: mmpretrain's VisionTransformer cannot hold it)
# through mmpretrain's TIMMBackbone, which returns every token after the final norm. Needs
# `pip install timm` (a release with the DINOv3 models) and the timm weights in
# checkpoints/ (see configs/veca/README.md). Inputs use the ImageNet mean/std, as the reference.
# The student's patch projection starts as a copy of the teacher's (same shape for VECA-B and
# ViT-B/16), as the reference's `init_patch_from_dinov3`; a student of another width keeps its
# own initialisation, and the log says so.
custom_imports = dict(
    imports=['mmlinear.models', 'mmlinear.engine.hooks'], allow_failed_imports=False)
model = dict(
    type='mmlinear.VECADistiller',
    student=dict(type='mmlinear.VECA', arch='base', active_cores=64),
    teacher=dict(
        type='mmpretrain.TIMMBackbone',
        model_name='vit_base_patch16_dinov3.lvd1689m',
        pretrained=False,
        checkpoint_path='checkpoints/dinov3-vitb16-lvd1689m_timm.safetensors'),
    teacher_num_register_tokens=4,
    init_patch_embed_from_teacher=True,
    loss=dict(type='mmlinear.VECADistillLoss', dense_weight=1.0, mse_weight=1.0),
    data_preprocessor=dict(
        type='mmpretrain.ClsDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        to_rgb=True))
