"""Convert a released VECA checkpoint to an mmlinear checkpoint.

The source is a ``.pt`` of the official code (github.com/alansong1322/VECA): a dict whose
``student`` entry is the model state dict (next to ``config``, optimizer and scheduler
states), possibly with ``module.`` / ``student.`` key prefixes; a plain state dict works too.
mmlinear.VECA keeps the released key names, so the conversion strips those prefixes, checks
every key and shape against an mmlinear.VECA of the same size and adds ``backbone.``. The
destination is ``{'state_dict': {'backbone.<key>': ...}, 'meta': {...}}``; ``meta['arch']``
and ``meta['out_channels']`` are the VECA arguments the weights need.

The head count cannot be read from the weights: it is ``--num-heads`` if given, else the
checkpoint's ``config['num_heads']``, else embed_dims / 64 (the head width of every released
family).

Usage:
    python tools/model_converters/veca2mmlinear.py SRC DST [--force] [--num-heads H]
"""
import argparse
import os
import os.path as osp
import re
import sys
from collections import OrderedDict
from typing import Dict, Optional, Tuple

import torch

from mmlinear.utils.checkpoint_conversion import (CONVERSION_ERRORS, check_key_layout,
                                                  find_state_dict, load_torch_checkpoint,
                                                  strip_key_prefixes)

HEAD_DIMS = 64  # the head width of every released family


def load_source(path: str) -> Tuple[Dict[str, torch.Tensor], dict]:
    """The released state dict (prefixes stripped) and its training config (may be empty)."""
    checkpoint = load_torch_checkpoint(path)
    state = find_state_dict(checkpoint, ('student', 'state_dict', 'model'), path)
    # The official loader strips the same prefixes (DDP ``module.``, ``student.``).
    state = strip_key_prefixes(state, ('module.', 'student.'))
    config = checkpoint.get('config') if isinstance(checkpoint, dict) else None
    return state, config if isinstance(config, dict) else {}


def infer_model_args(state: Dict[str, torch.Tensor],
                     config: dict,
                     num_heads: Optional[int] = None) -> dict:
    """The mmlinear.VECA arguments (arch dict, out_channels, patch size) of a state dict.

    Raises:
        ValueError: If the state dict is not in the VECA key layout.
    """
    try:
        conv = state['patch_embed.proj.weight']
        embed_dims, in_channels, patch_size = conv.shape[0], conv.shape[1], conv.shape[2]
        num_layers = 1 + max(
            int(m.group(1)) for m in (re.match(r'blocks\.(\d+)\.', k) for k in state) if m)
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
    ``backbone.`` to its keys."""
    from mmlinear.models.backbones.veca import VECA

    # On the meta device: only the key names and shapes are needed, even for VECA-L.
    with torch.device('meta'):
        reference = VECA(**model_args, init_cfg=None).state_dict()
    check_key_layout(state, reference, f'the VECA layout ({model_args})')
    return OrderedDict((f'backbone.{k}', v.contiguous()) for k, v in state.items())


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description='Convert a released VECA checkpoint to mmlinear.')
    parser.add_argument('src', help='released checkpoint (.pt with a "student" state dict)')
    parser.add_argument('dst', help='output mmlinear checkpoint (.pth)')
    parser.add_argument('--force', action='store_true', help='overwrite an existing DST')
    parser.add_argument(
        '--num-heads',
        type=int,
        default=None,
        help='attention heads (default: the checkpoint config\'s num_heads, '
        'else embed_dims / 64)')
    args = parser.parse_args(argv)
    if osp.exists(args.dst) and not args.force:
        print(f'error: {args.dst} exists; pass --force to overwrite it', file=sys.stderr)
        sys.exit(1)
    try:
        state, config = load_source(args.src)
        model_args = infer_model_args(state, config, args.num_heads)
        converted = convert(state, model_args)
    except CONVERSION_ERRORS as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    os.makedirs(osp.dirname(osp.abspath(args.dst)), exist_ok=True)
    meta = dict(
        converted_from=osp.basename(args.src),
        converter='veca2mmlinear',
        arch=model_args['arch'],
        out_channels=model_args['out_channels'])
    torch.save({'state_dict': converted, 'meta': meta}, args.dst)
    print(f'converted {len(converted)} tensors: {args.src} -> {args.dst}; '
          f'VECA(arch={model_args["arch"]}, out_channels={model_args["out_channels"]})')


if __name__ == '__main__':
    main()
