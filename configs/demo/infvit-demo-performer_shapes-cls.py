# The demo classifier (infvit-demo-linear_shapes-cls.py) with Performer's FAVOR+ attention
# (Choromanski et al., 2021; its default ceil(d ln d) = 77 random features for the 24-wide
# heads) in the same body and under the same recipe: one side of the InfSA paper's comparison
# of efficient attentions at demo scale (docs/reproduce.md).
_base_ = ['./infvit-demo-linear_shapes-cls.py']

model = dict(backbone=dict(attn_type='performer'))
