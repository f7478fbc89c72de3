# Demo: WeightFormer classifier on the bundled 64x64 shapes (circle / square / triangle).
# A 5-block, 96-wide WeightFormer (blocks 1 and 4 dynamic) with 8x8 patches: WeightFormer-T
# (17 blocks, C = 192) is about 30x slower per step on CPU. The rest is the InfViT demo.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./infvit-demo-linear_shapes-cls.py']

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmlinear.WeightFormer',
        arch=dict(embed_dims=96, num_layers=5, feedforward_channels=384),
        patch_size=8,
        out_type='avg_featmap'),
    head=dict(in_channels=96))

optim_wrapper = dict(
    paramwise_cfg=dict(_delete_=True, norm_decay_mult=0., bias_decay_mult=0., flat_decay_mult=0.))
