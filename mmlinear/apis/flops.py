"""Parameter, FLOP and attention-interaction counts of a backbone; FLOPs on fake tensors so that
any resolution is cheap."""
from typing import List, Optional

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
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    # Real weights with a fake input: every activation is fake, so nothing is allocated.
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.zeros(batch, 3, resolution, resolution)
        with counter, torch.no_grad(), sdpa_kernel(SDPBackend.MATH):
            model(x)
    return counter.get_total_flops()


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
