# NYUv2 depth: the linear evaluation of VECA-B (K = 64), frozen whole,
# distilled from DINOv3.
# The paper reports RMSE 0.3705 (VECA-B) / 0.3684 (DINOv3-B).
_base_ = ['../_base_/linear-probe_nyu-depth-512x512.py']

model = dict(
    data_preprocessor={{_base_.veca_data_preprocessor}},
    backbone={{_base_.veca_base_frozen}},
    decode_head=dict(in_channels=768))
