"""Freezing of backbone stages."""
from typing import Iterable

from torch import nn


def freeze_modules(modules: Iterable[nn.Module]) -> None:
    """Put ``modules`` in eval mode and stop gradients to their parameters."""
    for module in modules:
        module.eval()
        for param in module.parameters():
            param.requires_grad = False
