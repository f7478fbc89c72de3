"""Convert a pretrained ViT checkpoint (mmpretrain, timm or Hugging Face) to an InfViT one.

SRC is a checkpoint file (``.safetensors`` or a ``torch.save`` file such as an mmengine
``.pth``) or a Hugging Face model folder (``model.safetensors`` or ``pytorch_model.bin``
next to ``config.json``). The layout is recognised from the key names; width, depth, MLP
width, patch and image size are read from the shapes. DST is an mmengine-style checkpoint,
``{'state_dict': {'backbone.*', 'head.*'}, 'meta': {...}}``, whose ``meta['backbone']`` and
``meta['head']`` are the InfViT and mmpretrain head configs the weights load into
(``mmlinear.apis.vit_conversion`` documents the mapping).

Usage:
    python tools/model_converters/vit2infvit.py SRC DST [--attn-type linear|pure|softmax]
        [--num-heads H] [--layer-norm-eps EPS] [--force]
"""
import argparse
import os
import os.path as osp
import sys

from mmlinear.apis.vit_conversion import (CONVERTIBLE_ATTN_TYPES, convert_vit_checkpoint,
                                          save_converted)
from mmlinear.utils.checkpoint_conversion import CONVERSION_ERRORS


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Convert a ViT checkpoint (mmpretrain, timm, Hugging Face) to InfViT.')
    parser.add_argument('src', help='ViT checkpoint file or Hugging Face model folder')
    parser.add_argument('dst', help='output InfViT checkpoint (.pth)')
    parser.add_argument(
        '--attn-type',
        default='linear',
        choices=CONVERTIBLE_ATTN_TYPES,
        help='InfViT attention (softmax reproduces the source model; linear and pure start '
        'rho at its initial value). Default: linear')
    parser.add_argument(
        '--num-heads',
        type=int,
        default=None,
        help='attention heads (default: the Hugging Face config\'s, else width / 64)')
    parser.add_argument(
        '--layer-norm-eps',
        type=float,
        default=None,
        help='LayerNorm epsilon (default: the Hugging Face config\'s, else the source '
        'library\'s: 1e-6 for mmpretrain and timm, 1e-12 for Hugging Face)')
    parser.add_argument(
        '--force', '--overwrite', action='store_true', help='overwrite an existing DST')
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    if osp.exists(args.dst) and not args.force:
        print(f'error: {args.dst} exists; pass --force to overwrite it', file=sys.stderr)
        sys.exit(1)
    try:
        converted = convert_vit_checkpoint(args.src, args.attn_type, args.num_heads,
                                           args.layer_norm_eps)
    except CONVERSION_ERRORS as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    os.makedirs(osp.dirname(osp.abspath(args.dst)), exist_ok=True)
    save_converted(converted, args.dst)
    meta = converted.meta
    dropped = meta['source']['dropped_keys']
    print(f'converted {len(converted.state_dict)} tensors ({meta["source"]["layout"]} layout): '
          f'{args.src} -> {args.dst}\n  backbone: {meta["backbone"]}\n  head: {meta["head"]}' +
          (f'\n  left out: {dropped}' if dropped else ''))


if __name__ == '__main__':
    main()
