"""Padding masks for batches that mmdet / mmseg pad.

Vocabulary used throughout mmlinear: ``padding_mask`` is the (B, H, W) bool pixel mask at
backbone level; ``token_padding_mask`` the (B, N) bool mask over patch tokens below it; both
are True on padding.
"""
import threading
import weakref
from typing import Any, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

#: The padded batch a data preprocessor last handed on, per thread: a weak reference to the
#: tensor its mask is attached to, until a backbone resolves a padding mask (see
#: :func:`resolve_padding_mask`). Weak, so a batch that no longer exists is never waited for.
_handoff = threading.local()


def pixel_padding_mask(img_shapes: Sequence[Tuple[int, int]],
                       batch_shape: Tuple[int, int],
                       device: Optional[torch.device] = None) -> Tensor:
    """Build a (B, H, W) mask, True on the padded pixels of each image.

    Args:
        img_shapes (Sequence[tuple[int, int]]): (h, w) of each image's valid region, as the
            data samples' ``img_shape``.
        batch_shape (tuple[int, int]): (H, W) of the padded batch.
        device (torch.device, optional): Device of the mask.

    Returns:
        Tensor: (B, H, W) bool.
    """
    H, W = batch_shape
    rows = torch.arange(H, device=device)[None, :, None]
    cols = torch.arange(W, device=device)[None, None, :]
    heights = torch.tensor([s[0] for s in img_shapes], device=device)[:, None, None]
    widths = torch.tensor([s[1] for s in img_shapes], device=device)[:, None, None]
    return (rows >= heights) | (cols >= widths)


def pixel_to_token_mask(padding_mask: Tensor, patch_size: int) -> Tensor:
    """Reduce a pixel mask to patches: a patch is padding only if all its pixels are.

    Args:
        padding_mask (Tensor): (B, H, W) bool, True on padded pixels.
        patch_size (int): Patch side p; partial patches at the border count as in
            ``PatchEmbed`` (grid ceil(H / p) x ceil(W / p)).

    Returns:
        Tensor: (B, ceil(H / p) * ceil(W / p)) bool ``token_padding_mask``, True on padded
        tokens.
    """
    # Bands of whole patch rows reduce as the whole mask does; a band at a time, the float
    # copy the pooling needs stays small for masks of huge images (streamed inference).
    step = patch_size * 256
    bands = []
    for start in range(0, padding_mask.shape[1], step):
        valid = (~padding_mask[:, start:start + step]).float().unsqueeze(1)
        valid = F.max_pool2d(valid, patch_size, patch_size, ceil_mode=True)
        bands.append((valid == 0).flatten(1))
    return torch.cat(bands, dim=1)


def valid_extents(token_padding_mask: Tensor, hw_shape: Tuple[int, int]) -> Tensor:
    """The (h, w) extent of each image's valid token region.

    mmdet and mmseg pad at the bottom and right, so the valid region is the top-left
    rectangle that holds every valid token. An image that is all padding gets the extent
    (1, 1): its features then stay finite (a defined result rather than an empty grid), and
    they carry no information about the image.

    Args:
        token_padding_mask (Tensor): (B, H' * W') bool, True on padded tokens.
        hw_shape (tuple[int, int]): The token grid (H', W').

    Returns:
        Tensor: (B, 2) int64, the rows h and columns w of each image's valid region, each
        at least 1.
    """
    valid = ~token_padding_mask.view(-1, *hw_shape)
    rows = valid.any(dim=2).sum(dim=1)
    cols = valid.any(dim=1).sum(dim=1)
    return torch.stack([rows, cols], dim=1).clamp(min=1)


def extend_padding_mask(token_padding_mask: Optional[Tensor], num_extra_tokens: int,
                        num_tokens: int) -> Optional[Tensor]:
    """The key mask over ``[extra tokens; patches]`` that an attention module builds from
    the patch mask: the extra tokens (CLS, cores) lead and are never padding.

    Args:
        token_padding_mask (Tensor, optional): (B, N) bool, True on padded patches.
        num_extra_tokens (int): E, the extra tokens before the patches.
        num_tokens (int): T = E + N, the tokens the attention runs on.

    Returns:
        Tensor | None: (B, T) bool, or None without a patch mask.
    """
    if token_padding_mask is None:
        return None
    if token_padding_mask.dim() != 2 or token_padding_mask.dtype != torch.bool or \
            num_extra_tokens + token_padding_mask.shape[1] != num_tokens:
        raise ValueError(f'token_padding_mask must be a (B, N) bool tensor over the '
                         f'{num_tokens - num_extra_tokens} patch tokens ({num_tokens} tokens, '
                         f'{num_extra_tokens} extra), got {token_padding_mask.dtype} '
                         f'{tuple(token_padding_mask.shape)}')
    return F.pad(token_padding_mask, (num_extra_tokens, 0))


