# Linear-InfViT-4L trained on ImageNet-1K (infvit-4l-linear_16xb64_in1k.py), tested on
# ImageNet-V2 matched-frequency (Recht et al., 2019; the InfSA paper's distribution-shift test):
#   python tools/test.py configs/infvit/infvit-4l-linear_16xb64_in1k_test-imagenet-v2.py CKPT
# with the archive extracted to data/imagenetv2/imagenetv2-matched-frequency-format-val.
# Its class folders are named 0..999 by ImageNet-1K index; mmlinear.ImageNetV2 labels them by
# that number (a folder dataset would number them in string order: 0, 1, 10, 100, ...).
# The other variants' test configs are this file with another _base_.
_base_ = './infvit-4l-linear_16xb64_in1k.py'

test_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='mmlinear.ImageNetV2',
        data_root='data/imagenetv2',
        data_prefix='imagenetv2-matched-frequency-format-val',
        pipeline={{_base_.test_pipeline}}))
