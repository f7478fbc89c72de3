"""The three papers' experiments, one command each.

    python tools/reproduce.py --list                     # every experiment, and what it has
    python tools/reproduce.py ID --scale demo            # run it on the bundled data, CPU
    python tools/reproduce.py ID --scale demo --dry-run  # print what that would run
    python tools/reproduce.py ID --scale paper           # print the paper-scale commands
    python tools/reproduce.py ID --scale paper --run     # and run them
    python tools/reproduce.py --all                      # every demo-scale experiment

The experiments, their commands and what each still lacks are in
``tools/reproduce_experiments.yml``; their results are written up where ``docs`` says. A demo
run first makes the files its commands read when they are missing (the bundled data, a demo
checkpoint), then runs its commands in order from the repository root and stops at the first
that fails, with its exit status. Both scales end with what the paper reports for the configs
of the experiment's paper-scale commands, read from the model index (``Results``), beside
which the run's own tools print what they measured.
"""
import argparse
import os
import os.path as osp
import re
import shlex
import subprocess
import sys
from typing import Dict, List, Optional

import yaml

REPO_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
EXPERIMENTS_FILE = osp.join(REPO_ROOT, 'tools', 'reproduce_experiments.yml')
MODEL_INDEX = osp.join(REPO_ROOT, 'mmlinear', '.mim', 'model-index.yml')
MAKEFILE = osp.join(REPO_ROOT, 'Makefile')
SCALES = ('demo', 'paper')
#: The scripts that run mmengine's runner: without ``--work-dir``, each writes to
#: ``work_dirs/<config name>`` (``mmlinear.cli.set_work_dir``); the config is their first
#: ``.py`` argument.
RUNNER_SCRIPTS = ('tools/train.py', 'tools/test.py', 'tools/dist_train.sh', 'tools/dist_test.sh',
                  'tools/slurm_train.sh', 'tools/slurm_test.sh')


def make_target_output(target: str, makefile: str = MAKEFILE) -> str:
    """The ``--out`` of a Makefile target's recipe, its ``$(VAR)`` references replaced by
    the Makefile's default values.

    Raises:
        ValueError: The target is not in the Makefile, or its recipe has no ``--out``.
    """
    with open(makefile) as f:
        text = f.read().replace('\\\n', ' ')
    defaults = dict(re.findall(r'^([A-Z_]+)\s*[?:]?=\s*(\S+)', text, re.M))
    recipe = re.search(rf'^{re.escape(target)}:[^\n]*\n((?:\t[^\n]*\n?)+)', text, re.M)
    out = re.search(r'--out\s+(\S+)', recipe.group(1)) if recipe else None
    if out is None:
        raise ValueError(f'{makefile}: no target {target!r} whose recipe writes to an --out')
    return re.sub(r'\$\((\w+)\)', lambda m: defaults.get(m.group(1), m.group(0)), out.group(1))


def work_folder(command: str) -> str:
    """Where a registry command writes: its ``--work-dir`` or ``--out``, else for a runner
    script ``work_dirs/<config name>``, else for ``make TARGET`` the target's ``--out``.

    Raises:
        ValueError: The command names no folder it writes to.
    """
    words = shlex.split(command)
    for option in ('--work-dir', '--out'):
        if option in words[:-1]:
            return osp.normpath(words[words.index(option) + 1])
    script = next((i for i, word in enumerate(words) if word in RUNNER_SCRIPTS), None)
    config = None if script is None else next(
        (word for word in words[script + 1:] if word.endswith('.py')), None)
    if config is not None:
        return osp.join('work_dirs', osp.splitext(osp.basename(config))[0])
    if words[0] == 'make' and len(words) == 2:
        return osp.normpath(make_target_output(words[1]))
    raise ValueError(f'cannot tell where {command!r} writes: give it --work-dir or --out')


def check_work_folders(experiments: List[dict]) -> None:
    """Refuse two different commands of one scale (across all experiments) that write to
    one work folder: a restarted run would resume, or a tool overwrite, the other's files.
    The same command listed by two experiments is one run, and may serve both.

    Raises:
        ValueError: Naming the folder and the two commands.
    """
    for key in ('demo', 'paper_scale'):
        writers: Dict[str, str] = {}
        for experiment in experiments:
            for command in experiment.get(key) or []:
                command = ' '.join(command.split())
                folder = work_folder(command)
                if writers.setdefault(folder, command) != command:
                    raise ValueError(f'{experiment["id"]}: two {key} commands write to {folder}: '
                                     f'{writers[folder]!r} and {command!r}')


def load_experiments(path: str = EXPERIMENTS_FILE) -> Dict[str, dict]:
    """The experiments by id, in the file's order.

    Raises:
        ValueError: An id is given twice, or two commands share a work folder
            (:func:`check_work_folders`).
    """
    with open(path) as f:
        experiments = yaml.safe_load(f)
    by_id = {}
    for experiment in experiments:
        if experiment['id'] in by_id:
            raise ValueError(f'{path}: experiment id {experiment["id"]!r} is given twice')
        by_id[experiment['id']] = experiment
    try:
        check_work_folders(experiments)
    except ValueError as e:
        raise ValueError(f'{path}: {e}') from None
    return by_id


