"""Efficient-attention baselines of the InfSA paper's comparison, each a token mixer over
(B, H, T, d) queries, keys and values that :class:`InfSAAttention` runs in the same body."""
import inspect
from typing import Dict, Type

from .base_attention import EfficientAttention
from .elu_linear_attention import EluLinearAttention
from .kernel_attention import kernel_attention
from .linformer_attention import LinformerAttention
from .nystrom_attention import NystromAttention, iterative_pinv
from .performer_attention import PerformerAttention, orthogonal_gaussian_features

#: ``attn_type`` -> mixer class.
EFFICIENT_ATTENTIONS: Dict[str, Type[EfficientAttention]] = {
    'elu_linear': EluLinearAttention,
    'performer': PerformerAttention,
    'linformer': LinformerAttention,
    'nystromformer': NystromAttention,
}


def build_efficient_attention(attn_type: str, head_dims: int, **options) -> EfficientAttention:
    """The mixer of ``attn_type`` for heads of width ``head_dims``.

    Args:
        attn_type (str): A key of :data:`EFFICIENT_ATTENTIONS`.
        head_dims (int): d, the width of a head.
        **options: The mixer's own arguments (e.g. ``num_features`` for 'performer').

    Returns:
        EfficientAttention: The mixer.

    Raises:
        ValueError: On an option the mixer does not take, naming the ones it takes, or a
            required one missing.
    """
    mixer = EFFICIENT_ATTENTIONS[attn_type]
    parameters = list(inspect.signature(mixer).parameters.values())[1:]
    allowed = [p.name for p in parameters]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f'{attn_type!r} attention takes no option {", ".join(unknown)}; its '
                         f'options: {", ".join(allowed)}')
    missing = [p.name for p in parameters if p.default is p.empty and p.name not in options]
    if missing:
        raise ValueError(f'{attn_type!r} attention needs {", ".join(missing)} in mixer_cfg')
    return mixer(head_dims, **options)


__all__ = [
    'EFFICIENT_ATTENTIONS', 'EfficientAttention', 'EluLinearAttention', 'LinformerAttention',
    'NystromAttention', 'PerformerAttention', 'build_efficient_attention', 'iterative_pinv',
    'kernel_attention', 'orthogonal_gaussian_features'
]
