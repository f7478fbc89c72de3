# Mask R-CNN 1x on COCO with the pure variant of InfViT-4L; otherwise the Linear-InfViT recipe.
_base_ = './mask-rcnn_infvit-4l-linear_simple-pyramid_1x_coco.py'
model = dict(backbone=dict(attn_type='pure'))
