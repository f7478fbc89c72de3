# Shared VECA settings as plain variables (no `model`, no `optim_wrapper`), for configs that
# already inherit those from another base: mmengine refuses two bases that set the same key.
# List this file among a config's `_base_` and use {{_base_.<name>}} as a value.

# No weight decay on the core bank (tokens and coordinates) and the coordinate gains, as the
# reference (paramwise_cfg.custom_keys).
veca_no_decay_keys = {
    'query_token_chunks': dict(decay_mult=0.0),
    'qcoord_chunks': dict(decay_mult=0.0),
    'pos_alpha': dict(decay_mult=0.0),
}

# The VECA of the bundled-data demos: 4 blocks, 96 wide, 2 heads.
veca_demo_arch = dict(embed_dims=96, num_layers=4, num_heads=2, feedforward_channels=256)

# It replaces the InfViT backbone of the detection and segmentation demos: 16x16 patches, the
# full budget of 64 cores, the last block's map.
veca_demo_dense_backbone = dict(
    _delete_=True,
    type='mmlinear.VECA',
    arch=veca_demo_arch,
    patch_size=16,
    active_cores=64,
    out_type='featmap',
    out_indices=(-1, ))
