# Demo: VECA's elasticity on a dense task whose labels need the whole image. The UperNet VECA
# demo on the bundled "pairs" scenes (3-5 discs, 6 colours, more than a 16-pixel patch apart):
# a disc is "paired" when another disc in the image has its colour and "single" when none
# has, so nothing near a disc tells its label. Trained with nested core budgets (the paper's
# elastic training): every iteration draws one budget from {8, 16, ..., 64} with the
# reference's weights (ElasticCoreBudgetHook), so one set of weights serves every budget;
# validation runs at 64. tools/analysis_tools/elastic_sweep.py evaluates it per budget.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./upernet_veca-demo_shapes-ade.py']

classes = ('background', 'paired', 'single')
palette = [[0, 0, 0], [0, 200, 120], [230, 60, 60]]
# About the square root of the background's pixel share over the class's (training split:
# background 90.3 %, paired 4.1 %, single 5.6 %), as the shapes demo weighs its classes.
class_weight = [1.0, 4.7, 4.0]
# Only the cores may carry a disc's colour to the other discs: the head keeps to a
# neighbourhood. Without the stride-32 level (whose 3x3 convolutions see 3/4 of a 4 x 4 map)
# and with a pyramid pooling of the 8 x 8 top map to its own size (the default (1, 2, 3, 6)
# would hand every pixel the image's average), the head's receptive field is a few patches.
model = dict(
    neck=dict(scale_factors=(4.0, 2.0, 1.0)),
    decode_head=dict(
        # The pyramid pooling of the whole map, not the VECA demo's window of 4 cells (of its
        # stride-32 level; this top level has stride 16).
        context_window='whole',
        in_channels=[24, 48, 96],
        in_index=[0, 1, 2],
        pool_scales=(8, ),
        num_classes=len(classes),
        loss_decode=dict(class_weight=class_weight)),
    auxiliary_head=dict(num_classes=len(classes), loss_decode=dict(class_weight=class_weight)))

dataset = dict(data_root='data/shapes/pairs', metainfo=dict(classes=classes, palette=palette))
train_dataloader = dict(dataset=dataset)
val_dataloader = dict(dataset=dataset)
test_dataloader = val_dataloader

custom_hooks = [dict(type='mmlinear.ElasticCoreBudgetHook')]

max_iters = 1500
train_cfg = dict(max_iters=max_iters, val_interval=500)
param_scheduler = [
    dict(type='LinearLR', start_factor=0.01, by_epoch=False, begin=0, end=50),
    dict(type='PolyLR', eta_min=1e-5, power=1.0, begin=50, end=max_iters, by_epoch=False),
]
default_hooks = dict(checkpoint=dict(interval=max_iters))
