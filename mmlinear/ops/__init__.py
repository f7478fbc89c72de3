"""mmlinear ops.

``linear_infsa``, ``pure_infsa`` and ``dynamic_dwconv2d`` are the public entry points used by
the layers: they run the compiled kernels of ``mmlinear._ext`` when it is built for the
inputs' device and their PyTorch references (``*_reference``, the specification every kernel
is tested against) otherwise. ``onednn_linear`` is ``F.linear`` through oneDNN's fused matmul
at inference on the CPU.
"""
from .dynamic_dwconv import dynamic_dwconv2d, dynamic_dwconv2d_reference
from .linear_infsa import linear_infsa, linear_infsa_key_weights, linear_infsa_reference
from .onednn_linear import onednn_linear, runs_onednn
from .pure_infsa import pure_infsa, pure_infsa_reference, pure_infsa_scores

__all__ = [
    'dynamic_dwconv2d', 'dynamic_dwconv2d_reference', 'linear_infsa', 'linear_infsa_reference',
    'linear_infsa_key_weights', 'onednn_linear', 'pure_infsa', 'pure_infsa_reference',
    'pure_infsa_scores', 'runs_onednn'
]
