"""Convert a released WeightFormer checkpoint to an mmlinear checkpoint.

The source is the reference (LeapLabTHU/WeightFormer) state dict, with the key layout of the
released checkpoints (``patch_embed.proj``, ``init_norm``, ``blocks.{i}.linear1.w`` / ``.w1`` /
``.w2`` / ``.wfm``, ``blocks.{i}.dwc.wfm.{0,2}``, ``norm``, ``head``): a raw state dict saved
with ``torch.save`` (``.pth`` / ``.pt`` / ``.bin``, possibly wrapped under ``'model'`` or
``'state_dict'`` as the reference training script and other tools save it) or a Hugging Face
``.safetensors`` file. The backbone keys get the
``backbone.`` prefix and the classifier ``head.weight`` / ``head.bias`` become
``head.fc.weight`` / ``head.fc.bias`` (mmpretrain ``LinearClsHead``).

Usage:
    python tools/model_converters/weightformer2mmlinear.py SRC DST
"""
import argparse
import os
import os.path as osp
import sys

import torch

from mmlinear.apis.weightformer_conversion import convert, load_source
from mmlinear.utils.checkpoint_conversion import CONVERSION_ERRORS


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(
        description='Convert a released WeightFormer checkpoint to mmlinear.')
    parser.add_argument('src', help='released checkpoint (.pth / .safetensors)')
    parser.add_argument('dst', help='output mmlinear checkpoint (.pth)')
    args = parser.parse_args(argv)
    try:
        state = convert(load_source(args.src))
    except CONVERSION_ERRORS as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    os.makedirs(osp.dirname(osp.abspath(args.dst)), exist_ok=True)
    torch.save({'state_dict': state}, args.dst)
    print(f'converted {len(state)} tensors: {args.src} -> {args.dst}')


if __name__ == '__main__':
    main()
