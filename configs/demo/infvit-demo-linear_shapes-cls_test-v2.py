# Demo of the InfSA paper's ImageNet-V2 test: the demo Linear-InfViT classifier
# (infvit-demo-linear_shapes-cls.py) tested on the bundled re-collected shapes split, the same
# three classes drawn again with a modest shift (smaller shapes on noisier backgrounds):
#   python tools/test.py configs/demo/infvit-demo-linear_shapes-cls_test-v2.py CKPT
# Generate the data first: python tools/misc/make_tiny_datasets.py (writes data/shapes/cls_v2).
# As in ImageNet-V2, its class folders are named by the class's index (0, 1, 2), and
# mmlinear.ImageNetV2 labels them by that number in the training labels' order: the classifier
# was trained on folders named by the classes, which CustomDataset numbers in sorted order.
_base_ = './infvit-demo-linear_shapes-cls.py'

test_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='mmlinear.ImageNetV2',
        data_root='data/shapes/cls_v2',
        data_prefix='test',
        metainfo=dict(classes=('circle', 'square', 'triangle')),
        pipeline={{_base_.test_pipeline}}))
