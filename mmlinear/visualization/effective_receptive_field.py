"""Effective receptive fields (Luo et al., 2016): how strongly each input pixel moves the
output at the centre of a backbone's feature map.

The map is the absolute gradient of the central output position (its channels' positive
parts summed) with respect to the input pixels, summed over the input channels and accumulated
over images, as RepLKNet and the WeightFormer paper (its Figure 3) draw it. Its spread is
summarised by the high-contribution area ratio: the smallest fraction of the pixels that holds
a given share of the whole map.
"""
from typing import Dict, Optional, Sequence

import torch
from torch import Tensor, nn

from mmlinear.apis import backbone_config, build_backbone

#: The shares of the total contribution whose area ratios are reported by default.
DEFAULT_THRESHOLDS = (0.2, 0.3, 0.5, 0.99)


def effective_receptive_field(backbone: nn.Module, x: Tensor, out_index: int = -1) -> Tensor:
    """The effective receptive field of a backbone's central output position on a batch.

    The output at the centre ``(h // 2, w // 2)`` of the chosen feature map is passed
    through a ReLU, summed over its channels and over the batch and differentiated with
    respect to the input once: with the backbone in eval mode no image influences another's
    output, so each image's gradient is its own. The ReLU is RepLKNet's: the backbones end in
    a LayerNorm, whose outputs sum over the channels to the sum of its bias whatever the
    input, so without it the initial weights (unit scale, zero bias) would have a gradient of
    exactly zero.

    Args:
        backbone (nn.Module): A backbone in eval mode returning a (B, C, h, w) feature map or
            a tuple / list of them (the mmlinear backbones and mmpretrain's
            ``VisionTransformer`` with ``out_type='featmap'``).
        x (Tensor): (B, 3, H, W) images, normalised as the backbone expects.
        out_index (int): Which map of a tuple of outputs to take. Defaults to -1 (the last).

    Returns:
        Tensor: (H, W) float32, non-negative: ``sum_b sum_c |d(sum_k relu(y_b[k, h // 2,
        w // 2])) / d x_b[c]|`` over the images b and input channels c.

    Raises:
        ValueError: If the backbone is in training mode, ``out_index`` names no output or the
            output is not a (B, C, h, w) map.
    """
    if backbone.training:
        raise ValueError('the backbone must be in eval mode (call .eval()): in training mode '
                         'dropout and batch statistics would mix the images of the batch')
    x = x.detach().clone().requires_grad_(True)
    outputs = backbone(x)
    if isinstance(outputs, Tensor):
        outputs = (outputs, )
    if not -len(outputs) <= out_index < len(outputs):
        raise ValueError(f'out_index {out_index} names no output: the backbone returned '
                         f'{len(outputs)}, so it must be in [{-len(outputs)}, {len(outputs) - 1}]')
    featmap = outputs[out_index]
    if featmap.dim() != 4:
        raise ValueError(f'the effective receptive field needs a (B, C, h, w) feature map '
                         f"(out_type='featmap'), got an output of shape {tuple(featmap.shape)}")
    h, w = featmap.shape[-2:]
    centre = featmap[:, :, h // 2, w // 2].relu().sum()
    grad, = torch.autograd.grad(centre, x)
    return grad.abs().sum(dim=(0, 1)).float()


def area_ratios(erf: Tensor,
                thresholds: Sequence[float] = DEFAULT_THRESHOLDS) -> Dict[float, float]:
    """The high-contribution area ratios of an effective receptive field.

    For a share t, the ratio is the smallest fraction of the pixels whose values sum to at
    least t of the map's total: the pixels are taken from the largest value down. A small
    ratio is a concentrated field, a large one a spread-out field.

    Args:
        erf (Tensor): (H, W) non-negative map, from :func:`effective_receptive_field`.
        thresholds (Sequence[float]): Shares t in (0, 1].

    Returns:
        dict[float, float]: t -> ratio in (0, 1].

    Raises:
        ValueError: If a share is outside (0, 1], the map has a negative value or is all zero.
    """
    bad = [t for t in thresholds if not 0 < t <= 1]
    if bad:
        raise ValueError(f'thresholds must be shares in (0, 1], got {bad}')
    values = erf.detach().flatten().double()
    if bool((values < 0).any()):
        raise ValueError('an effective receptive field is non-negative; this map has '
                         f'values down to {float(values.min())}')
    cumulative = values.sort(descending=True).values.cumsum(0)
    total = cumulative[-1]
    if total <= 0:
        raise ValueError('the map is all zero: the output does not depend on the input')
    ratios = {}
    for t in thresholds:
        # The first position where the running sum reaches t of the total, counted from 1; a
        # share reached up to rounding (t * total a few ulps above the sum) counts as reached.
        needed = int(torch.searchsorted(cumulative, t * total * (1 - 1e-12))) + 1
        ratios[t] = min(needed, values.numel()) / values.numel()
    return ratios


def build_featmap_backbone(config: str, checkpoint: Optional[str]) -> nn.Module:
    """A config's backbone returning feature maps, in eval mode: initialised (with the
    current random state), or with the backbone of ``checkpoint`` loaded strictly.

    Args:
        config (str): A config file (its ``model.backbone``) or a preset.
        checkpoint (str, optional): A checkpoint holding the backbone under ``backbone.``.

    Returns:
        nn.Module: The backbone, its ``out_type`` 'featmap'.

    Raises:
        ValueError: If the checkpoint is missing or does not hold the config's backbone.
    """
    overrides = dict(out_type='featmap')
    init_cfg = backbone_config(config)[0].get('init_cfg')
    if isinstance(init_cfg, dict) and init_cfg.get('type') == 'Pretrained':
        # A dense config starting from a classifier: "before training" is its own random
        # initialisation, and a given checkpoint replaces every weight anyway.
        overrides['init_cfg'] = None
    try:
        backbone = build_backbone(config, overrides, checkpoint)
    except FileNotFoundError:
        raise ValueError(f'checkpoint not found: {checkpoint}')
    except RuntimeError as error:  # strict loading: missing or unexpected keys, shapes
        first = str(error).strip().splitlines()[0]
        raise ValueError(f'{checkpoint} does not hold the backbone of {config}: {first}')
    backbone.eval()  # not chained: mmpretrain's ViT returns None from train()
    return backbone
