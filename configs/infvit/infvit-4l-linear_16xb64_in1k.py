# Linear-InfViT-4L on ImageNet-1K from scratch, the paper's "DeiT recipe, no distillation" as
# mmpretrain's DeiT-B config implements it (configs/infvit/README.md): AdamW 1e-3 at batch
# 1024, wd 0.05 (none on norms, biases, rho, cls_token, pos_embed), 20-epoch warm-up then a
# cosine to 1e-5 over the other 280 epochs, label smoothing 0.1, Mixup 0.8 / CutMix 1.0,
# RandAugment, random erasing, drop path 0.1, EMA. Gradient clipping (5.0) is required: InfSA
# training was unstable without it on the bundled small data (docs/design.md).
_base_ = [
    '../_base_/models/infvit-4l.py',
    'mmpretrain::_base_/datasets/imagenet_bs64_swin_224.py',
    'mmpretrain::_base_/schedules/imagenet_bs1024_adamw_swin.py',
    'mmpretrain::_base_/default_runtime.py',
]

train_dataloader = dict(batch_size=64)

optim_wrapper = dict(
    paramwise_cfg=dict(
        norm_decay_mult=0.0,
        bias_decay_mult=0.0,
        flat_decay_mult=0.0,
        custom_keys={
            '.cls_token': dict(decay_mult=0.0),
            '.pos_embed': dict(decay_mult=0.0),
            '.rho_logit': dict(decay_mult=0.0),
        }),
    clip_grad=dict(max_norm=5.0),
)

custom_hooks = [dict(type='EMAHook', momentum=4e-5, priority='ABOVE_NORMAL')]
