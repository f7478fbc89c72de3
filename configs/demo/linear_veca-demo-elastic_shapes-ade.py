# Demo: VECA's elasticity on a dense task where the core budget matters. The 4-block, 96-wide
# VECA of the demos (8x8 patches) and mmlinear.LinearHead (BatchNorm + 1 x 1 convolution) on
# its last block's patch map, trained END TO END from scratch with nested core budgets on the
# bundled 128x128 ADE-style shapes (background, circle, square, triangle), evaluated by mIoU.
# Why this task: in VECA, patches exchange information only through the cores (patches
# attend to the cores alone; the MLP is per token), and the linear head reads one token per
# position, so whatever a patch knows beyond its own 8x8 pixels has come through the cores.
# The shapes' colours are drawn independently of their kind, and more than half of the
# shapes' pixels lie in 8x8 patches wholly inside one shape (radii 12-30 px), which are one
# flat colour: such a patch can tell its shape's kind only from the rest of the shape, i.e.
# through the cores. Every iteration draws one budget from {8, 16, ..., 64} with the
# reference's weights (ElasticCoreBudgetHook), so one set of weights serves every budget;
# validation runs at 64. tools/analysis_tools/elastic_sweep.py evaluates it per budget
# (docs/reproduce.md, "Elasticity on a dense task").
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./linear-probe_veca-demo-frozen_shapes-ade.py']

model = dict(backbone=dict(frozen_stages=-1, init_cfg=None))

# The whole model learns: the UperNet VECA demo's AdamW (no decay on the norms; the core bank
# is decayed, as in the reference).
optim_wrapper = dict(paramwise_cfg=dict(norm_decay_mult=0.0))

custom_hooks = [dict(type='mmlinear.ElasticCoreBudgetHook')]

max_iters = 1200
train_cfg = dict(max_iters=max_iters, val_interval=400)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=50),
    dict(type='PolyLR', eta_min=1e-5, power=1.0, begin=50, end=max_iters, by_epoch=False),
]
default_hooks = dict(checkpoint=dict(interval=max_iters))
