# The demo classifier (infvit-demo-linear_shapes-cls.py) with Linformer attention (Wang et al.,
# 2020: the 65 tokens of a 64 x 64 image, CLS and 8 x 8 patches, projected to 16) in the same
# body and under the same recipe: one side of the InfSA paper's comparison of efficient
# attentions at demo scale (docs/reproduce.md).
_base_ = ['./infvit-demo-linear_shapes-cls.py']

model = dict(backbone=dict(attn_type='linformer', mixer_cfg=dict(proj_len=16)))
