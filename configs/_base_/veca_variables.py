# Shared VECA settings as plain variables (no `model`, no `optim_wrapper`), for configs that
# already inherit those from another base: mmengine refuses two bases that set the same key.
# List this file among a config's `_base_` and use {{_base_.<name>}} as a value.

# There is deliberately no VECA-specific no-decay list: the reference's AdamW decays every
# parameter, the core bank (tokens and coordinates) and the coordinate gains included, so the
# VECA configs exclude from weight decay only what their recipe template excludes (norms and,
# in the classification recipes, biases and other 1-D parameters).

# The VECA of the bundled-data demos: 4 blocks, 96 wide, 2 heads.
veca_demo_arch = dict(embed_dims=96, num_layers=4, num_heads=2, feedforward_channels=256)

# It replaces the InfViT backbone of the detection and segmentation demos: 16x16 patches, the
# full budget of 64 cores, the last block's map. img_size is the demos' 128-pixel training
# image, the 8 x 8 grid that spans the RoPE frame: the 'tile' and 'extend' position policies
# lay that frame on larger images (the default 'interpolate' ignores it).
veca_demo_dense_backbone = dict(
    _delete_=True,
    type='mmlinear.VECA',
    arch=veca_demo_arch,
    img_size=128,
    patch_size=16,
    active_cores=64,
    out_type='featmap',
    out_indices=(-1, ))
