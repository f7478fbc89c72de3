# UperNet with WeightFormer-S (the ADE20K config's backbone, neck widths and weight-decay
# groups) for images segmented whole: tested in the 'streamed' mode of
# mmlinear.StreamedEncoderDecoder (the backbone streamed, the UPerHead over bands of rows) at
# each image's own resolution. A child adds the dataset, data_preprocessor.size, the number
# of classes and the schedule.
_base_ = ['./upernet_simple-pyramid_adamw.py']

model = dict(
    type='mmlinear.StreamedEncoderDecoder',
    backbone=dict(type='mmlinear.WeightFormer', arch='s', patch_size=16, drop_path_rate=0.2),
    neck=dict(in_channels=384),
    decode_head=dict(in_channels=[96, 192, 384, 384]),
    auxiliary_head=dict(in_channels=384),
    test_cfg=dict(mode='streamed', mem_limit_gb=8))

optim_wrapper = dict(paramwise_cfg=dict(norm_decay_mult=0., bias_decay_mult=0., flat_decay_mult=0.))
