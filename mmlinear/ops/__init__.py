"""mmlinear ops.

The public entry points used by the layers run the compiled kernels of ``mmlinear._ext`` when
it is built for the inputs' device and their PyTorch references (``*_reference``, the
specification every kernel is tested against) otherwise:

- ``linear_infsa_query_sums`` and ``linear_infsa_key_pool``: the two passes of Linear-InfSA
  (the layer pools its inputs with the key weights; ``linear_infsa_key_weights`` is the
  explicit form, for attention maps);
- ``pure_infsa`` (``pure_infsa_scores`` the explicit form);
- ``dynamic_dwconv2d`` (and ``depthwise_conv2d``, a shared-kernel depthwise convolution
  through it on the CPU).

``linear`` (and the layer ``Linear``) is a linear layer with its activation (none, GELU or
the SwiGLU gate; ``linear_reference`` the specification), run at CPU inference by the
library measured fastest for it on this machine (``cpu_dispatch``: the one place where such
choices are made, with ``MMLINEAR_CPU_BACKEND`` to override them).
"""
from .cpu_dispatch import (BACKEND_CHOICES, BACKEND_VARIABLE, cpu_choices, forget_choices,
                           inference_dtype)
from .dynamic_dwconv import depthwise_conv2d, dynamic_dwconv2d, dynamic_dwconv2d_reference
from .linear import ACTIVATIONS, Linear, activate, check_activation, linear, linear_reference
from .linear_infsa import (linear_infsa_key_pool, linear_infsa_key_pool_reference,
                           linear_infsa_key_weights, linear_infsa_query_sums,
                           linear_infsa_query_sums_reference)
from .pure_infsa import pure_infsa, pure_infsa_reference, pure_infsa_scores

__all__ = [
    'ACTIVATIONS', 'BACKEND_CHOICES', 'BACKEND_VARIABLE', 'Linear', 'activate', 'check_activation',
    'cpu_choices', 'depthwise_conv2d', 'forget_choices', 'inference_dtype', 'linear',
    'linear_reference', 'dynamic_dwconv2d', 'dynamic_dwconv2d_reference', 'linear_infsa_key_pool',
    'linear_infsa_key_pool_reference', 'linear_infsa_key_weights', 'linear_infsa_query_sums',
    'linear_infsa_query_sums_reference', 'pure_infsa', 'pure_infsa_reference', 'pure_infsa_scores'
]
