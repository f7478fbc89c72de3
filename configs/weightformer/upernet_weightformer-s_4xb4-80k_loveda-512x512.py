# UperNet with WeightFormer-S on LoveDA (remote sensing, 1024 x 1024 tiles at 0.3 m, 7 land
# cover classes), trained on 512 x 512 crops as mmseg's LoveDA recipes are (80k iterations, 4
# GPUs x 4 images), and tested on each whole tile at its own resolution in the 'streamed' mode
# (mmlinear.StreamedEncoderDecoder; the same weights test in mode 'whole' too). For scenes
# larger than a tile, the same model segments a whole GeoTIFF with
# tools/inference/large_image.py. To start from an ImageNet checkpoint, add
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.').
# The test pipeline's Resize to (1024, 1024) keeps LoveDA's tiles at their own size.
_base_ = ['../_base_/upernet_weightformer-s_streamed-test.py', 'mmseg::_base_/datasets/loveda.py']

crop_size = (512, 512)
max_iters = 80000
model = dict(
    data_preprocessor=dict(size=crop_size),
    decode_head=dict(num_classes=7),
    auxiliary_head=dict(num_classes=7))

param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=max_iters, by_epoch=False)
]
train_cfg = dict(max_iters=max_iters, val_interval=8000)
default_hooks = dict(checkpoint=dict(interval=8000))
train_dataloader = dict(batch_size=4)
