"""Hooks registered into ``mmlinear.registry.HOOKS`` (imported through its ``locations``)."""
from .elastic_core_budget_hook import ElasticCoreBudgetHook
from .multi_resolution_hook import MultiResolutionHook
from .shared_draw import draw_shared, sampling_probabilities, shared_seed

__all__ = [
    'ElasticCoreBudgetHook', 'MultiResolutionHook', 'draw_shared', 'sampling_probabilities',
    'shared_seed'
]
