# PASCAL Context (59 classes): the linear evaluation of the DINOv3 ViT-B/16 teacher
# (timm), frozen whole: the baseline.
# The paper reports mIoU 57.46 (VECA-B) / 57.74 (DINOv3-B).
_base_ = ['../_base_/linear-probe_pascal-context-59-512x512.py']

model = dict(
    data_preprocessor={{_base_.dinov3_data_preprocessor}},
    backbone={{_base_.dinov3_vitb16_frozen}},
    decode_head=dict(in_channels=768))
