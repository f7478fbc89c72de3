# The demo classifier (infvit-demo-linear_shapes-cls.py) with Agent Attention (Han et al., 2024)
# in the same body and under the same recipe: one side of the InfSA paper's comparison of
# efficient attentions at demo scale (docs/reproduce.md). The paper pools ImageNet's 14 x 14
# patches to 7 x 7 = 49 agents, one per 4 patches; the 65 tokens of a 64 x 64 image (CLS and
# 8 x 8 patches) keep about that ratio with 16 agents, as many as Nystromformer's demo landmarks
# (the mixer pools contiguous runs of the token sequence, not 2 x 2 windows of the grid).
_base_ = ['./infvit-demo-linear_shapes-cls.py']

model = dict(backbone=dict(attn_type='agent', mixer_cfg=dict(num_agents=16)))
