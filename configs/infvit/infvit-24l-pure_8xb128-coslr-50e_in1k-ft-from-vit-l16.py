# Pure-InfViT-24L fine-tuned on ImageNet-1K from a pretrained ViT-L/16 whose attention was
# swapped for Pure InfSA by tools/model_converters/vit2infvit.py (infvit-24l has the ViT-L/16
# shape: width 1024, 24 layers, 16 heads, MLP 4096; every weight but rho comes from the ViT,
# rho starts at 0.95). Convert first (configs/infvit/README.md), e.g. from timm's
# vit_large_patch16_224.augreg_in21k_ft_in1k:
#   python tools/model_converters/vit2infvit.py model.safetensors \
#       checkpoints/infvit-24l-pure_from-vit-l16.pth --attn-type pure
# The backbone loads the converted file's ``backbone.*`` weights; the head starts afresh.
# Recipe: mmpretrain's ViT-L/16 fine-tuning (configs/mae/benchmarks/
# vit-large-p16_8xb128-coslr-50e_in1k.py): AdamW 4e-3 at batch 1024 with layer-wise lr decay
# 0.75, wd 0.05 (none on norms, biases, CLS token, positions, rho), 5 warm-up epochs then a
# cosine to 1e-6 over 45, drop path 0.2, RandAugment, random erasing, Mixup / CutMix, label
# smoothing 0.1, no EMA; plus gradient clipping 5.0, as every InfViT config. The converted
# ViT keeps its CLS token and final norm, so the head classifies the CLS token. Untrained here.
_base_ = './infvit-24l-pure_16xb64_in1k.py'

pretrained = 'checkpoints/infvit-24l-pure_from-vit-l16.pth'
model = dict(
    backbone=dict(
        drop_path_rate=0.2,
        init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.')))

train_dataloader = dict(batch_size=128)
val_dataloader = dict(batch_size=128)
test_dataloader = val_dataloader

optim_wrapper = dict(
    optimizer=dict(lr=4e-3),
    constructor='LearningRateDecayOptimWrapperConstructor',
    paramwise_cfg=dict(layer_decay_rate=0.75))

max_epochs = 50
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-4,
        by_epoch=True,
        begin=0,
        end=5,
        convert_to_iter_based=True),
    dict(
        type='CosineAnnealingLR',
        T_max=max_epochs - 5,
        eta_min=1e-6,
        by_epoch=True,
        begin=5,
        end=max_epochs,
        convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs)
custom_hooks = []
