"""One training step of a classifier, checked: forward, backward and optimizer step, every
loss, gradient and updated weight checked to be finite, the first non-finite one named.

``tools/analysis_tools/training_step.py`` runs it at a large input size with its time and peak
memory.
"""
import time
from typing import Dict, Iterable, Optional, Tuple

import torch
from mmengine.config import Config
from torch import Tensor, nn


class NonFiniteError(RuntimeError):
    """A loss, gradient or weight of the training step is NaN or infinite."""


def first_non_finite(tensors: Iterable[Tuple[str, Optional[Tensor]]]) -> Tuple[Optional[str], int]:
    """The first named tensor holding NaN or inf, and how many do.

    Args:
        tensors (Iterable[tuple[str, Tensor | None]]): (name, tensor) pairs; None is skipped
            (a parameter without a gradient).

    Returns:
        tuple[str | None, int]: The first non-finite tensor's name (None when all are
        finite) and the number of non-finite tensors.
    """
    first, count = None, 0
    for name, tensor in tensors:
        if tensor is not None and not bool(torch.isfinite(tensor).all()):
            first = first or name
            count += 1
    return first, count


def check_finite(tensors: Iterable[Tuple[str, Optional[Tensor]]], what: str) -> None:
    """Raise :class:`NonFiniteError` naming the first non-finite tensor.

    Args:
        tensors (Iterable[tuple[str, Tensor | None]]): (name, tensor) pairs.
        what (str): What the tensors are, for the message (e.g. 'gradient').

    Raises:
        NonFiniteError: If any tensor holds NaN or inf.
    """
    tensors = list(tensors)
    first, count = first_non_finite(tensors)
    if first is not None:
        raise NonFiniteError(f'non-finite {what}: {first} holds NaN or inf (the first of {count} '
                             f'of {len(tensors)} checked)')


def classifier_config(config: str, with_cp: bool) -> Config:
    """The config, its backbone checkpointing each block when ``with_cp``.

    Args:
        config (str): A classifier config file.
        with_cp (bool): Set ``model.backbone.with_cp``.

    Returns:
        Config: The loaded config.

    Raises:
        ValueError: If the config's model has no backbone with a ``with_cp`` option while
            ``with_cp`` is asked for.
    """
    cfg = Config.fromfile(config)
    if with_cp:
        if 'backbone' not in cfg.model:
            raise ValueError(f'{config} has no model.backbone to checkpoint (--with-cp)')
        cfg.model.backbone.with_cp = True
    return cfg


def training_step(model: nn.Module, optim_wrapper, images: Tensor, labels: Tensor,
                  autocast_dtype: Optional[torch.dtype]) -> Dict[str, float]:
    """One checked training step: forward and loss, backward, optimizer step.

    Args:
        model (nn.Module): An mmpretrain classifier in training mode.
        optim_wrapper (OptimWrapper): Its optimizer wrapper (clipping happens in ``step``).
        images (Tensor): (B, 3, H, W) normalised images.
        labels (Tensor): (B,) int64 class indices.
        autocast_dtype (torch.dtype, optional): The forward's autocast dtype; None is fp32.

    Returns:
        dict[str, float]: ``forward_s``, ``backward_s``, ``step_s`` (clipping, the update
        and zeroing the gradients), ``total_s`` (their sum; the finiteness checks are not
        timed), every loss term by name as mmengine logs it (``loss`` the total) and
        ``grad_norm`` (the L2 norm of all gradients before clipping).

    Raises:
        NonFiniteError: At the first non-finite weight, loss, gradient or updated weight.
    """
    from mmpretrain.structures import DataSample
    check_finite(model.named_parameters(), 'weight before the step')
    samples = [DataSample().set_gt_label(int(label)) for label in labels]
    start = time.perf_counter()
    with torch.autocast(
            images.device.type,
            dtype=autocast_dtype or torch.float32,
            enabled=autocast_dtype is not None):
        loss, log_vars = model.parse_losses(model.loss(images, samples))
    forward_s = time.perf_counter() - start
    check_finite(log_vars.items(), 'loss')
    start = time.perf_counter()
    optim_wrapper.backward(loss)
    backward_s = time.perf_counter() - start
    check_finite(((name, p.grad) for name, p in model.named_parameters()), 'gradient')
    grad_norm = torch.linalg.vector_norm(
        torch.stack([p.grad.float().norm() for p in model.parameters()
                     if p.grad is not None])).item()
    start = time.perf_counter()
    optim_wrapper.step()
    optim_wrapper.zero_grad()
    step_s = time.perf_counter() - start
    check_finite(model.named_parameters(), 'weight after the step')
    return dict(
        forward_s=forward_s,
        backward_s=backward_s,
        step_s=step_s,
        total_s=forward_s + backward_s + step_s,
        grad_norm=grad_norm,
        **{
            name: value.item()
            for name, value in log_vars.items()
        })
