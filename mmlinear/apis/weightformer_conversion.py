"""Released WeightFormer checkpoints to mmlinear's key layout.

The source is the reference (LeapLabTHU/WeightFormer) state dict, with the key layout of the
released checkpoints (``patch_embed.proj``, ``init_norm``, ``blocks.{i}.linear1.w`` / ``.w1`` /
``.w2`` / ``.wfm``, ``blocks.{i}.dwc.wfm.{0,2}``, ``norm``, ``head``): a raw state dict saved
with ``torch.save`` (``.pth`` / ``.pt`` / ``.bin``, possibly wrapped under ``'model'`` or
``'state_dict'`` as the reference training script and other tools save it) or a Hugging Face
``.safetensors`` file. The backbone keys get the ``backbone.`` prefix and the classifier
``head.weight`` / ``head.bias`` become ``head.fc.weight`` / ``head.fc.bias`` (mmpretrain
``LinearClsHead``). ``tools/model_converters/weightformer2mmlinear.py`` is the command line.
"""
from collections import OrderedDict
from typing import Dict

import torch

from mmlinear.models.backbones.weightformer import WeightFormer
from mmlinear.utils.checkpoint_conversion import (check_key_layout, count_blocks,
                                                  load_state_dict_file, strip_key_prefixes)

#: The released classifier keys and their mmpretrain ``LinearClsHead`` names; every other key
#: is the backbone's and gets ``backbone.``.
HEAD_MAP = {'head.weight': 'head.fc.weight', 'head.bias': 'head.fc.bias'}


def load_source(path: str) -> Dict[str, torch.Tensor]:
    """Read the released state dict.

    Args:
        path (str): A ``torch.save`` file (.pth-like, possibly wrapped under ``'model'`` or
            ``'state_dict'``) or a .safetensors file.

    Returns:
        dict[str, Tensor]: The state dict, DataParallel's ``module.`` prefixes stripped.
    """
    state = load_state_dict_file(path, ('model', 'state_dict'))
    # DataParallel / DDP saves
    return strip_key_prefixes(state, ('module.', ))


def infer_arch(state: Dict[str, torch.Tensor]) -> dict:
    """The WeightFormer arch dict of a released state dict.

    Args:
        state (dict[str, Tensor]): The released state dict.

    Returns:
        dict: ``embed_dims``, ``num_layers`` and ``feedforward_channels``.

    Raises:
        ValueError: If the state dict is not in the WeightFormer key layout.
    """
    try:
        embed_dims = state['patch_embed.proj.weight'].shape[0]
        num_layers = count_blocks(state)
        feedforward_channels = state['blocks.0.linear2.weight'].shape[1]
    except (KeyError, ValueError) as e:
        raise ValueError('the source is not in the WeightFormer key layout: cannot find '
                         'patch_embed.proj.weight, blocks.{i}.* and blocks.0.linear2.weight') from e
    return dict(
        embed_dims=embed_dims, num_layers=num_layers, feedforward_channels=feedforward_channels)


def check_layout(state: Dict[str, torch.Tensor]) -> dict:
    """Check the backbone keys and shapes against an mmlinear WeightFormer of the same size.

    Args:
        state (dict[str, Tensor]): The released state dict.

    Returns:
        dict: Its arch dict (:func:`infer_arch`).

    Raises:
        ValueError: Listing the missing, unexpected and mis-shaped keys.
    """
    arch = infer_arch(state)
    reference = WeightFormer(arch=arch, init_cfg=None).state_dict()
    backbone = {k: v for k, v in state.items() if k not in HEAD_MAP}
    check_key_layout(backbone, reference, f'the WeightFormer layout (arch {arch})')
    return arch


def convert(state: Dict[str, torch.Tensor]) -> 'OrderedDict[str, torch.Tensor]':
    """Map released keys to mmlinear ones (``backbone.*``, ``head.fc.*``), checked first.

    Args:
        state (dict[str, Tensor]): The released state dict.

    Returns:
        OrderedDict[str, Tensor]: The mmlinear state dict, in the source's key order.

    Raises:
        ValueError: As :func:`check_layout`.
    """
    check_layout(state)
    out = OrderedDict()
    for key, value in state.items():
        out[HEAD_MAP.get(key, f'backbone.{key}')] = value.contiguous()
    return out
