# Demo: the classifier of infvit-demo-linear_shapes-cls.py without token mixing (every
# attention branch outputs zeros), the ablation control. Data, schedule, seed and every other
# setting are the Linear demo's: the attention-quality comparison (docs/benchmarks.md) differs
# in attn_type only. It has no attention map; eval_attention_quality.py scores it with
# --saliency random.
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./infvit-demo-linear_shapes-cls.py']
model = dict(backbone=dict(attn_type='none'))
