"""Mixed-precision training on the CPU (bfloat16 autocast)."""
from contextlib import contextmanager

import torch
from mmengine.optim import OptimWrapper
from mmengine.runner.amp import autocast
from torch import nn

from mmlinear.registry import OPTIM_WRAPPERS
from .upstream_shims import install_shim


@OPTIM_WRAPPERS.register_module()
class CPUAmpOptimWrapper(OptimWrapper):
    """Optimizer wrapper that runs the forward pass under CPU bfloat16 autocast.

    mmengine's ``AmpOptimWrapper`` refuses to start without an accelerator. bfloat16 keeps
    float32's exponent range, so no loss scaling is needed; the InfSA normalisations still
    run in float32 (they disable autocast locally), and so do mmcv's detection ops, whose CPU
    kernels take no bfloat16 (the ``mmcv_cpu_autocast`` shim of
    :mod:`mmlinear.engine.upstream_shims`, installed on first construction).
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        install_shim('mmcv_cpu_autocast')

    @contextmanager
    def optim_context(self, model: nn.Module):
        """Enable gradient-accumulation handling and bfloat16 autocast."""
        with super().optim_context(model), autocast(device_type='cpu', dtype=torch.bfloat16):
            yield
