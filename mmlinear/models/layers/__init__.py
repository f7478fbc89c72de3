from mmlinear.utils.deprecation import renamed_attributes
from .band_conv import band_conv3x3
from .core_bank import (active_prefix, build_core_bank, check_core_budget, check_core_budgets,
                        farthest_point_sampling, fps_core_coords)
from .core_coordinate_head import build_coordinate_head, move_cores
from .core_periphery_attention import CorePeripheryAttention
from .dynamic_dwconv import DynamicDWConv
from .dynamic_layer import DynamicLayer
from .dynamic_linear import DynamicLinear, pool_tokens_2x2
from .infsa_attention import ATTN_TYPES, RHO_MODES, InfSAAttention
from .infvit_block import InfViTBlock
from .layer_norm_2d import LayerNorm2d
from .mixers import (EFFICIENT_ATTENTIONS, MIXERS, EfficientAttention, TokenMixer, Values,
                     build_mixer)
from .mlp import Mlp
from .online_core_attention import OnlineCoreAttention
from .patch_embed import PatchEmbed, adapt_input_channels
from .plain_block import PlainBlock
from .proj_patch_embed import ProjPatchEmbed
from .rope2d import (ROPE_POS_EXTRAPOLATIONS, CoordAugmentation, PatchRope, Rope2D, apply_rope,
                     patch_band_coords, patch_grid_coords, rotate_pairs)
from .veca_block import VECABlock
from .weightformer_block import WeightFormerBlock

__all__ = [
    'ATTN_TYPES', 'EFFICIENT_ATTENTIONS', 'MIXERS', 'RHO_MODES', 'ROPE_POS_EXTRAPOLATIONS',
    'CorePeripheryAttention', 'DynamicDWConv', 'DynamicLayer', 'DynamicLinear',
    'EfficientAttention', 'InfSAAttention', 'InfViTBlock', 'LayerNorm2d', 'Mlp',
    'OnlineCoreAttention', 'PatchEmbed', 'PlainBlock', 'ProjPatchEmbed', 'CoordAugmentation',
    'PatchRope', 'Rope2D', 'TokenMixer', 'Values', 'VECABlock', 'WeightFormerBlock',
    'active_prefix', 'adapt_input_channels', 'apply_rope', 'band_conv3x3', 'build_coordinate_head',
    'build_core_bank', 'build_mixer', 'check_core_budget', 'check_core_budgets',
    'farthest_point_sampling', 'fps_core_coords', 'move_cores', 'patch_band_coords',
    'patch_grid_coords', 'pool_tokens_2x2', 'rotate_pairs'
]

__getattr__ = renamed_attributes(globals(), dict(adapt_input_bands='adapt_input_channels'))
