# UperNet 160k on ADE20K with WeightFormer-S: the WeightFormer-T recipe with the S width and
# drop path 0.2 (the reference releases no segmentation recipe).
_base_ = './upernet_weightformer-t_8xb2-160k_ade20k-512x512.py'
model = dict(
    backbone=dict(arch='s', drop_path_rate=0.2),
    neck=dict(in_channels=384),
    decode_head=dict(in_channels=[96, 192, 384, 384]),
    auxiliary_head=dict(in_channels=384))
