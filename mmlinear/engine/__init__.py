from .cpu_amp_optim_wrapper import CPUAmpOptimWrapper

__all__ = ['CPUAmpOptimWrapper']
