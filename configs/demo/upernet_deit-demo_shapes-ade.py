# Demo: the DeiT baseline of the WeightFormer paper's ADE20K comparison at demo scale, on the
# bundled 128x128 ADE-style shapes (background, circle, square, triangle), evaluated by mIoU:
# mmpretrain's VisionTransformer (softmax attention) with the WeightFormer demo's width, depth,
# MLP width and 16x16 patches, 4 heads as the DeiT classification demo, in place of
# WeightFormer; everything else as ./upernet_weightformer-demo_shapes-ade.py (neck, UperNet,
# schedule, AdamW). Weight decay skips the norms, the biases, the position table and the class
# token, as DeiT trains.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./upernet_weightformer-demo_shapes-ade.py']
custom_imports = dict(imports=['mmlinear.models', 'mmpretrain.models'], allow_failed_imports=False)

# Trained from scratch as the WeightFormer demo is: the stride-16 pyramid (strides 4 to 32).
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmpretrain.VisionTransformer',
        arch=dict(embed_dims=96, num_layers=5, num_heads=4, feedforward_channels=384),
        img_size=128,
        patch_size=16,
        out_type='featmap',
        out_indices=-1))  # mmpretrain's ViT rewrites its indices in place: not a tuple

optim_wrapper = dict(
    paramwise_cfg=dict(
        _delete_=True,
        norm_decay_mult=0.,
        bias_decay_mult=0.,
        custom_keys={
            '.pos_embed': dict(decay_mult=0.),
            '.cls_token': dict(decay_mult=0.)
        }))
