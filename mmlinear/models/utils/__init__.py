from .checks import check_choice, normalize_indices, resolve_arch
from .freeze import freeze_modules
from .padding_mask import pixel_padding_mask, token_padding_mask
from .pos_embed import resize_pos_embed

__all__ = [
    'check_choice', 'freeze_modules', 'normalize_indices', 'resolve_arch', 'pixel_padding_mask', 'resize_pos_embed',
    'token_padding_mask'
]
