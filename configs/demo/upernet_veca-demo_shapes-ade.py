# Demo: UperNet with a VECA backbone on the bundled 128x128 ADE-style shapes (background,
# circle, square, triangle), evaluated by mIoU: the InfViT demo with the 4-block, 96-wide VECA
# of the classification demo (16x16 patches, C = 64).
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./upernet_infvit-demo-linear_shapes-ade.py', '../_base_/veca_variables.py']

model = dict(backbone={{_base_.veca_demo_dense_backbone}}, neck=dict(in_channels=96))

# No decay on the norms; the core bank is decayed, as in the reference.
optim_wrapper = dict(paramwise_cfg=dict(_delete_=True, norm_decay_mult=0.0))
