# Shared DeiT baseline settings as plain variables (no `model`, no `optim_wrapper`), for the
# WeightFormer comparisons whose configs inherit those from the WeightFormer / simple-pyramid
# bases. List this file among a config's `_base_` and use {{_base_.<name>}} as a value.

# Weight decay as DeiT trains: none on the norms, the biases, the position table and the class
# token.
deit_paramwise_cfg = dict(
    norm_decay_mult=0.,
    bias_decay_mult=0.,
    custom_keys={
        '.pos_embed': dict(decay_mult=0.),
        '.cls_token': dict(decay_mult=0.)
    })
# The same in place of the groups a base sets (the WeightFormer demos' include the 1-D dynamic
# parameters): `_delete_` where the base has groups, and only there (mmengine keeps the key
# when the base has nothing to delete).
deit_replacing_paramwise_cfg = dict(_delete_=True, **deit_paramwise_cfg)

# The DeiT of the bundled-data dense demos: mmpretrain's VisionTransformer (softmax attention)
# with the WeightFormer demo's width, depth, MLP width and 16x16 patches, 4 heads as the DeiT
# classification demo, its last block's map.
deit_demo_dense_backbone = dict(
    _delete_=True,
    type='mmpretrain.VisionTransformer',
    arch=dict(embed_dims=96, num_layers=5, num_heads=4, feedforward_channels=384),
    img_size=128,
    patch_size=16,
    out_type='featmap',
    out_indices=-1)  # mmpretrain's ViT rewrites its indices in place: not a tuple
