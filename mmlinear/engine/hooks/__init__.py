"""Hooks registered into ``mmlinear.registry.HOOKS`` (imported through its ``locations``)."""
from .elastic_core_budget_hook import ElasticCoreBudgetHook
from .multi_resolution_hook import MultiResolutionHook
from .preemption_hook import REQUEUE_EXIT_CODE, PreemptionHook
from .shared_draw import SharedDrawHook, draw_shared, sampling_probabilities, shared_seed

__all__ = [
    'ElasticCoreBudgetHook', 'MultiResolutionHook', 'PreemptionHook', 'REQUEUE_EXIT_CODE',
    'SharedDrawHook', 'draw_shared', 'sampling_probabilities', 'shared_seed'
]
