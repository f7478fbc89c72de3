# Mask R-CNN 1x on COCO with WeightFormer-S: the WeightFormer-T recipe with the S width and
# drop path 0.2 (the reference releases no detection recipe).
_base_ = './mask-rcnn_weightformer-t_simple-pyramid_1x_coco.py'
model = dict(backbone=dict(arch='s', drop_path_rate=0.2), neck=dict(in_channels=384))
