"""Stage-2 multi-resolution training: one input resolution per iteration (the reference's
``MultiResFinetuneConfig`` phases)."""
from typing import List, Optional, Sequence

import torch
import torch.nn.functional as F

from mmlinear.registry import HOOKS
from .shared_draw import SharedDrawHook, draw_shared, sampling_probabilities

# Reference stage 2: phase A (steps 0-7,000) draws 256/384/512, phase B adds 768.
REFERENCE_RESOLUTIONS = (256, 384, 512, 768)
REFERENCE_PHASES = (dict(begin=0, weights=(0.35, 0.35, 0.30, 0.0)),
                    dict(begin=7000, weights=(0.15, 0.25, 0.30, 0.30)))


@HOOKS.register_module()
class MultiResolutionHook(SharedDrawHook):
    """Resize every training batch to one resolution drawn per iteration, shared by all ranks.

    The reference keeps one data loader per resolution, each resizing the shorter side to
    1.125x the resolution and cropping. Here the loader produces crops at the largest
    resolution (shorter side 1.125 x 768 = 864, crop 768) and the hook resizes the stacked
    batch to the drawn size (bicubic, antialiased) before the data preprocessor: the same
    field of view as the reference, from a single loader. The draw uses :func:`draw_shared`
    (the same on all ranks, no communication per step, and a resumed run keeps the saved
    run's seed: :class:`SharedDrawHook`). Only square, label-free batches of
    one stacked tensor (mmpretrain ``default_collate``, e.g. distillation) are supported:
    boxes or masks would need rescaling too.

    Args:
        resolutions (Sequence[int]): Square training sizes (multiples of 16).
            Defaults to the reference (256, 384, 512, 768).
        phases (Sequence[dict]): ``dict(begin=iteration, weights=...)`` sorted by ``begin``,
            the first at 0; from ``begin`` on, ``weights`` (one per resolution) apply.
            Defaults to the reference phases A and B.
        seed (int, optional): Seed shared by all ranks. Defaults to None (rank 0's run seed).
    """

    priority = 'NORMAL'
    stream = 1  # independent of ElasticCoreBudgetHook's draws

    def __init__(self,
                 resolutions: Sequence[int] = REFERENCE_RESOLUTIONS,
                 phases: Sequence[dict] = REFERENCE_PHASES,
                 seed: Optional[int] = None) -> None:
        self.resolutions = tuple(resolutions)
        for size in self.resolutions:
            if not isinstance(size, int) or size <= 0 or size % 16:
                raise ValueError(f'resolutions must be positive multiples of 16 (the patch '
                                 f'size), got {self.resolutions}')
        begins = [phase.get('begin') for phase in phases]
        if not begins or begins[0] != 0 or begins != sorted(set(begins)):
            raise ValueError(f'phases must start at begin=0 with increasing begins, got '
                             f'{begins}')
        self.begins: List[int] = begins
        self.probs = [
            sampling_probabilities('resolutions', self.resolutions, phase['weights'])
            for phase in phases
        ]
        super().__init__(seed)

    def draw(self, iteration: int) -> int:
        """The resolution of training iteration ``iteration`` (the same on every rank)."""
        if self.seed is None:
            raise RuntimeError('MultiResolutionHook.draw needs a seed: pass seed= or let the '
                               'runner call before_run first')
        phase = max(i for i, begin in enumerate(self.begins) if begin <= iteration)
        return draw_shared(self.seed, iteration, self.stream, self.resolutions, self.probs[phase])

    def before_train_iter(self, runner, batch_idx: int, data_batch=None) -> None:
        """Resize ``data_batch['inputs']`` in place to this iteration's resolution."""
        size = self.draw(runner.iter)
        inputs = data_batch['inputs']
        if not isinstance(inputs, torch.Tensor) or inputs.dim() != 4:
            raise TypeError('MultiResolutionHook needs a stacked (B, C, H, W) input tensor '
                            "(mmpretrain's default_collate)")
        if inputs.shape[-2:] != (size, size):
            resized = F.interpolate(
                inputs.float(),
                size=(size, size),
                mode='bicubic',
                antialias=True,
                align_corners=False)
            # Bicubic overshoots; keep the pixel range the data preprocessor expects.
            data_batch['inputs'] = resized.clamp_(0, 255)
        runner.message_hub.update_scalar('train/resolution', size)
