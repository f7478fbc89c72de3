"""Conversions and checks for row-major patch tokens on a (H', W') grid."""
from typing import Optional, Tuple

import torch
from torch import Tensor, nn


def patch_size_of(model: nn.Module) -> int:
    """The patch size p of a plain ViT-like backbone.

    Args:
        model (nn.Module): An mmlinear backbone (its ``patch_size``), or one whose
            ``patch_embed.projection`` is the patchifying convolution (mmpretrain's
            ``VisionTransformer``), whose stride is p.

    Returns:
        int: p.
    """
    patch = getattr(model, 'patch_size', None)
    if patch is None:
        projection = getattr(getattr(model, 'patch_embed', None), 'projection', None)
        if projection is None:
            raise TypeError(f'{type(model).__name__} has neither a patch_size nor a '
                            'patch_embed.projection to read the patch size from')
        patch = projection.stride[0]
    return patch


def patch_grid(model: nn.Module, image_hw: Tuple[int, int]) -> Tuple[int, int]:
    """The patch-token grid (H', W') of an image: the patch embeddings pad partial patches,
    so (ceil(H / p), ceil(W / p)).

    Args:
        model (nn.Module): The backbone (see :func:`patch_size_of`).
        image_hw (tuple[int, int]): The input's (H, W) in pixels.

    Returns:
        tuple[int, int]: (H', W').
    """
    p = patch_size_of(model)
    return -(-image_hw[0] // p), -(-image_hw[1] // p)


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