def describe(experiment: dict) -> str:
    """One experiment's lines for ``--list``: what it shows and what it can run."""
    runs = [
        scale for scale, key in (('demo', 'demo'), ('paper', 'paper_scale')) if experiment.get(key)
    ]
    lines = [
        f'{experiment["id"]}  [{experiment["paper"]}]  runs: {", ".join(runs) or "none"}',
        f'    {experiment["item"]}', f'    results: {experiment["docs"]}'
    ]
    if experiment.get('pending'):
        lines.append(f'    pending: {experiment["pending"]}')
    return '\n'.join(lines)


def commands_for(experiment: dict, scale: str) -> List[str]:
    """The commands of one scale, with a demo's missing prerequisites first.

    Raises:
        SystemExit: The experiment has no commands at that scale (the message says what it
            has and what is pending).
    """
    key = 'demo' if scale == 'demo' else 'paper_scale'
    commands = list(experiment.get(key) or [])
    if not commands:
        other = [
            s for s in SCALES
            if s != scale and experiment.get('demo' if s == 'demo' else 'paper_scale')
        ]
        raise SystemExit(
            f'{experiment["id"]} has no {scale}-scale commands' +
            (f' (it runs at --scale {other[0]})' if other else '') +
            (f'; pending: {experiment["pending"]}' if experiment.get('pending') else ''))
    if scale == 'demo':
        prerequisites = []
        for required in experiment.get('requires') or []:
            if not osp.exists(osp.join(REPO_ROOT, required['path'])) and \
                    required['made_by'] not in prerequisites:
                prerequisites.append(required['made_by'])
        commands = prerequisites + commands
    return commands


def reported_results(experiment: dict) -> List[str]:
    """What the paper reports for each config of the experiment's paper-scale commands that
    has ``Results`` in the model index, a line per config (none without such configs)."""
    import modelindex
    configs = set()
    for command in experiment.get('paper_scale') or []:
        configs.update(re.findall(r'configs/\S+\.py', command))
    lines = []
    for model in modelindex.load(MODEL_INDEX).models:
        if model.config in configs and model.results:
            metrics = '; '.join(f'{result.dataset} {name} {value}' for result in model.results
                                for name, value in result.metrics.items())
            lines.append(f'  {model.name}: {metrics}')
    return ['reported by the paper (model index; not reproduced here):'] + lines if lines else []


def run_commands(commands: List[str]) -> int:
    """Run commands in order from the repository root with this interpreter as ``python``
    (and as ``$PYTHON``); the exit status of the first that fails, else 0."""
    for command in commands:
        print(f'+ {command}', flush=True)
        if command.startswith('python '):
            command = f'"{sys.executable}" {command[len("python "):]}'
        # tools/dist_train.sh starts $PYTHON.
        env = dict(os.environ, PYTHON=sys.executable)
        status = subprocess.call(['bash', '-c', command], cwd=REPO_ROOT, env=env)
        if status:
            print(f'reproduce: the command above failed with status {status}', file=sys.stderr)
            return status
    return 0


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('experiment', nargs='?', help='an experiment id (see --list)')
    parser.add_argument('--list', action='store_true', help='list every experiment')
    parser.add_argument(
        '--all', action='store_true', help='run every experiment that has demo commands')
    parser.add_argument('--scale', choices=SCALES, default='demo')
    parser.add_argument(
        '--dry-run', action='store_true', help='demo scale: print the commands, run nothing')
    parser.add_argument(
        '--run', action='store_true', help='paper scale: run the commands, not only print them')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    experiments = load_experiments()
    if args.list:
        print('\n'.join(describe(e) for e in experiments.values()))
        return 0
    if args.all:
        for experiment in experiments.values():
            if experiment.get('demo'):
                print(f'== {experiment["id"]}', flush=True)
                status = run_commands(commands_for(experiment, 'demo'))
                if status:
                    return status
                for line in reported_results(experiment):
                    print(line)
        return 0
    if args.experiment is None:
        raise SystemExit('name an experiment id, or --list; ids: ' + ', '.join(experiments))
    if args.experiment not in experiments:
        raise SystemExit(f'unknown experiment {args.experiment!r}; ids: ' + ', '.join(experiments))
    experiment = experiments[args.experiment]
    commands = commands_for(experiment, args.scale)
    printing = args.dry_run if args.scale == 'demo' else not args.run
    status = 0
    if printing:
        print('\n'.join(commands))
    else:
        status = run_commands(commands)
    for line in reported_results(experiment):
        print(line)
    return status


if __name__ == '__main__':
    sys.exit(main())
