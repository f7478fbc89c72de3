# UperNet 160k on ADE20K with the pure variant of InfViT-4L; otherwise the Linear-InfViT recipe.
_base_ = './upernet_infvit-4l-linear_8xb2-160k_ade20k-512x512.py'
model = dict(backbone=dict(attn_type='pure'))
