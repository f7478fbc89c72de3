# PASCAL VOC 2012 (augmented): the linear evaluation of the DINOv3 ViT-B/16 teacher
# (timm), frozen whole: the baseline.
# The paper reports mIoU 87.07 (VECA-B) / 87.50 (DINOv3-B).
_base_ = ['../_base_/linear-probe_voc12aug-512x512.py']

model = dict(
    data_preprocessor={{_base_.dinov3_data_preprocessor}},
    backbone={{_base_.dinov3_vitb16_frozen}},
    decode_head=dict(in_channels=768))
