# VECA-S ImageNet classifier: the global token (core 0 after the final norm, as the reference)
# and a linear head, at the full budget of 64 cores. splus / base / large inherit this file.
custom_imports = dict(imports=['mmlinear.models'], allow_failed_imports=False)
model = dict(
    type='ImageClassifier',
    backbone=dict(type='mmlinear.VECA', arch='small', active_cores=64, out_type='cls_token'),
    neck=None,
    head=dict(
        type='LinearClsHead',
        num_classes=1000,
        in_channels=384,
        loss=dict(type='CrossEntropyLoss', loss_weight=1.0),
        topk=(1, 5)))
