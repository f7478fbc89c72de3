# Softmax baseline: the same 4-layer body and recipe with standard attention.
_base_ = './infvit-4l-linear_16xb64_in1k.py'
model = dict(backbone=dict(attn_type='softmax'))
