# The linear evaluation on PASCAL Context (59 classes, the background ignored) at 512 x 512
# crops: mmseg's dataset settings with the crop and the test resize raised from 480 / 520 to
# the paper's 512 / 520 short side. A child sets the backbone.
_base_ = [
    'mmseg::_base_/datasets/pascal_context_59.py',
    './linear-probe_adamw-40k.py',
    './frozen_dense_backbones.py',
]
crop_size = (512, 512)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(2048, 512), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(type='RandomCrop', crop_size=crop_size, cat_max_ratio=0.75),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 512), keep_ratio=True),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(batch_size=2, dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
model = dict(
    data_preprocessor=dict(size=crop_size), decode_head=dict(num_classes=59, ignore_index=255))
