"""Parameter, FLOP and attention-interaction counts of a backbone; FLOPs on fake tensors so that
any resolution is cheap."""
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import nn

from mmlinear.models.utils import patch_grid


def count_params(model: nn.Module) -> int:
    """Number of parameters (trainable or not) of ``model``.

    Args:
        model (nn.Module): Any module.

    Returns:
        int: The number of scalar parameters.
    """
    return sum(p.numel() for p in model.parameters())


def _flop_counts(model: nn.Module, resolution: int, batch: int) -> Dict[str, Dict[Any, int]]:
    """The counter's FLOPs of one forward pass on a fake input, by module and operator: the
    whole pass under ``'Global'``, each module under its class name then its attribute path
    (``'VECA.blocks.0.attn'``); see :func:`count_flops`."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    # Real weights with a fake input: every activation is fake, so nothing is allocated.
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.zeros(batch, 3, resolution, resolution)
        with counter, torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
            model(x)
    return counter.get_flop_counts()


def count_flops(model: nn.Module, resolution: int, batch: int = 1) -> int:
    """FLOPs of one forward pass on a ``batch x 3 x resolution x resolution`` fake input.

    ``torch.utils.flop_counter.FlopCounterMode`` counts matmuls and convolutions, two FLOPs per
    multiply-add (norms, activations, softmax and interpolation are not counted). The input is
    a fake tensor, so no activation memory is allocated and 9216 x 9216 costs as little as
    224 x 224. Scaled-dot-product attention runs through PyTorch's math backend, because the
    fused CPU kernels have no FLOP formula registered and would count as zero.

    Args:
        model (nn.Module): The backbone, in eval mode.
        resolution (int): Square input side in pixels.
        batch (int): Batch size. Defaults to 1.

    Returns:
        int: Matmul and convolution FLOPs (2 per multiply-add).
    """
    return sum(_flop_counts(model, resolution, batch)['Global'].values())


def backbone_blocks(model: nn.Module) -> Tuple[str, nn.ModuleList]:
    """The blocks of a backbone and the attribute that holds them.

    Args:
        model (nn.Module): An mmlinear backbone (``blocks``) or mmpretrain's
            ``VisionTransformer`` (``layers``).

    Returns:
        tuple[str, nn.ModuleList]: The attribute name and the blocks.

    Raises:
        ValueError: A backbone with neither.
    """
    for name in ('blocks', 'layers'):
        blocks = getattr(model, name, None)
        if isinstance(blocks, nn.ModuleList):
            return name, blocks
    raise ValueError(f'{type(model).__name__} has no blocks (a ModuleList blocks or layers) '
                     'to count one of')


def count_block_flops(model: nn.Module,
                      resolution: int,
                      index: int = 0,
                      batch: int = 1) -> Tuple[int, Optional[int]]:
    """FLOPs of one block within a forward pass of the whole backbone, and of its attention.

    Counted as :func:`count_flops` counts the whole pass (the same fake-input run), on the
    tokens the block sees there: VECA's K cores and N patches, a ViT's class token and N
    patches.

    Args:
        model (nn.Module): The backbone, in eval mode (see :func:`backbone_blocks`).
        resolution (int): Square input side in pixels.
        index (int): Which block, from 0. Defaults to 0.
        batch (int): Batch size. Defaults to 1.

    Returns:
        tuple[int, int | None]: The block's FLOPs and those of its attention module
        (``attn``; None for a block without one, such as WeightFormer's).

    Raises:
        ValueError: A backbone without blocks, or an index outside them.
    """
    name, blocks = backbone_blocks(model)
    if not 0 <= index < len(blocks):
        raise ValueError(f'block {index} of {type(model).__name__}: it has {len(blocks)} blocks, '
                         f'0 to {len(blocks) - 1}')
    counts = _flop_counts(model, resolution, batch)
    # The counter names a module by the root's class name and its attribute path.
    prefix = f'{type(model).__name__}.{name}.{index}'
    attention = sum(counts[f'{prefix}.attn'].values()) if hasattr(blocks[index], 'attn') else None
    return sum(counts[prefix].values()), attention


def count_attention_interactions(model: nn.Module, resolution: int,
                                 **call_kwargs) -> Optional[List[int]]:
    """Query-key pairs that each block's attention scores per head, on one square image.

    mmlinear backbones count their own (``attention_interactions``: ``(E + N)^2`` for softmax
    and Pure InfSA, ``E + N`` for Linear-InfSA, ``2 N K + K^2`` for VECA's K cores, none for
    WeightFormer); mmpretrain's ``VisionTransformer`` scores every pair of its tokens.

    Args:
        model (nn.Module): The backbone.
        resolution (int): Square input side in pixels.
        **call_kwargs: Forward arguments that change the token count (VECA's
            ``active_cores``).

    Returns:
        list[int] | None: One count per block; None for a backbone this function does not
        know.
    """
    if hasattr(model, 'attention_interactions'):
        return model.attention_interactions((1, 3, resolution, resolution), **call_kwargs)
    from mmpretrain.models import VisionTransformer
    if isinstance(model, VisionTransformer):
        num_tokens = count_patch_tokens(model, resolution) + model.num_extra_tokens
        return [num_tokens**2] * len(model.layers)
    return None


def count_patch_tokens(model: nn.Module, resolution: int) -> int:
    """Patch tokens N of a square image: ``ceil(resolution / p)^2`` (mmlinear backbones and
    mmpretrain's ViT both pad partial patches).

    Args:
        model (nn.Module): An mmlinear backbone (``patch_size``) or mmpretrain's
            ``VisionTransformer`` (the stride of ``patch_embed.projection``).
        resolution (int): Square input side in pixels.

    Returns:
        int: N.
    """
    grid_h, grid_w = patch_grid(model, (resolution, resolution))
    return grid_h * grid_w
