# Demo: UperNet with a WeightFormer backbone on the bundled 128x128 ADE-style shapes
# (background, circle, square, triangle), evaluated by mIoU: the InfViT demo with a 5-block,
# 96-wide WeightFormer and the reference weight-decay groups (no decay on 1-D parameters,
# including the dynamic `.b`).
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./upernet_infvit-demo-linear_shapes-ade.py']

# A 16x16-patch backbone trained from scratch: the stride-16 pyramid (strides 4 to 32), not the
# InfViT demo's (8x8 patches, started from the classifier).
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmlinear.WeightFormer',
        arch=dict(embed_dims=96, num_layers=5, feedforward_channels=384),
        patch_size=16,
        out_type='featmap',
        out_indices=(-1, )),
    neck=dict(in_channels=96, scale_factors=(4.0, 2.0, 1.0, 0.5)),
    decode_head=dict(
        # The pyramid pooling's window of the 128-pixel training crop: 4 x 4 cells of this
        # stride-32 top level (the InfViT demo's 8 are of a stride-16 level); measured better
        # than the whole image's pooling on large scenes (docs/large_images.md).
        context_window=4,
        in_channels=[24, 48, 96, 96],
        in_index=[0, 1, 2, 3]),
    auxiliary_head=dict(in_index=2))

optim_wrapper = dict(
    paramwise_cfg=dict(_delete_=True, norm_decay_mult=0., bias_decay_mult=0., flat_decay_mult=0.))
