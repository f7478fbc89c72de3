from .dynamic_dwconv import DynamicDWConv, tokens_to_map
from .dynamic_linear import DynamicLinear, pool_tokens_2x2
from .infsa_attention import ATTN_TYPES, RHO_MODES, InfSAAttention
from .infvit_block import InfViTBlock
from .layer_norm_2d import LayerNorm2d
from .mlp import Mlp
from .patch_embed import PatchEmbed

__all__ = [
    'ATTN_TYPES', 'RHO_MODES', 'DynamicDWConv', 'DynamicLinear', 'InfSAAttention',
    'InfViTBlock', 'LayerNorm2d', 'Mlp', 'PatchEmbed', 'pool_tokens_2x2', 'tokens_to_map'
]
