# UperNet with WeightFormer-S on HRF (45 fundus photographs of 3504 x 2336 pixels: vessels and
# background), trained on 256 x 256 crops as mmseg's HRF recipes are (40k iterations, 4 GPUs x
# 4 images), and tested on each whole photograph at its own resolution in the 'streamed' mode
# (mmlinear.StreamedEncoderDecoder: the backbone streamed, the UPerHead over bands of rows),
# where mmseg's HRF configs test in 'slide' mode over 256 x 256 crops, which no pixel sees
# beyond. mDice, as mmseg reports HRF. To start from an ImageNet checkpoint, add
# model.backbone.init_cfg=dict(type='Pretrained', checkpoint=..., prefix='backbone.').
# The test pipeline's Resize to (2336, 3504) keeps HRF's photographs at their own size.
_base_ = ['../_base_/upernet_weightformer-s_streamed-test.py', 'mmseg::_base_/datasets/hrf.py']

crop_size = (256, 256)
max_iters = 40000
model = dict(
    data_preprocessor=dict(size=crop_size),
    decode_head=dict(num_classes=2),
    auxiliary_head=dict(num_classes=2))

param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=max_iters, by_epoch=False)
]
train_cfg = dict(max_iters=max_iters, val_interval=4000)
default_hooks = dict(checkpoint=dict(interval=4000))
