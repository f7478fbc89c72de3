"""Compiled kernels vs PyTorch references: time and peak memory of every op, side by side.

For each op and size, both implementations run forward and forward+backward; the table
shows the median time of ``--repeats`` runs after ``--warmup`` runs, the peak memory of one
forward+backward, and the ratios reference / kernel (above 1: the kernel is better).

Peak memory is measured soundly per case: every (op, implementation, size) runs in a fresh
subprocess (started as the model benchmark starts its workers,
:func:`mmlinear.utils.fresh_process.run_in_fresh_process`) that creates its inputs, then records
- CPU: the resident-set high-water mark over the resident set once the inputs exist, during
  one forward+backward (the model benchmark's method, :mod:`mmlinear.utils.peak_memory`:
  the mark is reset first where the kernel allows it, else ``ru_maxrss`` is read, and
  ``mem_method`` says which; large tensors are mmap-ed by the allocator and returned on free,
  so RSS follows the live tensors);
- CUDA: ``torch.cuda.max_memory_allocated`` minus the memory allocated before the call.
Inputs and the output gradient are excluded; outputs, saved activations and input gradients
count. Pure InfSA's reference materialises (B, H, N, N) scores and is skipped above
``--max-ref-gib`` of estimated memory (printed as ``skipped (N^2 = X GiB)``).

``linear_infsa_sums`` is Linear-InfSA as the layer runs it: its two sums (the query pass,
then the key pooling of the attention inputs x, C = H d wide) and the normalisations between
them, from transposed (B, N, H, d) projections as the layer has them. It also gets its
memory-traffic floor, timed the same way: the traffic every implementation has, done by
PyTorch's own bandwidth-bound kernels (the forward reads q, k and x once; the backward reads
them again and writes three fresh gradients of their size), so the table shows how far the
kernel is from the machine's bandwidth.

Fresh gradients pay first-touch page faults; ``THP_MEM_ALLOC_ENABLE=1`` in the environment
(PyTorch's huge-page allocation, passed on to every worker) makes them cheaper for all three
alike.

Two cases put the Linear-InfSA kernels in context (they need mmengine, so they are not in the
default ``--ops``): ``infsa_attention_linear``, the ``InfSAAttention`` layer of InfViT-4L
(C = 1024, 16 heads) on N tokens, and ``infvit_4l_linear``, the whole InfViT-4L Linear backbone
on an image of N patches (16 sqrt(N) pixels a side), each forward and forward+backward; their
'reference' runs the same module in a worker with ``MMLINEAR_DISABLE_EXT=1``, so the PyTorch
references replace every kernel.

Example::

    python tools/analysis_tools/benchmark_ops.py --device cpu --out work_dirs/benchmark_ops
"""
import argparse
import functools
import json
import os
from typing import Dict, List, Optional

# The measuring primitives alone, not mmlinear.apis: the workers run on a bare GPU image
# (torch without mmengine; tools/gpu_check.sh).
from mmlinear.utils.fresh_process import WorkerFailed, print_result, run_in_fresh_process
from mmlinear.utils.peak_memory import cpu_peak, reset_cpu_peak
from mmlinear.utils.timing import median_ms

