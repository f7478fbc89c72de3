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
import re
import sys
from collections import OrderedDict
from typing import Dict

import torch

from mmlinear.utils.checkpoint_conversion import (CONVERSION_ERRORS, check_key_layout,
                                                  load_state_dict_file, strip_key_prefixes)

HEAD_MAP = {'head.weight': 'head.fc.weight', 'head.bias': 'head.fc.bias'}


def load_source(path: str) -> Dict[str, torch.Tensor]:
    """Read the released state dict from ``path`` (.pth-like or .safetensors)."""
    state = load_state_dict_file(path, ('model', 'state_dict'))
    # DataParallel / DDP saves
    return strip_key_prefixes(state, ('module.', ))


def infer_arch(state: Dict[str, torch.Tensor]) -> dict:
    """The WeightFormer arch dict (embed_dims, num_layers, feedforward_channels)."""
    try:
        embed_dims = state['patch_embed.proj.weight'].shape[0]
        num_layers = 1 + max(
            int(m.group(1)) for m in (re.match(r'blocks\.(\d+)\.', k) for k in state) if m)
        feedforward_channels = state['blocks.0.linear2.weight'].shape[1]
    except (KeyError, ValueError) as e:
        raise ValueError('the source is not in the WeightFormer key layout: cannot find '
                         'patch_embed.proj.weight, blocks.{i}.* and blocks.0.linear2.weight') from e
    return dict(
        embed_dims=embed_dims, num_layers=num_layers, feedforward_channels=feedforward_channels)


def check_layout(state: Dict[str, torch.Tensor]) -> dict:
    """Check the backbone keys and shapes against an mmlinear WeightFormer of the same
    size; raise ``ValueError`` listing missing / unexpected / mis-shaped keys."""
    from mmlinear.models.backbones.weightformer import WeightFormer
    arch = infer_arch(state)
    reference = WeightFormer(arch=arch, init_cfg=None).state_dict()
    backbone = {k: v for k, v in state.items() if k not in HEAD_MAP}
    check_key_layout(backbone, reference, f'the WeightFormer layout (arch {arch})')
    return arch


def convert(state: Dict[str, torch.Tensor]) -> 'OrderedDict[str, torch.Tensor]':
    """Map released keys to mmlinear ones (``backbone.*``, ``head.fc.*``)."""
    check_layout(state)
    out = OrderedDict()
    for key, value in state.items():
        out[HEAD_MAP.get(key, f'backbone.{key}')] = value.contiguous()
    return out


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
