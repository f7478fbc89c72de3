"""Export a classifier, segmentor or detector config to ONNX and check it with ONNX Runtime.

The graph takes the normalised (B, 3, H, W) image and returns what ``model(inputs,
mode='tensor')`` returns (a detector: its backbone + neck features); docs/deployment.md.

Examples:
    python tools/deployment/pytorch2onnx.py CONFIG CHECKPOINT --out model.onnx
    python tools/deployment/pytorch2onnx.py CONFIG CHECKPOINT --out model.onnx \\
        --shape 512 512 --dynamic-shape
    python tools/deployment/pytorch2onnx.py VECA_CONFIG CHECKPOINT --out veca16.onnx \\
        --active-cores 16
    python tools/deployment/pytorch2onnx.py CONFIG none --out random.onnx  # untrained weights
"""
import argparse
from typing import Optional, Sequence

import torch
from mmengine.config import DictAction

from mmlinear.apis import load_config
from mmlinear.apis.onnx_export import (DEFAULT_OPSET, ExportError, build_export_model,
                                       check_export_shape, check_onnx_graph,
                                       compare_with_onnxruntime, export_onnx, output_names,
                                       probe_shape, required_divisor)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Export a model to ONNX (mmpretrain / mmdet / '
                                     'mmseg config) and check it with ONNX Runtime')
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help="checkpoint file, or 'none' for the initial weights")
    parser.add_argument(
        '--out', required=True, help='the .onnx file to write (its folder is created)')
    parser.add_argument(
        '--shape',
        type=int,
        nargs=2,
        default=[224, 224],
        metavar=('H', 'W'),
        help='input size the graph is traced (and checked) at')
    parser.add_argument(
        '--dynamic-shape',
        action='store_true',
        help='make batch, height and width dynamic (checked at a second size as well)')
    parser.add_argument('--opset', type=int, default=DEFAULT_OPSET, help='ONNX opset')
    parser.add_argument(
        '--active-cores', type=int, help="VECA's core budget in the graph (default: config's)")
    parser.add_argument(
        '--skip-verify', action='store_true', help='do not compare with ONNX Runtime')
    parser.add_argument(
        '--tolerance',
        type=float,
        default=1e-3,
        help='largest accepted ONNX Runtime / PyTorch difference, relative to '
        'max(1, max |output|)')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override config settings, e.g. model.backbone.attn_type=pure')
    return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options)
    try:
        shape = check_export_shape(args.shape, required_divisor(cfg))
        model = build_export_model(cfg, None if args.checkpoint == 'none' else args.checkpoint,
                                   args.active_cores)
        with torch.no_grad():
            outputs = model(torch.zeros(1, 3, *shape))
        num_outputs = len(outputs) if isinstance(outputs, (tuple, list)) else 1
        names = output_names(model.task, num_outputs)
        export_onnx(model, args.out, shape, names, args.dynamic_shape, args.opset)
        operators = check_onnx_graph(args.out)
    except (ExportError, FileNotFoundError) as error:
        raise SystemExit(f'cannot export {args.config}: {error}')
    print(f'wrote {args.out}: outputs {", ".join(names)}; {len(operators)} standard ONNX '
          f'operator types ({", ".join(operators)})')
    if args.skip_verify:
        return
    checks = [(1, shape)]
    if args.dynamic_shape:
        checks.append((2, probe_shape(shape, required_divisor(cfg))))
    for batch, size in checks:
        diff = compare_with_onnxruntime(model, args.out, torch.randn(batch, 3, *size))
        print(f'ONNX Runtime vs PyTorch at ({batch}, 3, {size[0]}, {size[1]}): largest '
              f'difference {diff:.3g} (relative to max(1, max |output|))')
        if diff > args.tolerance:
            raise SystemExit(f'the ONNX graph does not reproduce PyTorch (difference {diff:.3g} '
                             f'> --tolerance {args.tolerance})')


if __name__ == '__main__':
    main()
