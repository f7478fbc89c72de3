"""mmlinear ops.

``linear_infsa`` and ``pure_infsa`` are the public entry points used by the layers. Their
PyTorch references (``*_reference``) are the specification; compiled kernels
(``mmlinear._ext``) are held to them, and the references serve wherever no kernel exists.
"""
from .linear_infsa import linear_infsa_key_weights, linear_infsa_reference
from .pure_infsa import pure_infsa_reference, pure_infsa_scores

# No compiled kernel is built yet, so the public ops are their references.
linear_infsa = linear_infsa_reference
pure_infsa = pure_infsa_reference

__all__ = [
    'linear_infsa', 'linear_infsa_reference', 'linear_infsa_key_weights', 'pure_infsa',
    'pure_infsa_reference', 'pure_infsa_scores'
]
