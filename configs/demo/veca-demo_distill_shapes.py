# Demo: nested VECA distillation (stage-1 recipe of configs/veca/) on the bundled 64x64 shapes
# images (labels unused): a random 2-block, 64-wide mmpretrain ViT teacher with 16x16 patches
# (CLS + 16 patch tokens after its final norm) distilled into the 4-block, 96-wide VECA of the
# classification demo (16x16 patches; its output projection maps 96 -> 64). One core budget
# per iteration (ElasticCoreBudgetHook), plain AdamW in float32, warm-up from lr_min then
# cosine, as stage 1. No val loop: distillation has no predictions.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = [
    '../veca/veca-base_distill-stage1_6xb128-135e_obj365-256px.py', '../_base_/veca_variables.py'
]

model = dict(
    student=dict(
        _delete_=True,
        type='mmlinear.VECA',
        arch={{_base_.veca_demo_arch}},
        patch_size=16,
        active_cores=64),
    teacher=dict(
        _delete_=True,
        type='mmpretrain.VisionTransformer',
        arch=dict(embed_dims=64, num_layers=2, num_heads=2, feedforward_channels=128),
        img_size=64,
        patch_size=16,
        out_type='raw'),
    teacher_num_register_tokens=0,
    data_preprocessor=dict(mean=[127.5] * 3, std=[127.5] * 3))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    batch_size=64,
    num_workers=2,
    dataset=dict(data_root='data/shapes/cls', data_prefix='train', pipeline=train_pipeline))

max_epochs = 4
lr, lr_min = 2e-3, 2e-4
optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.015),
    clip_grad=dict(max_norm=1.0))
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=lr_min / lr,
        by_epoch=True,
        begin=0,
        end=1,
        convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        T_max=max_epochs - 1,
        eta_min=lr_min,
        by_epoch=True,
        begin=1,
        end=max_epochs,
        convert_to_iter_based=True),
]
train_cfg = dict(max_epochs=max_epochs)
default_hooks = dict(
    logger=dict(interval=10), checkpoint=dict(interval=max_epochs, max_keep_ckpts=1))
randomness = dict(seed=0, diff_rank_seed=False)
