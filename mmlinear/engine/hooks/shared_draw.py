"""Per-iteration random draws that agree on every rank without per-step communication.

Used by the elastic-training hooks: a choice made once per optimisation step for the whole
global batch (the VECA core budget, the stage-2 input resolution) must be the same on all
ranks. Each rank draws from a generator seeded with ``(seed, iteration, stream)``; with one
shared ``seed`` the draws agree, a resumed run continues the same sequence, and nothing else
that consumes random numbers (augmentation, rank-dependent seeds) can desynchronise them.
"""
from typing import Optional, Sequence

import numpy as np
from mmengine.dist import broadcast_object_list
from mmengine.hooks import Hook


def sampling_probabilities(name: str, choices: Sequence, weights: Sequence[float]) -> np.ndarray:
    """Normalised probabilities of ``choices`` from unnormalised ``weights``.

    Args:
        name (str): What is drawn, for the error message (``'budgets'``).
        choices (Sequence): The values to draw from.
        weights (Sequence[float]): One non-negative weight per choice, not all zero.

    Returns:
        np.ndarray: (len(choices),) probabilities summing to 1.

    Raises:
        ValueError: If the lengths differ or the weights are negative or all zero.
    """
    if len(choices) == 0 or len(choices) != len(weights):
        raise ValueError(f'{name} and their weights must be non-empty and of equal length, '
                         f'got {len(choices)} {name} and {len(weights)} weights')
    weights = np.asarray(weights, dtype=np.float64)
    if (weights < 0).any() or weights.sum() <= 0:
        raise ValueError(f'weights of {name} must be non-negative and not all zero, got '
                         f'{tuple(weights.tolist())}')
    return weights / weights.sum()


def shared_seed(runner, seed: Optional[int]) -> int:
    """``seed`` if given, else rank 0's run seed, broadcast once (ranks may differ when
    ``randomness.diff_rank_seed=True``)."""
    if seed is not None:
        return int(seed)
    seeds = [runner.seed]
    broadcast_object_list(seeds, src=0)
    return int(seeds[0])


def draw_shared(seed: int, iteration: int, stream: int, choices: Sequence, probs: np.ndarray):
    """The draw of ``iteration``: a pure function of its arguments.

    Args:
        seed (int): Seed shared by all ranks.
        iteration (int): The 0-based global iteration.
        stream (int): Keeps the draws of different hooks independent.
        choices (Sequence): Values to draw from.
        probs (np.ndarray): Their probabilities.

    Returns:
        One element of ``choices``.
    """
    rng = np.random.default_rng([seed, iteration, stream])
    return choices[int(rng.choice(len(choices), p=probs))]


class SharedDrawHook(Hook):
    """Base of the hooks that draw with :func:`draw_shared`: one seed, kept across a resume.

    The seed is fixed in ``before_run`` (the given one, else rank 0's run seed) and recorded in
    the message hub, which every checkpoint saves. A resumed run takes the saved seed in
    ``before_train`` (the runner has loaded the checkpoint by then), so its draws continue the
    saved run's sequence, also when that run's seed was random (``randomness.seed=None``).

    Args:
        seed (int, optional): Seed shared by all ranks. Defaults to None (rank 0's run seed).
    """

    def __init__(self, seed: Optional[int] = None) -> None:
        self.seed = seed

    @property
    def _seed_key(self) -> str:
        return f'shared_draw_seed/{type(self).__name__}'

    def before_run(self, runner) -> None:
        self.seed = shared_seed(runner, self.seed)

    def before_train(self, runner) -> None:
        self.seed = int(runner.message_hub.get_info(self._seed_key, self.seed))
        runner.message_hub.update_info(self._seed_key, self.seed)
