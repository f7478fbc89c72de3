"""The token mixers of :class:`InfSAAttention`, one per ``attn_type``, each over
(B, H, T, d) queries, keys and values: softmax attention, Pure and Linear InfSA, the
no-mixing control and the efficient-attention baselines of the InfSA paper's comparison."""
import inspect
from typing import Dict, List, Tuple, Type

from .agent_attention import AgentAttention
from .efficient_attention import EfficientAttention
from .elu_linear_attention import EluLinearAttention
from .infsa_mixer import InfSAMixer
from .kernel_attention import KernelAttention, kernel_attention
from .linear_infsa_attention import LinearInfSAAttention
from .linformer_attention import LinformerAttention
from .no_mixing import NoMixing
from .nystrom_attention import NystromAttention, iterative_pinv
from .performer_attention import PerformerAttention, orthogonal_gaussian_features
from .pure_infsa_attention import PureInfSAAttention
from .softmax_attention import SoftmaxAttention
from .token_mixer import TokenMixer
from .values import Values, merge_heads, project_pooled_inputs, split_heads

#: ``attn_type`` -> mixer class: the one table of the attention types.
MIXERS: Dict[str, Type[TokenMixer]] = {
    'softmax': SoftmaxAttention,
    'pure': PureInfSAAttention,
    'linear': LinearInfSAAttention,
    'none': NoMixing,
    'elu_linear': EluLinearAttention,
    'performer': PerformerAttention,
    'linformer': LinformerAttention,
    'nystromformer': NystromAttention,
    'agent': AgentAttention,
}
#: The efficient-attention baselines among them (options through ``mixer_cfg``, no
#: attention dropout).
EFFICIENT_ATTENTIONS: Dict[str, Type[EfficientAttention]] = {
    attn_type: mixer
    for attn_type, mixer in MIXERS.items() if issubclass(mixer, EfficientAttention)
}


def _option_parameters(attn_type: str) -> List[inspect.Parameter]:
    """The constructor parameters of ``attn_type``'s mixer after ``head_dims``."""
    return list(inspect.signature(MIXERS[attn_type]).parameters.values())[1:]


def mixer_options(attn_type: str) -> Tuple[str, ...]:
    """The options the mixer of ``attn_type`` takes besides ``head_dims``, in order."""
    return tuple(p.name for p in _option_parameters(attn_type))


def build_mixer(attn_type: str, head_dims: int, **options) -> TokenMixer:
    """The mixer of ``attn_type`` for heads of width ``head_dims``.

    Args:
        attn_type (str): A key of :data:`MIXERS`.
        head_dims (int): d, the width of a head.
        **options: The mixer's own arguments (e.g. ``num_features`` for 'performer').

    Returns:
        TokenMixer: The mixer.

    Raises:
        ValueError: On an option the mixer does not take, naming the ones it takes, or a
            required one missing.
    """
    parameters = _option_parameters(attn_type)
    allowed = [p.name for p in parameters]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f'{attn_type!r} attention takes no option {", ".join(unknown)}; its '
                         f'options: {", ".join(allowed)}')
    missing = [p.name for p in parameters if p.default is p.empty and p.name not in options]
    if missing:
        raise ValueError(f'{attn_type!r} attention needs {", ".join(missing)} in mixer_cfg')
    return MIXERS[attn_type](head_dims, **options)


__all__ = [
    'EFFICIENT_ATTENTIONS', 'MIXERS', 'AgentAttention', 'EfficientAttention', 'EluLinearAttention',
    'InfSAMixer', 'KernelAttention', 'LinearInfSAAttention', 'LinformerAttention', 'NoMixing',
    'NystromAttention', 'PerformerAttention', 'PureInfSAAttention', 'SoftmaxAttention',
    'TokenMixer', 'Values', 'build_mixer', 'iterative_pinv', 'kernel_attention', 'merge_heads',
    'mixer_options', 'orthogonal_gaussian_features', 'project_pooled_inputs', 'split_heads'
]
