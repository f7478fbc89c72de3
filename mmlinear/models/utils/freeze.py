"""Freezing of backbone stages."""
from typing import Iterable, Union

from torch import nn


def freeze(parts: Iterable[Union[nn.Module, nn.Parameter]]) -> None:
    """Stop gradients to ``parts``; modules also go to eval mode (dropout, norms).

    Args:
        parts (Iterable[nn.Module | nn.Parameter]): Modules, and parameters that belong to
            no module of their own (a CLS token, a position table).
    """
    for part in parts:
        if isinstance(part, nn.Parameter):
            part.requires_grad = False
            continue
        part.eval()
        for param in part.parameters():
            param.requires_grad = False
