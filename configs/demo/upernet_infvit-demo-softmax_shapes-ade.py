# Demo: the dense ViT beside the UperNet VECA demo (upernet_veca-demo_shapes-ade.py), for the
# resolution sweep's comparison: the same recipe, neck, heads and data, and a softmax-attention
# ViT of VECA's width, depth, heads, MLP width and patch size (96 wide, 4 blocks, 2 heads, MLP
# 256, 16x16 patches), trained from scratch as VECA is. Only the token mixing and the positions
# differ: every patch attends to every patch (N^2 interactions against VECA's 2NK + K^2), and
# positions are a learned table made for 128 px and interpolated at other sizes (VECA's RoPE
# needs no table).
# mmlinear.InfViT with attn_type='softmax' rather than mmpretrain's VisionTransformer: its
# 'featmap' output is the last block's patch map after the final norm, (B, 96, H/16, W/16), the
# map VECA gives the simple pyramid, and it reads the padding mask the data preprocessor
# attaches to the batch, as VECA does.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./upernet_veca-demo_shapes-ade.py']

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmlinear.InfViT',
        arch={{_base_.veca_demo_arch}},
        attn_type='softmax',
        img_size={{_base_.crop_size}},
        patch_size=16,
        out_type='featmap',
        out_indices=(-1, )))