def attach_padding_mask(inputs: Tensor, img_shapes: Sequence[Tuple[int, int]]) -> Tensor:
    """Attach the pixel padding mask of a padded batch to the batch tensor itself.

    mmdet and mmseg detectors / segmentors call ``backbone(inputs)`` with the tensor only; a
    mask carried by that very tensor object reaches the backbone without changing their code,
    and cannot be mistaken for another batch's (a new tensor carries no mask). An operation
    that replaces the tensor on the way drops the attribute, so a batch that holds padding
    is also recorded (per thread, weakly): the next mmlinear backbone to run refuses an input
    without a mask while that batch still exists (see :func:`resolve_padding_mask`).

    Args:
        inputs (Tensor): (B, C, H, W) padded batch.
        img_shapes (Sequence[tuple[int, int]]): (h, w) of each image's valid region.

    Returns:
        Tensor: ``inputs``, with ``inputs.padding_mask`` of shape (B, H, W).
    """
    batch_shape = tuple(inputs.shape[-2:])
    inputs.padding_mask = pixel_padding_mask(img_shapes, batch_shape, inputs.device)
    # Decided from the shapes, not the mask, so that a batch on the GPU needs no sync.
    padded = any(tuple(shape) != batch_shape for shape in img_shapes)
    _handoff.batch = weakref.ref(inputs) if padded else None
    return inputs


def resolve_padding_mask(x: Any, padding_mask: Optional[Tensor]) -> Optional[Tensor]:
    """The padding mask a backbone should use: the argument, else the one attached to ``x``.

    Also closes the hand-off of :func:`attach_padding_mask`: when the batch a data
    preprocessor padded still exists and ``x`` carries no mask, the mask was dropped on the
    way (a crop, a resize or a copy of the batch makes a new tensor without the attribute),
    and the backbone would read padded pixels as image; that is an error, not a silently
    unmasked result.

    Args:
        x (Tensor | array-like): (B, C, H, W) the backbone input (an array read by rows for
            a streamed forward).
        padding_mask (Tensor, optional): (B, H, W), True on padded pixels.

    Returns:
        Tensor | None: (B, H, W) bool.
    """
    pending = getattr(_handoff, 'batch', None)
    _handoff.batch = None
    if padding_mask is None:
        padding_mask = getattr(x, 'padding_mask', None)
    if padding_mask is None:
        padded = None if pending is None else pending()
        if padded is not None:
            raise RuntimeError(
                f'the data preprocessor padded a batch of {padded.shape[0]} images to '
                f'{tuple(padded.shape[-2:])} and attached its padding mask to the batch tensor '
                f'(inputs.padding_mask), but the backbone received a tensor without it: '
                f'something between them replaced the tensor (a crop, a resize, a copy; '
                f"mmseg's 'slide' test mode crops), which drops the mask, so padded pixels "
                f'would be read as image. Carry the mask over (y.padding_mask = the mask of '
                f"y's pixels) or pass it: backbone(y, padding_mask)")
        return None
    expected = (x.shape[0], *x.shape[-2:])
    if not isinstance(padding_mask, Tensor):
        raise TypeError(f'padding_mask must be a bool tensor (True on padded pixels), got '
                        f'{type(padding_mask).__name__}')
    if tuple(padding_mask.shape) != expected:
        raise ValueError(f'padding_mask must have shape (B, H, W) = {expected}, got '
                         f'{tuple(padding_mask.shape)}')
    if padding_mask.dtype != torch.bool:
        # A 0/1 float or integer mask is ambiguous (which value marks padding?): refuse it
        # rather than guess.
        raise TypeError(f'padding_mask must be a bool tensor (True on padded pixels), got '
                        f'dtype {padding_mask.dtype}')
    return padding_mask
