# Demo: the Linear-InfViT UperNet of upernet_infvit-demo-linear_shapes-ade.py trained on crops
# of several sizes (128, 192 and 256 px, one drawn per sample) cut at the native scale from
# larger continuous scenes (ade_large: 384 x 384, shapes across the 128-pixel blocks' borders),
# so that it sees more context than one 128-pixel scene, as whole-image inference on a large
# raster does; no rescaling, so the shapes keep the sizes they have at test time
# (docs/large_images.md, "Sixth measurement"). Same iterations, batch and schedule as the base
# config: the same number of samples, each padded to the batch's largest crop (256 px in most
# batches), so about four times its pixels per iteration. Validated on the 128-pixel ade split.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = './upernet_infvit-demo-linear_shapes-ade.py'

crop_sizes = (128, 192, 256)
# A batch of mixed crop sizes is padded to its largest crop (bottom and right; labels with 255),
# and the padding mask tells the backbone each crop's extent. The losses keep the base config's
# class weights and skip the padding (mmseg's own CrossEntropyLoss fails on ignored labels
# when given class weights).
loss_decode = dict(type='mmlinear.PaddedCrossEntropyLoss')
model = dict(
    data_preprocessor=dict(size=None, size_divisor=64),
    decode_head=dict(loss_decode=loss_decode),
    auxiliary_head=dict(loss_decode=loss_decode))

train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations'),
    dict(
        type='RandomChoice',
        transforms=[[dict(type='RandomCrop', crop_size=(size, size))] for size in crop_sizes]),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackSegInputs'),
]
train_dataloader = dict(
    dataset=dict(
        data_root='data/shapes/ade_large',
        data_prefix=dict(img_path='images/training', seg_map_path='annotations/training'),
        pipeline=train_pipeline))
