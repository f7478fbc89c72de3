# PASCAL VOC 2012 (augmented): the linear evaluation of VECA-B (K = 64), frozen whole,
# distilled from DINOv3.
# The paper reports mIoU 87.07 (VECA-B) / 87.50 (DINOv3-B).
_base_ = ['../_base_/linear-probe_voc12aug-512x512.py']

model = dict(
    data_preprocessor={{_base_.veca_data_preprocessor}},
    backbone={{_base_.veca_base_frozen}},
    decode_head=dict(in_channels=768))
