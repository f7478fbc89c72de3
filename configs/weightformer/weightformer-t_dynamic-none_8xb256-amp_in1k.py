# WeightFormer-T for the paper's ablation of how often a dynamic block comes: no block is
# dynamic (the static 3 x 3 depthwise convolution and MLP everywhere, so nothing global).
# The released model (weightformer-t_8xb256-amp_in1k.py, the recipe this inherits unchanged)
# has one every third block from the second: 1, 4, ..., 16.
_base_ = './weightformer-t_8xb256-amp_in1k.py'

model = dict(backbone=dict(dynamic_indices=[]))
