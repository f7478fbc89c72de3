# WeightFormer-T for the paper's ablation of how often a dynamic block comes:
# every fourth block, from the second, is dynamic (4 of 17).
# The released model (weightformer-t_8xb256-amp_in1k.py, the recipe this inherits unchanged)
# has one every third block from the second: 1, 4, ..., 16.
_base_ = './weightformer-t_8xb256-amp_in1k.py'

model = dict(backbone=dict(dynamic_indices=[1, 5, 9, 13]))
