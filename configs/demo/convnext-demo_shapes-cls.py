# Demo: the isotropic ConvNeXt baseline of the WeightFormer paper at demo scale, on the bundled
# 64x64 shapes (circle / square / triangle): mmpretrain's ConvNeXt as one stage (no
# downsampling after the 8x8 patchify stem) with the DeiT demo's width and depth (C = 96,
# 4 blocks; MLP 4C = 384 as ConvNeXt's inverted bottleneck), 7x7 depthwise convolutions,
# classified from the averaged map. The rest (data, schedule, optimiser) is the InfViT demo.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./infvit-demo-linear_shapes-cls.py']
custom_imports = dict(imports=['mmlinear.models', 'mmpretrain.models'], allow_failed_imports=False)

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmpretrain.ConvNeXt',
        arch=dict(depths=[4], channels=[96]),
        stem_patch_size=8,
        # mmpretrain maps -1 to the fourth stage: the one stage is named by its index
        out_indices=0,
        # no layer scale, as the isotropic ConvNeXts train
        layer_scale_init_value=0.),
    head=dict(in_channels=96))
