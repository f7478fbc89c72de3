# The ConvNeXt-S baseline of the WeightFormer paper's ImageNet-1K comparison: the isotropic
# ConvNeXt-S of the ConvNeXt paper (its Section 3.3: 18 blocks, 384 wide, one 16x16 patchify
# stem and no downsampling, like a ViT-S), which the paper places at 79.7 top-1 against 81.3
# for WeightFormer-S. mmpretrain's ConvNeXt as one stage, in mmpretrain's ConvNeXt-S recipe
# (300 epochs, AdamW lr 4e-3 at batch 4096, wd 0.05 with none on the norms, biases and 1-D
# parameters, RandAugment, random erasing, Mixup 0.8 / CutMix 1.0, label smoothing 0.1, EMA
# 1e-4) with the ConvNeXt reference's isotropic-S settings: drop path 0.1, no layer scale, a
# 50-epoch warm-up, and its single-machine batch of 8 GPUs x 128 with gradients accumulated
# over 4 iterations (4096 per step; leave --auto-scale-lr off, which would count 1024).
# One difference from the reference model: mmpretrain's stem ends in a LayerNorm, the
# reference's isotropic stem is the patchify convolution alone.
_base_ = 'mmpretrain::convnext/convnext-small_32xb128_in1k.py'

model = dict(
    backbone=dict(
        arch=dict(_delete_=True, depths=[18], channels=[384]),
        stem_patch_size=16,
        # mmpretrain maps -1 to the fourth stage: the one stage is named by its index
        out_indices=0,
        drop_path_rate=0.1,
        layer_scale_init_value=0.),
    head=dict(in_channels=384))

optim_wrapper = dict(accumulative_counts=4)
warmup_epochs = 50
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=1e-3,
        by_epoch=True,
        end=warmup_epochs,
        convert_to_iter_based=True),
    dict(type='CosineAnnealingLR', eta_min=1e-5, by_epoch=True, begin=warmup_epochs)
]
# The reference averages the weights once per optimizer step (decay 0.9999): every 4 iterations.
custom_hooks = [dict(type='EMAHook', momentum=1e-4, interval=4, priority='ABOVE_NORMAL')]
