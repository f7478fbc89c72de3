# PASCAL Context (59 classes): the linear evaluation of VECA-B (K = 64), frozen whole,
# distilled from DINOv3.
# The paper reports mIoU 57.46 (VECA-B) / 57.74 (DINOv3-B).
_base_ = ['../_base_/linear-probe_pascal-context-59-512x512.py']

model = dict(
    data_preprocessor={{_base_.veca_data_preprocessor}},
    backbone={{_base_.veca_base_frozen}},
    decode_head=dict(in_channels=768))
