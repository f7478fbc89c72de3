# The demo's multi-crop training recipe (docs/large_images.md, "Sixth measurement"), as
# variables that a demo UperNet config applies to its own model and data (the multi-crop
# configs of configs/demo): each sample one crop of 128, 192 or 256 px cut at the native scale
# from the larger continuous scenes of ade_large (384 x 384, shapes across the 128-pixel blocks'
# borders), no rescaling, so the shapes keep the sizes they have at test time. A batch of mixed
# crop sizes is padded to its largest crop (bottom and right; labels with 255) and the padding
# mask tells the backbone each crop's extent; the losses keep the class weights and skip the
# padding (mmseg 1.2.2's CrossEntropyLoss fails on ignored labels when given class weights).
# Generate the data first: python tools/misc/make_tiny_datasets.py
crop_sizes = (128, 192, 256)
multi_crop_data_preprocessor = dict(size=None, size_divisor=64)
padded_loss_decode = dict(type='mmlinear.PaddedCrossEntropyLoss')
multi_crop_train_dataset = dict(
    data_root='data/shapes/ade_large',
    data_prefix=dict(img_path='images/training', seg_map_path='annotations/training'),
    pipeline=[
        dict(type='LoadImageFromFile'),
        dict(type='LoadAnnotations'),
        dict(
            type='RandomChoice',
            transforms=[[dict(type='RandomCrop', crop_size=(size, size))] for size in crop_sizes]),
        dict(type='RandomFlip', prob=0.5),
        dict(type='PackSegInputs'),
    ])
