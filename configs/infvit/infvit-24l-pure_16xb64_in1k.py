# Pure-InfViT-24L (ViT-L width and depth) with the same recipe.
_base_ = './infvit-4l-linear_16xb64_in1k.py'
model = dict(backbone=dict(arch='infvit-24l', attn_type='pure'))
