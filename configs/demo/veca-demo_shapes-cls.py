# Demo: VECA classifier on the bundled 64x64 shapes (circle / square / triangle): a 4-block,
# 96-wide VECA (2 heads of 48) with 8x8 patches (64 patches, up to 64 cores), classified from
# the global token (core 0) at the full budget. The rest is the InfViT demo.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./infvit-demo-linear_shapes-cls.py', '../_base_/veca_variables.py']

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmlinear.VECA',
        arch={{_base_.veca_demo_arch}},
        patch_size=8,
        active_cores=64,
        out_type='cls_token'),
    head=dict(in_channels=96))

# No decay on norms, biases and 1-D parameters; the core bank is decayed, as in the reference.
optim_wrapper = dict(
    paramwise_cfg=dict(
        _delete_=True, norm_decay_mult=0.0, bias_decay_mult=0.0, flat_decay_mult=0.0))
