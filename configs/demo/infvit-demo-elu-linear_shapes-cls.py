# The demo classifier (infvit-demo-linear_shapes-cls.py) with linear attention of the ELU + 1
# feature map (Katharopoulos et al., 2020) in the same body and under the same recipe: one
# side of the InfSA paper's comparison of efficient attentions at demo scale (docs/reproduce.md).
_base_ = ['./infvit-demo-linear_shapes-cls.py']

model = dict(backbone=dict(attn_type='elu_linear'))
