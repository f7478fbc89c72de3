# The demo classifier (infvit-demo-linear_shapes-cls.py) with Nystromformer attention (Xiong et
# al., 2021: 16 segment-mean landmarks for the 65 tokens of a 64 x 64 image) in the same body
# and under the same recipe: one side of the InfSA paper's comparison of efficient attentions
# at demo scale (docs/reproduce.md).
_base_ = ['./infvit-demo-linear_shapes-cls.py']

model = dict(backbone=dict(attn_type='nystromformer', mixer_cfg=dict(num_landmarks=16)))
