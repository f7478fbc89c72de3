# VECA-S+ ImageNet classifier: VECA-S with a SwiGLU MLP of ratio 4 (hidden 1536).
_base_ = ['./veca-small.py']
model = dict(backbone=dict(arch='splus'))
