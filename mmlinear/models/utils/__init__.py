from .checks import check_choice, check_frozen_stages, normalize_indices, resolve_arch
from .freeze import freeze_modules
from .padding_mask import (attach_padding_mask, pixel_padding_mask, resolve_padding_mask,
                           token_padding_mask, valid_token_grids)
from .pos_embed import pos_embed_for_valid_regions, resize_pos_embed

__all__ = [
    'attach_padding_mask', 'check_choice', 'check_frozen_stages', 'freeze_modules', 'normalize_indices', 'pixel_padding_mask',
    'pos_embed_for_valid_regions',     'resize_pos_embed', 'resolve_arch', 'resolve_padding_mask', 'token_padding_mask',
    'valid_token_grids'
]
