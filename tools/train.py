"""Train a model with mmpretrain, mmdet or mmseg; the config's ``default_scope`` decides.

Examples:
    python tools/train.py configs/demo/infvit-demo-linear_shapes-cls.py
    python tools/train.py CONFIG --work-dir work_dirs/x --amp --cfg-options train_cfg.max_epochs=1
    python tools/train.py CONFIG --resume                 # latest checkpoint in the work dir
    python tools/train.py CONFIG --resume path/to/epoch_3.pth
    python tools/train.py CONFIG --preemptible --resume   # SIGTERM / SIGUSR1: checkpoint, exit 75
    bash tools/dist_train.sh CONFIG 2                     # torchrun, gloo on a CPU-only machine
"""
import argparse
import os
from typing import List, Optional

# Importing mmlinear applies its shims: safe checkpoint loading, mmlinear:: configs, atomic
# checkpoints, resuming from the newest readable one, exact resumption.
from mmlinear.apis import load_config, toolbox_scope
from mmlinear.cli import (add_common_arguments, enable_amp, parse_tool_args, run_runner,
                          set_work_dir, torchrun_attempt)
from mmlinear.engine.hooks import REQUEUE_EXIT_CODE


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Train a model (mmpretrain / mmdet / mmseg)')
    parser.add_argument('config', help='config file')
    parser.add_argument(
        '--resume',
        nargs='?',
        const='auto',
        metavar='PATH',
        help='resume training: from PATH, or without a value from the latest checkpoint '
        'in the work dir')
    parser.add_argument(
        '--preemptible',
        action='store_true',
        help='on SIGTERM or SIGUSR1, checkpoint after the current iteration and exit with '
        f'status {REQUEUE_EXIT_CODE} (mmlinear.PreemptionHook as default_hooks.preemption)')
    parser.add_argument(
        '--amp',
        action='store_true',
        help='mixed precision (float16 with loss scaling on CUDA, bfloat16 on the CPU)')
    parser.add_argument(
        '--auto-scale-lr',
        action='store_true',
        help='scale the learning rate by the actual batch size (auto_scale_lr in the config)')
    add_common_arguments(parser)
    return parse_tool_args(parser, argv)


def set_preemption(cfg, preemptible: bool) -> None:
    """Add ``mmlinear.PreemptionHook`` as ``default_hooks.preemption`` for ``--preemptible``,
    keeping the options a config gives it. Without the flag, ``preemption=None`` (a config
    inheriting one that switches it on) switches it off; mmengine itself accepts None only for
    its own default hooks."""
    hooks = cfg.setdefault('default_hooks', {})
    if preemptible:
        hooks['preemption'] = hooks.get('preemption') or {}
        hooks['preemption'].setdefault('type', 'mmlinear.PreemptionHook')
    elif 'preemption' in hooks and hooks['preemption'] is None:
        hooks.pop('preemption')


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options)
    toolbox_scope(cfg)
    set_work_dir(cfg, args.work_dir, args.config)
    if args.amp:
        enable_amp(cfg)
    if args.auto_scale_lr:
        if 'auto_scale_lr' not in cfg or 'base_batch_size' not in cfg.auto_scale_lr:
            raise ValueError('--auto-scale-lr needs auto_scale_lr.base_batch_size in the config')
        cfg.auto_scale_lr.enable = True
    set_preemption(cfg, args.preemptible)
    # torchrun counts its restarts of a failed group: a restarted worker continues the run.
    if args.resume is None and torchrun_attempt() > 0:
        args.resume = 'auto'
    if args.resume == 'auto':
        cfg.resume, cfg.load_from = True, None
    elif args.resume is not None:
        if not os.path.isfile(args.resume):
            raise FileNotFoundError(f'--resume checkpoint not found: {args.resume}')
        cfg.resume, cfg.load_from = True, args.resume
    loaders = ['train_dataloader'] + (['val_dataloader'] if cfg.get('val_cfg') else [])
    run_runner(cfg, args.launcher, loaders, 'train')


if __name__ == '__main__':
    main()
