"""The check of a model's released weights: the commands that convert, probe and evaluate
them, and the checks of their inputs and of the converted weights."""
import argparse
import glob
import json
import os.path as osp
import shlex
from typing import List, Sequence

from .registry import REPO_ROOT


def released_work_dir(experiment: dict) -> str:
    """Where a check of released weights writes: the converted weights (``converted.pth``),
    the probe's training (``probe``) and the evaluation (``test``)."""
    return osp.join('work_dirs', 'reproduce', experiment['id'])


def released_commands(experiment: dict,
                      checkpoint: str,
                      data_root: str,
                      cfg_options: Sequence[str] = ()) -> List[str]:
    """The commands that check released weights, under ``work_dirs/reproduce/ID``: convert
    them, train the probe on the frozen converted backbone where the experiment has
    ``probe_data``, then evaluate with ``tools/test.py`` on the data under ``data_root``;
    ``cfg_options`` (``KEY=VALUE``) are passed on to the training and the evaluation."""
    released = experiment['released']
    work = released_work_dir(experiment)
    converted = f'{work}/converted.pth'
    root = shlex.quote(data_root)
    commands = [f'{released["convert"]} {shlex.quote(checkpoint)} {converted}']
    weights = converted
    if released.get('probe_data'):
        options = [
            f'model.backbone.init_cfg.checkpoint={converted}',
            'model.backbone.init_cfg.prefix=backbone.'
        ] + [f'{option}={root}' for option in released['probe_data']['options']]
        options += [shlex.quote(option) for option in cfg_options]
        commands.append(f'python tools/train.py {released["config"]} --work-dir {work}/probe '
                        f'--cfg-options {" ".join(options)}')
        weights = f'$(cat {work}/probe/last_checkpoint)'
    options = ' '.join([f'{option}={root}' for option in released['test_data']['options']] +
                       [shlex.quote(option) for option in cfg_options])
    commands.append(f'python tools/test.py {released["config"]} {weights} '
                    f'--work-dir {work}/test --cfg-options {options}')
    return commands


def check_released_inputs(experiment: dict, checkpoint: str, data_root: str) -> None:
    """Refuse a missing checkpoint, or a data root without a file or folder the evaluation
    (and the probe's training) reads.

    Raises:
        SystemExit: Naming the missing checkpoint, or every missing path and the layout
            expected under the data root.
    """
    released = experiment['released']
    if not osp.isfile(checkpoint):
        raise SystemExit(f'{experiment["id"]}: checkpoint not found: {checkpoint} (expected the '
                         f'released weights, {released["weights"]})')
    layout = released['test_data']['layout'] + (released.get('probe_data') or {}).get('layout', [])
    missing = [path for path in layout if not osp.exists(osp.join(data_root, path))]
    if missing:
        raise SystemExit(f'{experiment["id"]}: the data root {data_root} lacks ' +
                         ', '.join(osp.join(data_root, path) for path in missing) +
                         f' (expected under it: {", ".join(layout)}; {released["data"]})')


def check_converted(experiment: dict, converted: str, cfg_options: Sequence[str] = ()) -> None:
    """Refuse converted weights that do not fill the config's model (a checkpoint of another
    model size loads with mere warnings, and would be evaluated half random): every key of the
    model (of its backbone, where a probe is trained on top) must be there, in its shape.

    Args:
        experiment (dict): The experiment, with its ``released`` entry.
        converted (str): The converted checkpoint, relative to the repository root.
        cfg_options (Sequence[str]): ``KEY=VALUE`` overrides of the config, as the
            evaluation gets them.

    Raises:
        SystemExit: Listing the missing and mis-shaped keys.
    """
    import torch
    from mmengine.config import DictAction
    from mmengine.registry import MODELS, init_default_scope

    from mmlinear.apis import load_config, toolbox_scope
    from mmlinear.utils.checkpoint_conversion import load_torch_checkpoint
    released = experiment['released']
    # Parsed as the tools parse them.
    options = argparse.ArgumentParser()
    options.add_argument('--cfg-options', nargs='+', action=DictAction, default={})
    cfg = load_config(
        osp.join(REPO_ROOT, released['config']),
        options.parse_args(['--cfg-options', *cfg_options] if cfg_options else []).cfg_options)
    init_default_scope(toolbox_scope(cfg))
    # Only names and shapes are compared: the meta device allocates nothing.
    with torch.device('meta'):
        reference = MODELS.build(cfg.model).state_dict()
    if released.get('probe_data'):
        reference = {k: v for k, v in reference.items() if k.startswith('backbone.')}
    state = load_torch_checkpoint(osp.join(REPO_ROOT, converted))['state_dict']
    missing = sorted(set(reference) - set(state))
    mismatched = [
        f'{k}: {tuple(state[k].shape)}, expected {tuple(reference[k].shape)}' for k in reference
        if k in state and state[k].shape != reference[k].shape
    ]
    if missing or mismatched:
        raise SystemExit(f'{experiment["id"]}: the converted checkpoint does not fit '
                         f'{released["config"]} (expected {released["weights"]}):\n'
                         f'  missing keys: {missing}\n  shape mismatches: {mismatched}')


def measured_metric(test_work_dir: str, metric: str) -> float:
    """The metric of the latest ``tools/test.py`` run in a work folder (the JSON that
    mmengine's logger writes beside the log, ``TIMESTAMP/TIMESTAMP.json``).

    Raises:
        ValueError: No such run, or its results lack the metric.
    """
    runs = sorted(glob.glob(osp.join(REPO_ROOT, test_work_dir, '*', '*.json')), key=osp.getmtime)
    if not runs:
        raise ValueError(f'no test results under {test_work_dir}')
    with open(runs[-1]) as f:
        results = json.load(f)
    if metric not in results:
        raise ValueError(f'{runs[-1]} has no {metric!r}; it has {sorted(results)}')
    return results[metric]