# Sizes per device: (B, H, d) or (B, C, k) and the list of N (tokens; H * W for the conv).
# Linear-InfSA at B = 2, H = 16, d = 64 is InfViT-4L's attention (C = 1024).
PRESETS = {
    'cpu': {
        'linear_infsa_sums': dict(shape=(2, 16, 64), sizes=[1024, 4096, 16384, 65536]),
        'pure_infsa': dict(shape=(1, 2, 64), sizes=[1024, 2048, 4096, 8192]),
        'dynamic_dwconv2d': dict(shape=(8, 128, 3), sizes=[32 * 32, 64 * 64, 128 * 128]),
    },
    'cuda': {
        'linear_infsa_sums': dict(shape=(2, 16, 64), sizes=[1024, 4096, 16384, 65536, 262144]),
        'pure_infsa': dict(shape=(2, 16, 64), sizes=[1024, 2048, 4096, 8192, 16384]),
        'dynamic_dwconv2d': dict(shape=(32, 256, 3), sizes=[32 * 32, 64 * 64, 128 * 128]),
    },
}
# Modules whose reference is the same module without the extension (see the docstring):
# (B, C, heads) and the sizes (tokens: patches of 16 x 16 pixels for the backbone).
MODULE_CASES = {
    'infsa_attention_linear': dict(shape=(2, 1024, 16), sizes=[4096, 16384]),
    'infvit_4l_linear': dict(shape=(1, 1024, 16), sizes=[32**2, 64**2]),  # 512 and 1024 px
}
IMPLS = ('kernel', 'reference')
# Ops with a memory-traffic floor (see the module docstring), measured as a third implementation.
FLOOR_OPS = ('linear_infsa_sums', )


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--device', default='cpu', choices=('cpu', 'cuda'))
    parser.add_argument(
        '--ops',
        nargs='+',
        default=list(PRESETS['cpu']),
        choices=list(PRESETS['cpu']) + list(MODULE_CASES))
    parser.add_argument('--dtype', default='float32', choices=('float32', 'float16', 'bfloat16'))
    parser.add_argument('--repeats', type=int, default=5, help='timed runs per case')
    parser.add_argument('--warmup', type=int, default=1, help='untimed runs per case')
    parser.add_argument(
        '--max-ref-gib',
        type=float,
        default=8.,
        help='skip pure_infsa references whose N^2 scores need more')
    parser.add_argument(
        '--sizes',
        type=int,
        nargs='+',
        help='override the N of every op (tokens; H * W for the conv)')
    parser.add_argument(
        '--out',
        default='work_dirs/benchmark_ops',
        help='folder for benchmark_ops.json and benchmark_ops.png')
    parser.add_argument('--worker', help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def linear_infsa_sums(q, k, x, rho, reference: bool = False, eps: float = 1e-6):
    """Linear-InfSA's pooled inputs ``sum_j a_j x_j`` (B, H, C) from its two sums, through the
    kernels or (``reference``) the references."""
    import mmlinear.ops as ops
    suffix = '_reference' if reference else ''
    weighted_queries, energy_sum = getattr(ops, f'linear_infsa_query_sums{suffix}')(q)
    central = weighted_queries / (energy_sum[..., None] + eps)
    weighted_inputs, score_sum = getattr(ops, f'linear_infsa_key_pool{suffix}')(central, k, x)
    return rho[:, None] * weighted_inputs / (score_sum[..., None] + eps)


def make_module_case(op: str, shape: tuple, n: int, device: str, dtype):
    """One of ``MODULE_CASES``: the module as a function, its input and its output shape."""
    import torch
    torch.manual_seed(0)
    B, C, heads = shape
    if op == 'infsa_attention_linear':
        from mmlinear.models.layers import InfSAAttention
        module = InfSAAttention(C, heads, attn_type='linear')
        inputs, out_shape = [torch.randn(B, n, C)], (B, n, C)
        fn = module
    else:
        from mmlinear.models.backbones.infvit import InfViT
        side = 16 * int(round(n**0.5))
        module = InfViT(arch='infvit-4l', attn_type='linear', img_size=side, out_type='featmap')
        inputs, out_shape = [torch.randn(B, 3, side, side)], (B, C, side // 16, side // 16)

        def fn(image):
            return module(image)[-1]

    module.to(device=device, dtype=dtype)
    return fn, [t.to(device=device, dtype=dtype) for t in inputs], out_shape


def make_case(op: str, impl: str, shape: tuple, n: int, device: str, dtype):
    """The function to run for one case, its inputs and the shape of its output."""
    import torch

    import mmlinear.ops as ops
    g = torch.Generator().manual_seed(0)
    if op in MODULE_CASES:
        fn, inputs, out_shape = make_module_case(op, shape, n, device, dtype)
    elif op == 'dynamic_dwconv2d':
        B, C, k = shape
        side = int(round(n**0.5))
        inputs = [
            torch.randn(B, C, side, side, generator=g),
            torch.randn(B, C, k, k, generator=g) * 0.1,
            torch.randn(C, generator=g)
        ]
        inputs = [t.to(device=device, dtype=dtype) for t in inputs]
        out_shape = inputs[0].shape
    elif op == 'linear_infsa_sums':
        B, H, d = shape
        q, k = (
            torch.randn(B, n, H, d, generator=g).to(device=device, dtype=dtype).transpose(1, 2)
            for _ in range(2))
        x = torch.randn(B, n, H * d, generator=g).to(device=device, dtype=dtype)
        inputs = [q, k, x, torch.rand(H, device=device)]  # rho stays float32, as the layer's
        out_shape = (B, H, H * d)
    else:
        B, H, d = shape
        inputs = [
            torch.randn(B, H, n, d, generator=g).to(device=device, dtype=dtype) for _ in range(3)
        ]
        inputs.append(torch.rand(H, device=device))  # rho stays float32, as the layer's
        out_shape = inputs[0].shape
    if op in MODULE_CASES:
        pass  # the reference is the same module in a worker without the extension
    elif impl == 'floor':
        fn = linear_infsa_traffic_floor
    elif op == 'linear_infsa_sums':
        fn = functools.partial(linear_infsa_sums, reference=impl == 'reference')
    else:
        fn = getattr(ops, op if impl == 'kernel' else f'{op}_reference')
    for t in inputs:
        t.requires_grad_()
    return fn, inputs, out_shape


@functools.lru_cache(maxsize=None)
def traffic_floor_function():
    """The autograd function behind :func:`linear_infsa_traffic_floor`, defined once (torch
    is imported by the workers only)."""
    import torch

    class TrafficFloor(torch.autograd.Function):

        @staticmethod
        def forward(ctx, q, k, x, rho):
            ctx.save_for_backward(q, k, x, rho)
            total = q.sum() + k.sum() + x.sum()
            return total.expand(q.shape[0], q.shape[1], x.shape[-1]).clone()

        @staticmethod
        def backward(ctx, grad):
            q, k, x, rho = ctx.saved_tensors
            return q.clone(), k.clone(), x.clone(), torch.zeros_like(rho)

    return TrafficFloor


def linear_infsa_traffic_floor(q, k, x, rho):
    """Linear-InfSA's unavoidable memory traffic, with the signature and the (B, H, C) output
    of :func:`linear_infsa_sums`.

    Forward: one read of q, k and x (sums). Backward: one more read of q, k and x and three
    freshly allocated gradients of their size (clones).
    """
    return traffic_floor_function().apply(q, k, x, rho)


def run_worker(case: Dict) -> Dict:
    """Measure one (op, impl, size) case in this (fresh) process."""
    import torch
    device, dtype = case['device'], getattr(torch, case['dtype'])
    # One tiny forward+backward first, so that loading the extension and lazily initialised
    # libraries (thread pools, BLAS) are not counted as the op's memory.
    tiny = 1 if case['op'] == 'infvit_4l_linear' else 16  # one patch
    fn, inputs, _ = make_case(case['op'], case['impl'], tuple(case['shape']), tiny, device, dtype)
    fn(*inputs).sum().backward()
    fn, inputs, out_shape = make_case(case['op'], case['impl'], tuple(case['shape']), case['n'],
                                      device, dtype)
    # No call before the measurement: the output gradient is made from the known shape.
    grad = torch.randn(out_shape, device=device, dtype=inputs[0].dtype)
    cuda = device == 'cuda'

    def sync():
        if cuda:
            torch.cuda.synchronize()

    # Both steps end synchronised, so a timed call covers the device's work and the next one
    # starts on an idle device.
    def forward():
        with torch.no_grad():
            fn(*inputs)
        sync()

    def forward_backward():
        out = fn(*inputs)
        out.backward(grad)
        for t in inputs:
            t.grad = None
        sync()

    # Peak memory of one forward+backward, before any timing run can raise the peak.
    sync()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        forward_backward()
        peak = torch.cuda.max_memory_allocated() - base
        method = 'cuda max_memory_allocated'
    else:
        base, method = reset_cpu_peak()
        forward_backward()
        peak = cpu_peak(method) - base
    from mmlinear.utils.ext_loader import KERNEL_CALLS

    # Which operators ran their kernels: none for a reference, the op's own for its kernel.
    result = {'peak_bytes': max(peak, 0), 'mem_method': method, 'kernels': sorted(KERNEL_CALLS)}
    for mode, step in (('fwd', forward), ('fwd_bwd', forward_backward)):
        result[f'{mode}_s'] = median_ms(step, case['warmup'], case['repeats']) / 1e3
    return result


def reference_skip_reason(op: str, shape: tuple, n: int, limit_gib: float) -> Optional[str]:
    """Pure InfSA's reference holds several (B, H, N, N) float32 matrices in its backward."""
    if op != 'pure_infsa':
        return None
    gib = shape[0] * shape[1] * n * n * 4 / 2**30
    if 4 * gib > limit_gib:
        return f'skipped (N^2 = {gib:.1f} GiB)'
    return None


def run_case(case: Dict) -> Dict:
    """Measure one case in a fresh process (:func:`run_worker` there); a failed worker gives
    ``{'error': <the last line of its stderr>}``."""
    env = {'MMLINEAR_DISABLE_EXT': '1'} \
        if case['op'] in MODULE_CASES and case['impl'] == 'reference' else None
    try:
        return run_in_fresh_process([os.path.abspath(__file__), '--worker'], case, env=env)
    except WorkerFailed as failure:
        lines = failure.stderr.strip().splitlines()
        return {'error': lines[-1] if lines else f'failed (status {failure.returncode})'}


def fmt_time(seconds: Optional[float]) -> str:
    return '-' if seconds is None else f'{seconds * 1e3:10.2f}'


def fmt_mib(num_bytes: Optional[float]) -> str:
    return '-' if num_bytes is None else f'{num_bytes / 2**20:9.1f}'


def ratio(ref: Optional[float], kernel: Optional[float]) -> str:
    if ref is None or kernel is None or kernel <= 0:
        return '-'
    return f'{ref / kernel:6.2f}x'


def print_table(rows: List[Dict]) -> None:
    header = (f'{"op":<23}{"N":>7} | {"fwd ms ref":>10} {"kernel":>10} {"ratio":>7} | '
              f'{"f+b ms ref":>10} {"kernel":>10} {"ratio":>7} | {"peak MiB ref":>12} '
              f'{"kernel":>9} {"ratio":>7}')
    print(header)
    print('-' * len(header))
    for row in rows:
        ref, ker = row['reference'], row['kernel']
        if 'skipped' in ref or 'error' in ref:
            note = ref.get('skipped') or f'error: {ref["error"]}'
            print(f'{row["op"]:<23}{row["n"]:>7} | {"":>10} {fmt_time(ker.get("fwd_s")):>10} '
                  f'{"":>7} | {"":>10} {fmt_time(ker.get("fwd_bwd_s")):>10} {"":>7} | '
                  f'{"":>12} {fmt_mib(ker.get("peak_bytes")):>9}  reference {note}')
            continue
        print(f'{row["op"]:<23}{row["n"]:>7} | {fmt_time(ref.get("fwd_s")):>10} '
              f'{fmt_time(ker.get("fwd_s")):>10} {ratio(ref.get("fwd_s"), ker.get("fwd_s")):>7} | '
              f'{fmt_time(ref.get("fwd_bwd_s")):>10} {fmt_time(ker.get("fwd_bwd_s")):>10} '
              f'{ratio(ref.get("fwd_bwd_s"), ker.get("fwd_bwd_s")):>7} | '
              f'{fmt_mib(ref.get("peak_bytes")):>12} {fmt_mib(ker.get("peak_bytes")):>9} '
              f'{ratio(ref.get("peak_bytes"), ker.get("peak_bytes")):>7}')
    floors = [row for row in rows if 'fwd_bwd_s' in row.get('floor', {})]
    if floors:
        print('\nmemory-traffic floor (PyTorch bandwidth-bound kernels, same traffic): '
              'kernel time / floor time')
        for row in floors:
            floor, ker = row['floor'], row['kernel']
            print(f'{row["op"]:<23}{row["n"]:>7} | fwd floor {fmt_time(floor["fwd_s"])} ms, '
                  f'kernel {ratio(ker.get("fwd_s"), floor["fwd_s"])} | f+b floor '
                  f'{fmt_time(floor["fwd_bwd_s"])} ms, kernel '
                  f'{ratio(ker.get("fwd_bwd_s"), floor["fwd_bwd_s"])}')


def plot(rows: List[Dict], path: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    ops = sorted({row['op'] for row in rows})
    fig, axes = plt.subplots(2, len(ops), figsize=(5 * len(ops), 8), squeeze=False)
    for col, op in enumerate(ops):
        op_rows = [row for row in rows if row['op'] == op]
        for impl, style in (('kernel', '-o'), ('reference', '--s')):
            pts = [(r['n'], r[impl]) for r in op_rows if 'fwd_bwd_s' in r[impl]]
            ns = [n for n, _ in pts]
            axes[0][col].plot(ns, [m['fwd_bwd_s'] * 1e3 for _, m in pts], style, label=impl)
            axes[1][col].plot(ns, [m['peak_bytes'] / 2**20 for _, m in pts], style, label=impl)
        axes[0][col].set_title(f'{op}: forward+backward')
        axes[0][col].set_ylabel('ms')
        axes[1][col].set_ylabel('peak MiB')
        for ax in (axes[0][col], axes[1][col]):
            ax.set_xscale('log', base=2)
            ax.set_yscale('log')
            ax.set_xlabel('N')
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if args.worker:
        print_result(run_worker(json.loads(args.worker)))
        return
    cases = []
    for op in args.ops:
        preset = MODULE_CASES[op] if op in MODULE_CASES else PRESETS[args.device][op]
        for n in args.sizes or preset['sizes']:
            cases.append((op, tuple(preset['shape']), n))
    from mmlinear.utils.progress import ProgressETA
    progress = ProgressETA(sum(len(IMPLS) + (op in FLOOR_OPS) for op, _, _ in cases))
    rows = []
    print(f'{progress.total} measurements on {args.device} ({args.dtype}), each in a fresh '
          'process')
    for op, shape, n in cases:
        row = {'op': op, 'n': n, 'shape': shape}
        for impl in IMPLS + (('floor', ) if op in FLOOR_OPS else ()):
            skip = reference_skip_reason(op, shape, n, args.max_ref_gib) if impl == 'reference' \
                else None
            case = dict(
                op=op,
                impl=impl,
                shape=shape,
                n=n,
                device=args.device,
                dtype=args.dtype,
                repeats=args.repeats,
                warmup=args.warmup)
            row[impl] = {'skipped': skip} if skip else run_case(case)
            shown = skip or row[impl].get('error') or f'{row[impl]["fwd_bwd_s"] * 1e3:.1f} ms f+b'
            progress.step(f'{op} N={n} {impl}: {shown}')
        rows.append(row)
    print()
    print_table(rows)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, 'benchmark_ops.json'), 'w') as f:
        json.dump(
            {
                'device': args.device,
                'dtype': args.dtype,
                'repeats': args.repeats,
                'rows': rows
            },
            f,
            indent=1)
    # A measurement that failed (e.g. a worker missing a package) must fail the run, not leave
    # a table of dashes behind a zero exit status.
    failed = [
        f'{row["op"]} N={row["n"]} {impl}: {row[impl]["error"]}' for row in rows
        for impl in IMPLS + ('floor', ) if 'error' in row.get(impl, {})
    ]
    written = 'benchmark_ops.json'
    if len(failed) < progress.total:
        plot(rows, os.path.join(args.out, 'benchmark_ops.png'))
        written += ' and benchmark_ops.png'
    print(f'\nwrote {written} in {args.out}')
    if failed:
        raise SystemExit(f'{len(failed)} of {progress.total} measurements failed:\n' +
                         '\n'.join(failed))


if __name__ == '__main__':
    main()
