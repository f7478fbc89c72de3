"""Per-patch saliency maps from a backbone's attention, for visualisation and evaluation.

Two sources are understood:

- A backbone with ``forward_attention_maps(x, **kwargs)`` (InfViT and VECA, which share
  one contract) returning one entry per layer whose last axis runs over the keys, the
  patch tokens last: (B, H, S) key weights (Linear-InfSA's ``a``) or (B, H, Q, S) attention
  rows (Pure InfSA, softmax, VECA's core-to-token attention). The saliency of a patch is the
  weight it receives, averaged over the heads and over the query rows (``query='mean'``, the
  quadratic analogue of Linear-InfSA's global key distribution) or taken from the first
  query row (``query='first'``, the CLS row of a ViT or the first core).
- A backbone with :class:`~mmlinear.models.layers.DynamicDWConv` layers (WeightFormer): the
  response of the dynamic depthwise convolution, i.e. the channel L2 norm of its output at
  every token, captured with forward hooks (the backbone has no attention matrix).
"""
from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmlinear.models.layers import DynamicDWConv
from mmlinear.models.utils import patch_grid

QUERY_MODES = ('mean', 'first')


def _attention_saliency(backbone: nn.Module, x: Tensor, layer: int, query: str,
                        **forward_kwargs) -> Tensor:
    maps = backbone.forward_attention_maps(x, **forward_kwargs)
    if not -len(maps) <= layer < len(maps):
        raise ValueError(f'layer must lie in [{-len(maps)}, {len(maps) - 1}] for this '
                         f'backbone, got {layer}')
    weights = maps[layer]
    if weights is None:
        raise ValueError(f'layer {layer} has no attention weights (e.g. attn_type none)')
    h, w = patch_grid(backbone, x.shape[-2:])
    patches = weights[..., -h * w:].float()  # the patch tokens come after any extra tokens
    if patches.ndim == 4:
        patches = patches.mean(2) if query == 'mean' else patches[:, :, 0]
    elif patches.ndim != 3:
        raise ValueError(f'attention maps must be (B, H, S) or (B, H, Q, S), got '
                         f'{tuple(weights.shape)}')
    return patches.mean(1).reshape(x.shape[0], h, w)


def _dynamic_conv_saliency(backbone: nn.Module, x: Tensor, layer: int) -> Tensor:
    convs = [m for m in backbone.modules() if isinstance(m, DynamicDWConv)]
    if not -len(convs) <= layer < len(convs):
        raise ValueError(f'layer must lie in [{-len(convs)}, {len(convs) - 1}] (the backbone '
                         f'has {len(convs)} dynamic convolutions), got {layer}')
    captured: List[Tensor] = []
    # The dynamic convolutions of a plain backbone run on the patch grid itself, so the
    # (B, N, C) output folds back to it without reading the layer's arguments.
    grid = patch_grid(backbone, x.shape[-2:])

    def hook(module: nn.Module, args: tuple, output: Tensor) -> None:
        captured.append(output.float().norm(dim=-1).reshape(output.shape[0], *grid))

    handle = convs[layer].register_forward_hook(hook)
    try:
        backbone(x)
    finally:
        handle.remove()
    return captured[0]


@torch.no_grad()
def attention_saliency(backbone: nn.Module,
                       x: Tensor,
                       layer: int = -1,
                       query: str = 'mean',
                       **forward_kwargs) -> Tensor:
    """Saliency of every patch token of ``x`` according to ``backbone``.

    Args:
        backbone (nn.Module): InfViT-like (``forward_attention_maps``) or WeightFormer-like
            (dynamic depthwise convolutions).
        x (Tensor): (B, 3, H, W) normalised images.
        layer (int): Which attention layer (or dynamic convolution); negative counts from
            the end. Defaults to -1.
        query (str): 'mean' or 'first', see the module docstring. Defaults to 'mean'.
        **forward_kwargs: Passed to ``forward_attention_maps`` (e.g. ``active_cores``).

    Returns:
        Tensor: (B, ceil(H / p), ceil(W / p)) float saliency, larger is more salient.

    Raises:
        TypeError: If the backbone offers neither source.
    """
    if query not in QUERY_MODES:
        raise ValueError(f'unknown query {query!r}; allowed: {", ".join(QUERY_MODES)}')
    was_training = backbone.training
    backbone.eval()
    try:
        if hasattr(backbone, 'forward_attention_maps'):
            return _attention_saliency(backbone, x, layer, query, **forward_kwargs)
        if any(isinstance(m, DynamicDWConv) for m in backbone.modules()):
            return _dynamic_conv_saliency(backbone, x, layer)
    finally:
        backbone.train(was_training)
    raise TypeError(f'{type(backbone).__name__} has neither forward_attention_maps nor '
                    f'dynamic depthwise convolutions to read a saliency map from')


def upsample_saliency(saliency: Tensor, image_hw: Tuple[int, int]) -> Tensor:
    """Patch saliency upsampled bilinearly to pixels, cropped to the image.

    The map is first upsampled to whole patches, then the padding that the patch embedding
    added on the bottom and right is cut off, so each pixel takes its own patch's value.

    Args:
        saliency (Tensor): (B, h, w) patch saliency.
        image_hw (tuple[int, int]): The image's (H, W), with h = ceil(H / p).

    Returns:
        Tensor: (B, H, W) float saliency.
    """
    patch_h = -(-image_hw[0] // saliency.shape[1])
    patch_w = -(-image_hw[1] // saliency.shape[2])
    full = F.interpolate(
        saliency[:, None].float(),
        size=(saliency.shape[1] * patch_h, saliency.shape[2] * patch_w),
        mode='bilinear',
        align_corners=False)[:, 0]
    return full[:, :image_hw[0], :image_hw[1]]


def minmax(maps: Tensor) -> Tensor:
    """Scale every map of a batch to [0, 1] (a constant map to 0).

    Args:
        maps (Tensor): (B, H, W) maps.

    Returns:
        Tensor: (B, H, W) maps, each with its minimum at 0 and its maximum at 1.
    """
    flat = maps.flatten(1)
    low, high = flat.min(1).values, flat.max(1).values
    return ((flat - low[:, None]) / (high - low).clamp(min=1e-12)[:, None]).view_as(maps)
