# NYUv2 depth: the linear evaluation of the DINOv3 ViT-B/16 teacher
# (timm), frozen whole: the baseline.
# The paper reports RMSE 0.3705 (VECA-B) / 0.3684 (DINOv3-B).
_base_ = ['../_base_/linear-probe_nyu-depth-512x512.py']

model = dict(
    data_preprocessor={{_base_.dinov3_data_preprocessor}},
    backbone={{_base_.dinov3_vitb16_frozen}},
    decode_head=dict(in_channels=768))
