# Demo: the VECA classifier of veca-demo_shapes-cls.py trained with nested core budgets (the
# paper's elastic training): every iteration draws one budget from {8, 16, ..., 64} with the
# reference's weights (ElasticCoreBudgetHook), so one set of weights serves every budget at
# test time; validation runs at 64. tools/analysis_tools/elastic_sweep.py measures top-1 and
# latency per budget (docs/benchmarks.md).
# Generate the data first: python tools/misc/make_tiny_datasets.py
_base_ = ['./veca-demo_shapes-cls.py']

custom_hooks = [dict(type='mmlinear.ElasticCoreBudgetHook')]
