"""Latency of backbones in ONNX Runtime against PyTorch eager (and ``torch.compile``) on a CPU.

Each model is exported at each resolution (a static (1, 3, R, R) graph, as
``tools/deployment/pytorch2onnx.py`` writes it) and timed in the three runtimes with the same
number of threads; the table also gives the largest ONNX Runtime / PyTorch difference.

Example (the figures of docs/deployment.md):
    python tools/deployment/benchmark_onnx.py --models infvit-demo-linear infvit-demo-pure \\
        configs/demo/weightformer-demo_shapes-cls.py configs/demo/veca-demo_shapes-cls.py \\
        --patch-size 16 --resolutions 512 1024 --threads 2
"""
import argparse
import json
import os
import os.path as osp
import tempfile
from typing import Dict, List, Optional, Sequence

import torch
from torch import Tensor, nn

from mmlinear.apis import BACKBONE_PRESETS, build_backbone
from mmlinear.apis.onnx_export import compare_with_onnxruntime, export_onnx
from mmlinear.cli.benchmark import median_ms


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='ONNX Runtime vs PyTorch latency')
    parser.add_argument(
        '--models',
        nargs='+',
        required=True,
        help=f'backbone presets ({", ".join(BACKBONE_PRESETS)}) or config files')
    parser.add_argument('--resolutions', type=int, nargs='+', default=[512, 1024])
    parser.add_argument('--patch-size', type=int, help='override every backbone\'s patch size')
    parser.add_argument('--threads', type=int, default=2, help='threads of all runtimes')
    parser.add_argument('--warmup', type=int, default=1)
    parser.add_argument('--repeats', type=int, default=3)
    parser.add_argument(
        '--compile',
        action='store_true',
        help='also time torch.compile(model, fullgraph=True, dynamic=False) (slow to build)')
    parser.add_argument('--out', help='write the rows as JSON here')
    return parser.parse_args(argv)


class FeatureMaps(nn.Module):
    """A backbone whose outputs are returned as a tuple of tensors (the exported function)."""

    def __init__(self, backbone: nn.Module) -> None:
        super().__init__()
        self.backbone = backbone

    def forward(self, x: Tensor) -> tuple:
        return tuple(self.backbone(x))


def benchmark(model_name: str, resolution: int, args: argparse.Namespace) -> Dict[str, object]:
    """One table row: eager, compiled and ONNX Runtime latency of a model at one resolution."""
    import onnxruntime
    overrides = {} if args.patch_size is None else dict(patch_size=args.patch_size)
    model = FeatureMaps(build_backbone(model_name, overrides)).eval()
    inputs = torch.randn(1, 3, resolution, resolution)
    row = dict(model=model_name, resolution=resolution)
    with torch.no_grad():
        row['eager_ms'] = median_ms(lambda: model(inputs), args.warmup, args.repeats)
        if args.compile:
            try:
                # One static graph per resolution, as the ONNX side: in one process dynamo
                # would otherwise recompile the second resolution with dynamic sizes, which
                # inductor (torch 2.14) fails for InfViT in tensorify_python_scalars
                # ("TensorReferenceAnalysis has no attribute python_mod").
                compiled = torch.compile(model, fullgraph=True, dynamic=False)
                row['compiled_ms'] = median_ms(lambda: compiled(inputs), args.warmup, args.repeats)
            except Exception as error:  # reported in the table, not fatal to the others
                lines = [line for line in str(error).splitlines() if line.strip()]
                row['compiled_error'] = f'{type(error).__name__}: {lines[-1] if lines else ""}'
    with tempfile.TemporaryDirectory() as tmp:
        onnx_file = osp.join(tmp, 'model.onnx')
        with torch.no_grad():
            num_outputs = len(model(inputs[..., :64, :64]))
        export_onnx(model, onnx_file, (resolution, resolution),
                    [f'out{i}' for i in range(num_outputs)])
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        session = onnxruntime.InferenceSession(
            onnx_file, options, providers=['CPUExecutionProvider'])
        feed = {'input': inputs.numpy()}
        row['onnxruntime_ms'] = median_ms(lambda: session.run(None, feed), args.warmup,
                                          args.repeats)
        row['max_diff'] = compare_with_onnxruntime(model, onnx_file, inputs)
    return row


def format_table(rows: List[Dict[str, object]]) -> str:
    """The rows as a markdown table."""

    def cell(row: Dict[str, object], key: str) -> str:
        return f'{row[key]:.0f}' if key in row else row.get('compiled_error', 'not run')[:60]

    lines = [
        '| model | resolution | PyTorch eager (ms) | torch.compile (ms) | ONNX Runtime (ms) | '
        'ONNX Runtime / eager | max diff |', '|---|---|---|---|---|---|---|'
    ]
    for row in rows:
        lines.append(f'| {row["model"]} | {row["resolution"]} | {row["eager_ms"]:.0f} | '
                     f'{cell(row, "compiled_ms")} | {row["onnxruntime_ms"]:.0f} | '
                     f'{row["onnxruntime_ms"] / row["eager_ms"]:.2f} | {row["max_diff"]:.1e} |')
    return '\n'.join(lines)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for model_name in args.models:
        for resolution in args.resolutions:
            rows.append(benchmark(model_name, resolution, args))
            print(format_table(rows[-1:]).splitlines()[-1], flush=True)
    print(format_table(rows))
    if args.out:
        os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
        with open(args.out, 'w') as f:
            json.dump(rows, f, indent=1)


if __name__ == '__main__':
    main()
