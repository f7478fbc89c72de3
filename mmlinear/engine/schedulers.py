"""Parameter schedulers that mmengine's built-in ones cannot express exactly.

``WarmupCosineLR`` is a linear warm-up and a cosine, in closed form:

- with ``warmup_prefix=False`` (timm's ``CosineLRScheduler`` default, as the WeightFormer
  reference trains), one cosine over the whole run, counted from the first iteration, whose
  first iterations the warm-up replaces. mmengine's ``LinearLR`` + ``CosineAnnealingLR`` pair
  instead starts a fresh cosine where the warm-up ends, a different curve (at mid-training
  about 11 % higher for WeightFormer's 20 + 280 epochs than the reference's cosine over 300);
- with ``warmup_prefix=True``, the cosine starts where the warm-up ends and reaches the
  initial value there (the VECA reference's ``get_cosine_schedule_with_warmup``). The mmengine
  pair comes close but not exactly: ``LinearLR`` spans ``end - begin - 1`` steps, so it
  reaches the initial value one step early, its slope W / (W - 1) times the reference's.

The warm-up start and the floor are fractions of each parameter group's initial learning
rate, so mmengine's ``auto_scale_lr`` (which multiplies the groups' learning rates before the
schedulers are built) scales the base, warm-up and minimum learning rates together, as the
reference's linear scaling rule does.
"""
import math

from mmengine.optim.scheduler.lr_scheduler import LRSchedulerMixin
from mmengine.optim.scheduler.param_scheduler import INF, _ParamScheduler

from mmlinear.registry import PARAM_SCHEDULERS


