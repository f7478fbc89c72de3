"""mmlinear ops.

The public entry points used by the layers run the compiled kernels of ``mmlinear._ext`` when
it is built for the inputs' device and their PyTorch references (``*_reference``, the
specification every kernel is tested against) otherwise:

- ``linear_infsa_query_sums`` and ``linear_infsa_key_pool``: the two passes of Linear-InfSA
  (the layer pools its inputs with the key weights; ``linear_infsa_key_weights`` is the
  explicit form, for attention maps);
- ``pure_infsa`` (``pure_infsa_scores`` the explicit form);
- ``dynamic_dwconv2d``.

``onednn_linear`` is ``F.linear`` through oneDNN's fused matmul at inference on the CPU.
"""
from .dynamic_dwconv import dynamic_dwconv2d, dynamic_dwconv2d_reference
from .linear_infsa import (linear_infsa_key_pool, linear_infsa_key_pool_reference,
                           linear_infsa_key_weights, linear_infsa_query_sums,
                           linear_infsa_query_sums_reference)
from .onednn_linear import onednn_linear, runs_onednn
from .pure_infsa import pure_infsa, pure_infsa_reference, pure_infsa_scores

__all__ = [
    'dynamic_dwconv2d', 'dynamic_dwconv2d_reference', 'linear_infsa_key_pool',
    'linear_infsa_key_pool_reference', 'linear_infsa_key_weights', 'linear_infsa_query_sums',
    'linear_infsa_query_sums_reference', 'onednn_linear', 'pure_infsa', 'pure_infsa_reference',
    'pure_infsa_scores', 'runs_onednn'
]
