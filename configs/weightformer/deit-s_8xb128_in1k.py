# The DeiT-S baseline of the WeightFormer paper's ImageNet-1K comparison (the paper places
# DeiT-S at 79.8 top-1, DeiT's own number, against 81.3 for WeightFormer-S): mmpretrain's
# DeiT-S recipe unchanged (mmpretrain's VisionTransformer, arch 'deit-small', 300 epochs,
# AdamW lr 1e-3 at batch 1024, wd 0.05 with none on the norms, biases, position table and
# class token, a 20-epoch warm-up then cosine (mmpretrain's Swin schedule), RandAugment,
# random erasing, Mixup 0.8 / CutMix 1.0, label smoothing 0.1, gradient clipping 5.0; no drop
# path and no EMA, as mmpretrain trains the small DeiTs) on 8 GPUs x 128 instead of 4 x 256:
# the same total batch, so the same learning rate.
_base_ = 'mmpretrain::deit/deit-small_4xb256_in1k.py'

train_dataloader = dict(batch_size=128)
