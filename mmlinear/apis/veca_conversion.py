"""Released VECA checkpoints to mmlinear's key layout.

The source is a ``.pt`` of the official code (github.com/alansong1322/VECA): a dict whose
``student`` entry is the model state dict (next to ``config``, optimizer and scheduler
states), possibly with ``module.`` / ``student.`` key prefixes; a plain state dict works too.
mmlinear.VECA keeps the released key names, so the conversion strips those prefixes, checks
every key and shape against an mmlinear.VECA of the same size and adds ``backbone.``.

The head count cannot be read from the weights: it is the one asked for if given, else the
checkpoint's ``config['num_heads']``, else embed_dims / 64 (the head width of every released
family). ``tools/model_converters/veca2mmlinear.py`` is the command line.
"""
from collections import OrderedDict
from typing import Dict, Optional, Tuple

import torch

from mmlinear.models.backbones.veca import VECA
from mmlinear.utils.checkpoint_conversion import (check_key_layout, count_blocks, find_state_dict,
                                                  load_torch_checkpoint, strip_key_prefixes)

#: The head width of every released family.
HEAD_DIMS = 64


def load_source(path: str) -> Tuple[Dict[str, torch.Tensor], dict]:
    """Read a released checkpoint.

    Args:
        path (str): The official code's ``.pt`` (a ``student`` state dict) or a state dict.

    Returns:
        tuple[dict[str, Tensor], dict]: The state dict, ``module.`` / ``student.`` prefixes
        stripped, and the checkpoint's training config (empty without one).
    """
    checkpoint = load_torch_checkpoint(path)
    state = find_state_dict(checkpoint, ('student', 'state_dict', 'model'), path)
    # The official loader strips the same prefixes (DDP ``module.``, ``student.``).
    state = strip_key_prefixes(state, ('module.', 'student.'))
    config = checkpoint.get('config') if isinstance(checkpoint, dict) else None
    return state, config if isinstance(config, dict) else {}


def infer_model_args(state: Dict[str, torch.Tensor],
                     config: dict,
                     num_heads: Optional[int] = None) -> dict:
    """The mmlinear.VECA arguments of a released state dict.

    Args:
        state (dict[str, Tensor]): The released state dict.
        config (dict): The checkpoint's training config (its ``num_heads``, if any).
        num_heads (int, optional): The head count; without it, ``config['num_heads']``, else
            embed_dims / :data:`HEAD_DIMS`.

    Returns:
        dict: ``arch`` (embed_dims, num_layers, num_heads, feedforward_channels),
        ``out_channels`` (None without an output projection), ``patch_size`` and
        ``in_channels``.

    Raises:
        ValueError: If the state dict is not in the VECA key layout, or embed_dims is not
            divisible by the head count.
    """
    try:
        conv = state['patch_embed.proj.weight']
        embed_dims, in_channels, patch_size = conv.shape[0], conv.shape[1], conv.shape[2]
        num_layers = count_blocks(state)
        feedforward_channels = state['blocks.0.fc2.weight'].shape[1]
    except (KeyError, ValueError) as e:
        raise ValueError('the source is not in the VECA key layout: cannot find '
                         'patch_embed.proj.weight, blocks.{i}.* and blocks.0.fc2.weight') from e
    heads = num_heads or config.get('num_heads') or max(embed_dims // HEAD_DIMS, 1)
    if embed_dims % heads:
        raise ValueError(f'embed_dims {embed_dims} is not divisible by num_heads {heads}')
    out_proj = state.get('output_proj.weight')
    return dict(
        arch=dict(
            embed_dims=embed_dims,
            num_layers=num_layers,
            num_heads=int(heads),
            feedforward_channels=feedforward_channels),
        out_channels=None if out_proj is None else out_proj.shape[0],
        patch_size=patch_size,
        in_channels=in_channels)


def convert(state: Dict[str, torch.Tensor], model_args: dict) -> 'OrderedDict[str, torch.Tensor]':
    """Check ``state`` against an mmlinear.VECA built with ``model_args`` and add
    ``backbone.`` to its keys.

    Args:
        state (dict[str, Tensor]): The released state dict.
        model_args (dict): The VECA arguments (:func:`infer_model_args`).

    Returns:
        OrderedDict[str, Tensor]: The mmlinear state dict, in the source's key order.

    Raises:
        ValueError: Listing the missing, unexpected and mis-shaped keys.
    """
    # On the meta device: only the key names and shapes are needed, even for VECA-L.
    with torch.device('meta'):
        reference = VECA(**model_args, init_cfg=None).state_dict()
    check_key_layout(state, reference, f'the VECA layout ({model_args})')
    return OrderedDict((f'backbone.{k}', v.contiguous()) for k, v in state.items())
