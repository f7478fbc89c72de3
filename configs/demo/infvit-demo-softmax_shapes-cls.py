# Demo: the classifier of infvit-demo-linear_shapes-cls.py with softmax attention, the matched
# baseline in the same body. Data, schedule, seed and every other setting are the Linear
# demo's: the attention-quality comparison (docs/benchmarks.md) differs in attn_type only.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./infvit-demo-linear_shapes-cls.py']
model = dict(backbone=dict(attn_type='softmax'))
