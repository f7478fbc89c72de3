# Demo: UperNet with a VECA backbone on the bundled 128x128 ADE-style shapes (background,
# circle, square, triangle), evaluated by mIoU: the InfViT demo with the 4-block, 96-wide VECA
# of the classification demo (16x16 patches, C = 64).
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./upernet_infvit-demo-linear_shapes-ade.py']

veca_demo_arch = dict(embed_dims=96, num_layers=4, num_heads=2, feedforward_channels=256)
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmlinear.VECA',
        arch=veca_demo_arch,
        patch_size=16,
        active_cores=64,
        out_type='featmap',
        out_indices=(-1, )),
    neck=dict(in_channels=96))

optim_wrapper = dict(
    paramwise_cfg=dict(
        _delete_=True,
        norm_decay_mult=0.0,
        custom_keys={
            'query_token_chunks': dict(decay_mult=0.0),
            'qcoord_chunks': dict(decay_mult=0.0),
            'pos_alpha': dict(decay_mult=0.0),
        }))
