# VECA-L ImageNet classifier (D = 1024, 24 layers).
_base_ = ['./veca-small.py']
model = dict(backbone=dict(arch='large'), head=dict(in_channels=1024))
