"""Evaluate a checkpoint with mmpretrain, mmdet or mmseg; the config's ``default_scope`` decides.

Examples:
    python tools/test.py CONFIG CHECKPOINT
    python tools/test.py CONFIG CHECKPOINT --out results.pkl   # mmdet / mmpretrain: a pickle
    python tools/test.py CONFIG CHECKPOINT --out pred_dir      # mmseg: a folder of label maps
    python tools/test.py CONFIG CHECKPOINT --show-dir vis      # drawn predictions
    bash tools/dist_test.sh CONFIG CHECKPOINT 2
"""
import argparse
import os
from typing import List, Optional

from mmengine.config import Config

# Importing mmlinear applies its shims: safe checkpoint loading and mmlinear:: configs.
from mmlinear.apis import load_config, toolbox_scope
from mmlinear.cli import add_common_arguments, parse_tool_args, run_runner, set_work_dir


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Test a model (mmpretrain / mmdet / mmseg)')
    parser.add_argument('config', help='config file')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--out',
        help='save the predictions: a .pkl file for mmdet and mmpretrain, a folder of '
        'label maps for mmseg')
    parser.add_argument('--show-dir', help='save images with drawn predictions here')
    add_common_arguments(parser)
    return parse_tool_args(parser, argv)


def add_result_dump(cfg: Config, scope: str, out: str) -> None:
    """Save predictions the way each toolbox's own test script does."""
    if scope == 'mmseg':
        cfg.test_evaluator['output_dir'] = out
        cfg.test_evaluator['keep_results'] = True
        return
    if not out.endswith(('.pkl', '.pickle')):
        raise ValueError(f'--out must be a .pkl or .pickle file for {scope}, got {out!r}')
    dump = dict(type='DumpDetResults' if scope == 'mmdet' else 'DumpResults', out_file_path=out)
    evaluators = cfg.test_evaluator
    cfg.test_evaluator = (list(evaluators) if isinstance(evaluators,
                                                         (list, tuple)) else [evaluators]) + [dump]


def add_visualization(cfg: Config, scope: str, show_dir: str) -> None:
    """Turn on the toolbox's visualisation hook, writing into ``show_dir``."""
    hooks = cfg.default_hooks
    if scope == 'mmpretrain':
        hooks.visualization = dict(type='VisualizationHook', enable=True, out_dir=show_dir)
    else:
        hook = hooks.get('visualization')
        if hook is None:
            raise ValueError('the config has no default_hooks.visualization to draw with')
        hook.update(draw=True, test_out_dir=show_dir)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    if not os.path.isfile(args.checkpoint):
        raise FileNotFoundError(f'checkpoint not found: {args.checkpoint}')
    cfg = load_config(args.config, args.cfg_options)
    scope = toolbox_scope(cfg)
    set_work_dir(cfg, args.work_dir, args.config)
    cfg.load_from = args.checkpoint
    if args.out:
        add_result_dump(cfg, scope, args.out)
    if args.show_dir:
        add_visualization(cfg, scope, args.show_dir)
    run_runner(cfg, args.launcher, ['test_dataloader'], 'test')


if __name__ == '__main__':
    main()
