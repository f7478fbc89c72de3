# WeightFormer-S on ImageNet-1K: the T recipe (weightformer-t_8xb256-amp_in1k.py, the
# reference's) with C = 384 and drop path 0.2.
_base_ = ['./weightformer-t_8xb256-amp_in1k.py']

model = dict(backbone=dict(arch='s', drop_path_rate=0.2), head=dict(in_channels=384))