class WarmupCosineParamScheduler(_ParamScheduler):
    r"""A linear warm-up over ``warmup_length`` steps and a cosine ending at step ``T_max``
    (timm's ``CosineLRScheduler`` with ``cycle_limit=1``).

    With :math:`v_0` a group's initial value, :math:`s` = ``warmup_start_factor``,
    :math:`r` = ``eta_min_ratio``, :math:`W` = ``warmup_length`` and :math:`T` = ``T_max``,
    the schedule at step :math:`t` (counted from ``begin``) is

    .. math::
        f(t) = \begin{cases}
            s v_0 + t (v_0 - s v_0) / W & t < W \\
            r v_0 + \frac{1}{2} (v_0 - r v_0) (1 + \cos(\pi p(t))) & W \le t < T \\
            r v_0 & t \ge T
        \end{cases}

    with :math:`p(t) = t / T` (``warmup_prefix=False``: the cosine is not restarted at
    :math:`W`, the value drops from :math:`f(W - 1)` to the cosine's value at :math:`W / T`, as
    in timm) or :math:`p(t) = (t - W) / (T - W)` (``warmup_prefix=True``: the cosine starts
    at :math:`v_0` where the warm-up ends).

    ``lag_one_step`` reproduces how the WeightFormer reference drives timm's scheduler: it calls
    ``step_update(num_updates)`` *after* each optimizer step with the number of steps done
    before it, so optimizer step :math:`t \ge 1` runs with :math:`f(t - 1)` and step 0 with
    the warm-up start :math:`f(0)` that the scheduler sets when it is created. With it off,
    step :math:`t` runs with :math:`f(t)` (mmengine's convention).

    The value is computed in closed form from the step count, so nothing else may change the
    parameter at the same time (use it as the only scheduler of its parameter).

    Args:
        optimizer (Optimizer | BaseOptimWrapper): The optimizer (wrapper).
        param_name (str): The scheduled parameter, e.g. 'lr'.
        warmup_length (int): Steps (epochs if ``by_epoch``) of linear warm-up, >= 0.
        warmup_start_factor (float): The value at step 0 as a fraction of the initial value,
            in [0, 1]. Defaults to 0.
        eta_min_ratio (float): The floor of the cosine as a fraction of the initial value,
            in [0, 1]. Defaults to 0.
        T_max (int, optional): Step at which the cosine reaches its floor, counted from
            ``begin``; more than ``warmup_length``. Defaults to ``end - begin``.
        warmup_prefix (bool): Start the cosine after the warm-up (True) or at step 0, the
            warm-up replacing its start (False). Defaults to False.
        lag_one_step (bool): Run step t with the schedule's value at t - 1 (see above).
            Defaults to False.
        begin (int): First step the scheduler acts on. Defaults to 0.
        end (int): Step at which it stops acting. Defaults to INF (then ``T_max`` is needed).
        last_step (int): For resuming without a state dict. Defaults to -1.
        by_epoch (bool): Whether the steps are epochs. Defaults to True.
        verbose (bool): Print every update. Defaults to False.

    Raises:
        ValueError: For a negative warm-up, factors outside [0, 1], or a cosine that ends
            before the warm-up does or has no known length.
    """

    def __init__(self,
                 optimizer,
                 param_name: str,
                 warmup_length: int,
                 warmup_start_factor: float = 0.0,
                 eta_min_ratio: float = 0.0,
                 T_max=None,
                 warmup_prefix: bool = False,
                 lag_one_step: bool = False,
                 begin: int = 0,
                 end: int = INF,
                 last_step: int = -1,
                 by_epoch: bool = True,
                 verbose: bool = False):
        if T_max is None:
            if end == INF:
                raise ValueError('WarmupCosineParamScheduler needs T_max or a finite end')
            T_max = end - begin
        if not isinstance(warmup_length, int) or isinstance(warmup_length, bool) \
                or warmup_length < 0:
            raise ValueError(f'warmup_length must be an int >= 0, got {warmup_length!r}')
        if not isinstance(T_max, int) or isinstance(T_max, bool) or T_max <= warmup_length:
            raise ValueError(f'T_max must be an int > warmup_length={warmup_length}, '
                             f'got {T_max!r}')
        if not 0.0 <= warmup_start_factor <= 1.0:
            raise ValueError(f'warmup_start_factor must be in [0, 1], got {warmup_start_factor!r}')
        if not 0.0 <= eta_min_ratio <= 1.0:
            raise ValueError(f'eta_min_ratio must be in [0, 1], got {eta_min_ratio!r}')
        self.warmup_length = warmup_length
        self.warmup_start_factor = float(warmup_start_factor)
        self.eta_min_ratio = float(eta_min_ratio)
        self.T_max = T_max
        self.warmup_prefix = bool(warmup_prefix)
        self.lag_one_step = bool(lag_one_step)
        super().__init__(
            optimizer,
            param_name=param_name,
            begin=begin,
            end=end,
            last_step=last_step,
            by_epoch=by_epoch,
            verbose=verbose)

    @classmethod
    def build_iter_from_epoch(cls,
                              *args,
                              warmup_length,
                              T_max=None,
                              begin=0,
                              end=INF,
                              by_epoch=True,
                              epoch_length=None,
                              **kwargs):
        """Build an iteration-based instance from epoch-based arguments (the warm-up, the
        cosine length, begin and end are multiplied by ``epoch_length``, as the reference
        multiplies its epochs by the iterations per epoch)."""
        if not by_epoch:
            raise ValueError('only an epoch-based scheduler (by_epoch=True) can be converted '
                             'to iterations')
        if not isinstance(epoch_length, int) or epoch_length <= 0:
            raise ValueError(f'epoch_length must be a positive int, got {epoch_length!r}')
        if not isinstance(warmup_length, int) or warmup_length < 0:
            raise ValueError(f'warmup_length must be an int >= 0, got {warmup_length!r}')
        return cls(
            *args,
            warmup_length=warmup_length * epoch_length,
            T_max=None if T_max is None else int(T_max * epoch_length),
            begin=int(begin * epoch_length),
            end=end if end == INF else int(end * epoch_length),
            by_epoch=False,
            **kwargs)

    def value_at(self, step: int, initial: float) -> float:
        """The schedule's value ``f(step)`` for a group whose initial value is ``initial``."""
        start = self.warmup_start_factor * initial
        floor = self.eta_min_ratio * initial
        if step < self.warmup_length:
            return start + step * (initial - start) / self.warmup_length
        if step >= self.T_max:
            return floor
        if self.warmup_prefix:
            progress = (step - self.warmup_length) / (self.T_max - self.warmup_length)
        else:
            progress = step / self.T_max
        return floor + 0.5 * (initial - floor) * (1.0 + math.cos(math.pi * progress))

    def _get_value(self):
        """The values of the current step, in closed form."""
        step = max(self.last_step - 1, 0) if self.lag_one_step else self.last_step
        return [self.value_at(step, initial) for initial in self.base_values]


@PARAM_SCHEDULERS.register_module()
class WarmupCosineLR(LRSchedulerMixin, WarmupCosineParamScheduler):
    """:class:`WarmupCosineParamScheduler` for the learning rate."""
