"""mmlinear ops.

``linear_infsa``, ``pure_infsa`` and ``dynamic_dwconv2d`` are the public entry points used by
the layers: they run the compiled kernels of ``mmlinear._ext`` when it is built for the
inputs' device and their PyTorch references (``*_reference``, the specification every kernel
is tested against) otherwise.
"""
from .dynamic_dwconv import dynamic_dwconv2d, dynamic_dwconv2d_reference
from .linear_infsa import linear_infsa, linear_infsa_key_weights, linear_infsa_reference
from .pure_infsa import pure_infsa, pure_infsa_reference, pure_infsa_scores

__all__ = [
    'dynamic_dwconv2d', 'dynamic_dwconv2d_reference', 'linear_infsa', 'linear_infsa_reference',
    'linear_infsa_key_weights', 'pure_infsa', 'pure_infsa_reference', 'pure_infsa_scores'
]
