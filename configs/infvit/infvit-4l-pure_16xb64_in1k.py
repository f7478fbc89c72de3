# Pure-InfViT-4L: the Linear-InfViT-4L recipe with Pure InfSA (O(N^2) Katz/Neumann hop).
_base_ = './infvit-4l-linear_16xb64_in1k.py'
model = dict(backbone=dict(attn_type='pure'))
