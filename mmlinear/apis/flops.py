"""Parameter and FLOP counts of a model, on fake tensors so that any resolution is cheap."""
import torch
from torch import nn


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
