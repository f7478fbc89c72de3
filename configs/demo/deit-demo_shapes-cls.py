# Demo: the DeiT baseline of the WeightFormer paper at demo scale, on the bundled 64x64 shapes
# (circle / square / triangle): mmpretrain's VisionTransformer with the InfViT demo's width
# and depth (C = 96, 4 blocks, 4 heads, MLP 384, 8x8 patches), softmax attention, classified
# from its class token as DeiT is. The rest (data, schedule, optimiser) is the InfViT demo.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./infvit-demo-linear_shapes-cls.py']
custom_imports = dict(imports=['mmlinear.models', 'mmpretrain.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmpretrain.VisionTransformer',
        arch=dict(embed_dims=96, num_layers=4, num_heads=4, feedforward_channels=384),
        img_size=64,
        patch_size=8,
        out_type='cls_token'),
    head=dict(in_channels=96))
