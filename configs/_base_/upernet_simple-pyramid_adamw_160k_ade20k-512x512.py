# UperNet on ADE20K (512x512 crops, 160k iterations, 8 GPUs x 2 images) for a plain stride-16
# mmlinear backbone (./upernet_simple-pyramid_adamw.py: the simple pyramid, AdamW, clipping):
# a 1500-iteration warm-up, then linear decay.
# A child sets model.backbone (type and arch), the widths model.neck.in_channels = C,
# model.decode_head.in_channels = [C/4, C/2, C, C], model.auxiliary_head.in_channels = C, and
# optim_wrapper.paramwise_cfg (which parameters skip weight decay).
_base_ = ['./upernet_simple-pyramid_adamw.py', 'mmseg::_base_/datasets/ade20k.py']

crop_size = (512, 512)
data_preprocessor = dict(type='mmlinear.PaddingMaskSegDataPreprocessor', size=crop_size)
model = dict(
    data_preprocessor=data_preprocessor,
    decode_head=dict(num_classes=150),
    auxiliary_head=dict(num_classes=150))

param_scheduler = [
    dict(type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(type='PolyLR', eta_min=0.0, power=1.0, begin=1500, end=160000, by_epoch=False)
]

train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
