from .cpu_amp_optim_wrapper import CPUAmpOptimWrapper
from .schedulers import WarmupCosineLR, WarmupCosineParamScheduler

__all__ = ['CPUAmpOptimWrapper', 'WarmupCosineLR', 'WarmupCosineParamScheduler']
