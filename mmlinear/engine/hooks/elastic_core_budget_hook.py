"""Nested ("elastic") core-budget training for VECA: one budget per iteration.

As the reference trains (``nested_budgets`` / ``nested_budget_weights`` in its
``veca/config.py``): at every optimisation step one budget K is drawn for the whole global
batch from K in {8, 16, ..., 64} with weights (1, 1, 2, 2, 3, 3, 4, 4); the model keeps the
prefix of K cores for the whole forward pass. Validation and testing use a fixed budget.
"""
from typing import List, Optional, Sequence

from mmengine.model import is_model_wrapper
from torch import nn

from mmlinear.models.backbones import VECA
from mmlinear.models.layers import check_core_budget
from mmlinear.registry import HOOKS
from .shared_draw import SharedDrawHook, draw_shared, sampling_probabilities

# Every prefix of whole chunks of VECA's core bank, as the reference's nested budgets.
REFERENCE_BUDGETS = tuple(range(VECA.core_chunk_size, VECA.max_cores + 1, VECA.core_chunk_size))
REFERENCE_WEIGHTS = (1, 1, 2, 2, 3, 3, 4, 4)


@HOOKS.register_module()
class ElasticCoreBudgetHook(SharedDrawHook):
    """Draw one VECA core budget per training iteration; evaluate at a fixed one.

    The budget of iteration ``i`` comes from a generator seeded with a seed shared by all
    ranks and ``i`` (:func:`draw_shared`), so every rank draws the same budget without a
    collective per step. The reference broadcasts rank 0's draw each step instead, which is
    equivalent in distribution but adds a synchronisation point to every iteration and
    restarts its sequence on resume. When ``seed`` is None, rank 0's run seed is broadcast
    once at the start; a resumed run keeps the saved run's seed (:class:`SharedDrawHook`).

    Every module of the model with an ``active_cores`` attribute (the VECA backbones, e.g. a
    distillation student) gets the budget before the train step, and the drawn value is
    logged as ``active_cores``. Budgets below 64 leave the unused core chunks without
    gradients, so a DDP-wrapped model needs ``find_unused_parameters=True``
    (``model_wrapper_cfg``); the hook checks this at the start of the run.

    Args:
        budgets (Sequence[int]): The budgets to draw from. Defaults to the reference
            ``(8, 16, ..., 64)``.
        weights (Sequence[float]): Unnormalised sampling weights, one per budget. Defaults
            to the reference ``(1, 1, 2, 2, 3, 3, 4, 4)`` (P = 0.05 ... 0.20, E[K] = 44).
        eval_cores (int): Budget for validation and testing, also left on the model after
            training. Defaults to 64 (``VECA.max_cores``, the whole bank).
        seed (int, optional): Seed shared by all ranks. Defaults to None (rank 0's run seed).
    """

    priority = 'NORMAL'
    stream = 0  # keeps these draws independent of other shared-draw hooks

    def __init__(self,
                 budgets: Sequence[int] = REFERENCE_BUDGETS,
                 weights: Sequence[float] = REFERENCE_WEIGHTS,
                 eval_cores: int = VECA.max_cores,
                 seed: Optional[int] = None) -> None:
        self.budgets = tuple(budgets)
        for budget in self.budgets:
            check_core_budget(budget, VECA.max_cores, VECA.core_chunk_size)
        if len(set(self.budgets)) != len(self.budgets):
            raise ValueError(f'budgets must not repeat, got {self.budgets}')
        self.probs = sampling_probabilities('budgets', self.budgets, weights)
        self.eval_cores = check_core_budget(eval_cores, VECA.max_cores, VECA.core_chunk_size)
        super().__init__(seed)
        self._targets: List[nn.Module] = []

    def draw(self, iteration: int) -> int:
        """The budget of training iteration ``iteration`` (the same on every rank).

        Args:
            iteration (int): The 0-based global iteration (``runner.iter``).

        Returns:
            int: One of ``budgets``.
        """
        if self.seed is None:
            raise RuntimeError('ElasticCoreBudgetHook.draw needs a seed: pass seed= or let '
                               'the runner call before_run first')
        return draw_shared(self.seed, iteration, self.stream, self.budgets, self.probs)

    def before_run(self, runner) -> None:
        """Find the VECA modules, fix the shared seed and check the DDP wrapper."""
        model = runner.model.module if is_model_wrapper(runner.model) else runner.model
        self._targets = [m for m in model.modules() if hasattr(m, 'active_cores')]
        if not self._targets:
            raise ValueError(f'ElasticCoreBudgetHook found no module with an `active_cores` '
                             f'attribute (a VECA backbone) in {type(model).__name__}')
        super().before_run(runner)
        if min(self.budgets) < VECA.max_cores and \
                getattr(runner.model, 'find_unused_parameters', True) is False:
            raise ValueError(
                f'core budgets below {VECA.max_cores} leave parameters without '
                "gradients; set model_wrapper_cfg=dict(type='MMDistributedDataParallel', "
                'find_unused_parameters=True) in the config')

    def _apply(self, cores: int) -> None:
        for module in self._targets:
            module.active_cores = cores

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        """Draw this iteration's budget, set it on the model and log it."""
        cores = self.draw(runner.iter)
        self._apply(cores)
        runner.message_hub.update_scalar('train/active_cores', cores)

    def before_val_epoch(self, runner) -> None:
        self._apply(self.eval_cores)

    def before_test_epoch(self, runner) -> None:
        self._apply(self.eval_cores)

    def after_train(self, runner) -> None:
        self._apply(self.eval_cores)
