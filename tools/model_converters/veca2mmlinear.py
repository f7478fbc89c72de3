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
import sys

import torch

from mmlinear.apis.veca_conversion import convert, infer_model_args, load_source
from mmlinear.utils.checkpoint_conversion import CONVERSION_ERRORS


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
