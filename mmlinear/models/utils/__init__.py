from mmlinear.utils.precision import autocast_disabled, autocast_dtype
from .adaptive_pool_sums import AdaptivePoolSums, adaptive_bin_weights
from .checks import check_choice, check_frozen_stages, normalize_indices, resolve_arch
from .freeze import freeze
from .padding_mask import (attach_padding_mask, extend_padding_mask, pixel_padding_mask,
                           pixel_to_token_mask, resolve_padding_mask, valid_extents)
from .pos_embed import pos_embed_for_valid_regions, resize_pos_embed
from .tokens import check_tokens, masked_mean, patch_grid, patch_size_of, tokens_to_map

__all__ = [
    'AdaptivePoolSums', 'adaptive_bin_weights', 'attach_padding_mask', 'autocast_disabled',
    'autocast_dtype', 'check_choice', 'check_frozen_stages', 'check_tokens', 'extend_padding_mask',
    'freeze', 'masked_mean', 'normalize_indices', 'patch_grid', 'patch_size_of',
    'pixel_padding_mask', 'pixel_to_token_mask', 'pos_embed_for_valid_regions', 'resize_pos_embed',
    'resolve_arch', 'resolve_padding_mask', 'tokens_to_map', 'valid_extents'
]
