"""One training step of a classifier at a large input size: forward, backward and optimizer
step, every loss, gradient and updated weight checked to be finite, with its time and peak
memory.

The classifier is the config's (mmpretrain ``ImageClassifier``: backbone, head and loss, with
random weights drawn after seeding torch with ``--seed``), in training mode, on a batch of
``--batch-size`` random normalised ``--img-size`` x ``--img-size`` images with random labels.
The optimizer is the config's ``optim_wrapper`` (its AdamW, parameter-wise decay and gradient
clipping). Batch augments that the data preprocessor applies (Mixup, CutMix) are not run: the
images go to the model as they are.

The step is checked in order, and the first failure ends the run with exit status 1 and a
message naming it: the weights before the step, every loss term, every parameter's gradient
(the first non-finite one by name, in the model's parameter order, with how many there are)
and the weights after the step. An input that holds NaN or inf shows as a non-finite loss.

Memory (CPU): the process's resident-set high-water mark above its RSS after the model and
optimizer were built (:mod:`mmlinear.utils.peak_memory`, as ``benchmark.py`` measures
it): the input, the activations kept for the backward pass, the gradients, the optimizer's
state and every temporary, not the weights. ``--with-cp`` checkpoints each backbone block
(only the blocks' inputs are kept; each block's forward runs again in the backward pass);
``--dtype bf16`` runs the forward under bfloat16 autocast. ``--mem-limit-gb`` caps the data
segment so that a step that does not fit fails with an out-of-memory error instead of pushing
a shared machine into the OOM killer.

Writes ``--out``/training_step.json (settings, machine and load, timings, peak memory, losses,
gradient norm, status).

Examples:
    python tools/analysis_tools/training_step.py configs/infvit/infvit-4l-linear_16xb64_in1k.py \\
        --img-size 256 --out work_dirs/training_step_256
    python tools/analysis_tools/training_step.py configs/infvit/infvit-4l-linear_16xb64_in1k.py \\
        --img-size 4096 --with-cp --mem-limit-gb 20 --out work_dirs/training_step_4096
"""
import argparse
import json
import os
import os.path as osp
from typing import Optional, Sequence

import torch

from mmlinear.apis import build_classifier
from mmlinear.apis.training_step import NonFiniteError, classifier_config, training_step
from mmlinear.cli.benchmark import (cpu_peak, is_oom, limit_data_segment, machine_info,
                                    reset_cpu_peak)

DTYPES = {'fp32': None, 'bf16': torch.bfloat16}


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config', help='classifier config (mmpretrain ImageClassifier)')
    parser.add_argument('--img-size', type=int, default=224, help='square input side in pixels')
    parser.add_argument('--batch-size', type=int, default=1)
    parser.add_argument(
        '--dtype',
        default='fp32',
        choices=list(DTYPES),
        help='bf16: the forward runs under bfloat16 autocast')
    parser.add_argument(
        '--with-cp', action='store_true', help='checkpoint every backbone block (less memory)')
    parser.add_argument(
        '--mem-limit-gb',
        type=float,
        default=None,
        help='cap on the data segment: a step that does not fit ends as out of memory')
    parser.add_argument('--threads', type=int, default=None, help='torch CPU threads')
    parser.add_argument('--seed', type=int, default=0, help='seeds the weights and the batch')
    parser.add_argument('--out', default='work_dirs/training_step')
    args = parser.parse_args(argv)
    for name in ('img_size', 'batch_size', 'threads', 'mem_limit_gb'):
        value = getattr(args, name)
        if value is not None and value <= 0:
            raise SystemExit(f'--{name.replace("_", "-")} must be positive, got {value}')
    if not osp.isfile(args.config):
        raise SystemExit(f'config not found: {args.config}')
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    from mmengine.logging import MMLogger
    from mmengine.optim import build_optim_wrapper
    MMLogger.get_instance('mmlinear_training_step', log_level='WARNING')
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        cfg = classifier_config(args.config, args.with_cp)
        torch.manual_seed(args.seed)
        model = build_classifier(cfg)
    except ValueError as error:
        raise SystemExit(str(error))
    model.train()
    optim_wrapper = build_optim_wrapper(model, cfg.optim_wrapper)
    num_classes = cfg.model.head.num_classes
    generator = torch.Generator().manual_seed(args.seed)
    shape = (args.batch_size, 3, args.img_size, args.img_size)
    info = machine_info('cpu')
    info['threads'] = torch.get_num_threads()
    result = dict(settings=vars(args), machine=info, status='ok')
    if args.mem_limit_gb:
        limit_data_segment(args.mem_limit_gb)
    baseline, method = reset_cpu_peak()
    try:
        images = torch.randn(shape, generator=generator)
        labels = torch.randint(num_classes, (args.batch_size, ), generator=generator)
        result.update(training_step(model, optim_wrapper, images, labels, DTYPES[args.dtype]))
    except NonFiniteError as error:
        result.update(status='non-finite', error=str(error))
    except Exception as error:  # noqa: BLE001  (only allocation failures are recorded)
        if not is_oom(error):
            raise
        result.update(status='OOM', error=str(error).splitlines()[0][:200])
    result.update(
        peak_mem_mb=max(cpu_peak(method) - baseline, 0) / 2**20,
        mem_method=method,
        load_average_after=list(os.getloadavg()))
    os.makedirs(args.out, exist_ok=True)
    with open(osp.join(args.out, 'training_step.json'), 'w') as f:
        json.dump(result, f, indent=1)
    name = osp.splitext(osp.basename(args.config))[0]
    setting = (f'{args.img_size} x {args.img_size}, batch {args.batch_size}, {args.dtype}'
               f'{", with_cp" if args.with_cp else ""}, {info["threads"]} threads')
    print(f'{info["date"]}: {info["cpu"]}, load average '
          f'{" ".join(f"{x:.2f}" for x in info["load_average"])}')
    if result['status'] != 'ok':
        raise SystemExit(f'{name} ({setting}): training step {result["status"]}: '
                         f'{result["error"]} (wrote {args.out}/training_step.json)')
    losses = ', '.join(f'{k} {v:.4f}' for k, v in result.items() if k.startswith('loss'))
    print(f'{name} ({setting}): finite; {losses}, gradient norm {result["grad_norm"]:.4g}; '
          f'forward {result["forward_s"]:.2f} s, backward {result["backward_s"]:.2f} s, '
          f'optimizer step {result["step_s"]:.2f} s, total {result["total_s"]:.2f} s; peak '
          f'memory beyond the weights {result["peak_mem_mb"]:,.0f} MB')
    print(f'wrote {args.out}/training_step.json')


if __name__ == '__main__':
    main()
