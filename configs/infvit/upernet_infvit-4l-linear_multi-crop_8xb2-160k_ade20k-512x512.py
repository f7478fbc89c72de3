# upernet_infvit-4l-linear_8xb2-160k_ade20k-512x512.py trained on crops of several sizes for
# whole-image inference on images larger than a crop: mmseg's ADE20K pipeline (random resize
# to 0.5-2 times 2048 x 512, flip, photometric distortion) with one crop of 512, 768 or 1024 px
# drawn per sample instead of the 512 crop, as the demo's multi-crop recipe does at 128, 192 and
# 256 px (configs/demo/upernet_infvit-demo-linear_multi-crop_shapes-ade.py; measured in
# docs/large_images.md). A crop larger than the resized image is the whole image. The pyramid
# pooling pools the window of a 512 crop's top level (16 x 16 cells at stride 32) around each
# position, as the demo's pools its 128 crop's. Same iterations and batch as the 512 recipe.
_base_ = ['./upernet_infvit-4l-linear_8xb2-160k_ade20k-512x512.py']

crop_sizes = (512, 768, 1024)
model = dict(
    # A batch of mixed crop sizes is padded to its largest crop, the labels with 255 (ignored),
    # and the padding mask tells the backbone each crop's extent.
    data_preprocessor=dict(size=None, size_divisor=32),
    decode_head=dict(type='mmlinear.ContextWindowUPerHead', context_window=16))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', reduce_zero_label=True),
    dict(type='RandomResize', scale=(2048, 512), ratio_range=(0.5, 2.0), keep_ratio=True),
    dict(
        type='RandomChoice',
        transforms=[[dict(type='RandomCrop', crop_size=(size, size), cat_max_ratio=0.75)]
                    for size in crop_sizes]),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PhotoMetricDistortion'),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
