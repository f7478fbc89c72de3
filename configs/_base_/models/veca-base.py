# VECA-B ImageNet classifier (D = 768), the family the paper reports.
_base_ = ['./veca-small.py']
model = dict(backbone=dict(arch='base'), head=dict(in_channels=768))
