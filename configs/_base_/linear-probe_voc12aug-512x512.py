# The linear evaluation on PASCAL VOC 2012 with the SBD augmented training set (21 classes),
# mmseg's dataset settings (512 x 512 crops). A child sets the backbone.
_base_ = [
    'mmseg::_base_/datasets/pascal_voc12_aug.py',
    './linear-probe_adamw-40k.py',
    './frozen_dense_backbones.py',
]
crop_size = (512, 512)
train_dataloader = dict(batch_size=2)
model = dict(data_preprocessor=dict(size=crop_size), decode_head=dict(num_classes=21))
