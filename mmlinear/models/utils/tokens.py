"""Conversions and checks for row-major patch tokens on a (H', W') grid."""
from typing import Optional, Tuple

import torch
from torch import Tensor


def tokens_to_map(x: Tensor, hw_shape: Tuple[int, int]) -> Tensor:
    """Lay row-major tokens out as a feature map.

    Args:
        x (Tensor): (B, N, C) tokens, N = H' * W'.
        hw_shape (tuple[int, int]): The token grid (H', W').

    Returns:
        Tensor: (B, C, H', W').
    """
    B, _, C = x.shape
    return x.transpose(1, 2).reshape(B, C, *hw_shape)


def check_tokens(x: Tensor, hw_shape: Tuple[int, int],
                 token_padding_mask: Optional[Tensor]) -> None:
    """Raise a ValueError unless ``x`` is (B, H' * W', C) and the mask (B, H' * W') bool.

    Args:
        x (Tensor): (B, N, C) tokens.
        hw_shape (tuple[int, int]): The token grid (H', W').
        token_padding_mask (Tensor, optional): (B, N) bool, True on padded tokens.
    """
    H, W = hw_shape
    if x.dim() != 3 or x.shape[1] != H * W:
        raise ValueError(f'expected tokens of shape (B, H * W, C) with hw_shape {(H, W)}, got '
                         f'{tuple(x.shape)}')
    if token_padding_mask is not None and (token_padding_mask.shape != x.shape[:2]
                                           or token_padding_mask.dtype != torch.bool):
        raise ValueError(f'token_padding_mask must be a bool tensor of shape (B, N) = '
                         f'{tuple(x.shape[:2])}, got {token_padding_mask.dtype} '
                         f'{tuple(token_padding_mask.shape)}')


def masked_mean(x: Tensor, token_padding_mask: Optional[Tensor]) -> Tensor:
    """Average the tokens that are not padding.

    Args:
        x (Tensor): (B, N, C) tokens.
        token_padding_mask (Tensor, optional): (B, N) bool, True on padded tokens; None
            averages all tokens.

    Returns:
        Tensor: (B, C); zeros for an image whose tokens are all padding.
    """
    if token_padding_mask is None:
        return x.mean(dim=1)
    valid = (~token_padding_mask).to(x.dtype)
    return (x * valid[..., None]).sum(1) / valid.sum(1, keepdim=True).clamp(min=1)
