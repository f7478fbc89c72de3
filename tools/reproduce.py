"""The three papers' experiments, one command each.

    python tools/reproduce.py --list                     # every experiment, and what it has
    python tools/reproduce.py --list --missing           # what each still lacks, and why
    python tools/reproduce.py --claims                   # each claim of the papers, its status
    python tools/reproduce.py --claims --markdown        # the same as docs/reproduce.md's table
    python tools/reproduce.py ID --scale demo            # run it on the bundled data, CPU
    python tools/reproduce.py ID --scale demo --dry-run  # print what that would run
    python tools/reproduce.py ID --scale paper           # print the paper-scale commands
    python tools/reproduce.py ID --scale paper --run     # and run them
    python tools/reproduce.py --all                      # every demo-scale experiment
    python tools/reproduce.py ID --checkpoint PATH --data-root PATH  # check released weights

The experiments, their commands and what each still lacks are in
``tools/reproduce_experiments.yml``; their results are written up where ``docs`` says, the
demo-scale figure in the section that ``recorded`` names, which ``--missing`` checks is there
and shows the figure. Each experiment lists the papers' ``claims`` it serves (a table, figure
or headline number, where the paper states it, what it reports); a claim has what its
experiment has, unless it gives its own figure or its own reason for a part it lacks. A demo
run first makes the files its commands read when they are missing (the bundled data, a demo
checkpoint), then runs its commands in order from the repository root and stops at the first
that fails, with its exit status. Both scales end with what the paper reports for the configs
of the experiment's paper-scale commands, read from the model index (``Results``), beside
which the run's own tools print what they measured.

An experiment with a ``released`` entry checks a model's published weights instead: it converts
the file given with ``--checkpoint`` with the model's converter, checks that the converted
weights fill the model of the config, trains the frozen-backbone probe first where the paper's
number is a probe's (VECA releases its backbone only), evaluates with ``tools/test.py`` on the
dataset under ``--data-root`` and prints the metric beside the paper's.
"""
import argparse
import os
import os.path as osp
import subprocess
import sys
from typing import List, Optional, Sequence

from mmlinear.cli.reproduce import (REPO_ROOT, SCALES, check_converted, check_released_inputs,
                                    claims_markdown, claims_view, commands_for, describe,
                                    load_experiments, measured_metric, missing_report, paper_metric,
                                    released_commands, released_work_dir, reported_results)


def check_released(experiment: dict,
                   checkpoint: Optional[str],
                   data_root: Optional[str],
                   dry_run: bool,
                   cfg_options: Sequence[str] = ()) -> int:
    """Convert, check, (train the probe,) evaluate released weights and print the metric
    beside the paper's; with ``dry_run`` print the commands only (the files need not exist).

    Returns:
        int: The exit status of the first command that fails, else 0.
    """
    released = experiment.get('released')
    if released is None:
        raise SystemExit(f'{experiment["id"]} evaluates no released weights; experiments that '
                         'do: ' +
                         ', '.join(i for i, e in load_experiments().items() if e.get('released')))
    if not (checkpoint and data_root):
        raise SystemExit(f'{experiment["id"]} needs both --checkpoint ({released["weights"]}) '
                         f'and --data-root ({released["data"]})')
    checkpoint, data_root = osp.abspath(checkpoint), osp.abspath(data_root)
    convert, *evaluate = released_commands(experiment, checkpoint, data_root, cfg_options)
    if dry_run:
        print('\n'.join([convert] + evaluate))
        return 0
    check_released_inputs(experiment, checkpoint, data_root)
    status = run_commands([convert])
    if status:
        return status
    check_converted(experiment, osp.join(released_work_dir(experiment), 'converted.pth'),
                    cfg_options)
    status = run_commands(evaluate)
    if status:
        return status
    value = measured_metric(osp.join(released_work_dir(experiment), 'test'), released['metric'])
    print(f'{experiment["id"]}: measured {released["metric"]} {value:.2f} on {data_root}; '
          f'the paper reports {paper_metric(released["config"])} (model index)')
    return 0


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
        '--missing',
        action='store_true',
        help='with --list: what each experiment still lacks (a paper-scale command, a demo '
        'command, its recorded demo figure) and the reason it gives')
    parser.add_argument(
        '--all', action='store_true', help='run every experiment that has demo commands')
    parser.add_argument('--scale', choices=SCALES, default='demo')
    parser.add_argument(
        '--dry-run', action='store_true', help='demo scale: print the commands, run nothing')
    parser.add_argument(
        '--run', action='store_true', help='paper scale: run the commands, not only print them')
    parser.add_argument(
        '--checkpoint', help='the released weights, for an experiment that checks them')
    parser.add_argument(
        '--data-root',
        help='the evaluation dataset, for an experiment that checks released weights')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        default=[],
        metavar='KEY=VALUE',
        help='released weights: config overrides for the probe\'s training and the '
        'evaluation (e.g. test_dataloader.batch_size=32)')
    parser.add_argument(
        '--claims',
        action='store_true',
        help='each claim of the papers (a table, figure or headline number), its experiment, '
        'its paper-scale run and its demo figure, or why either is missing')
    parser.add_argument(
        '--markdown',
        action='store_true',
        help='with --claims: the table of docs/reproduce.md, section "Claims"')
    args = parser.parse_args(argv)
    if args.missing and not args.list:
        parser.error('--missing goes with --list: python tools/reproduce.py --list --missing')
    if args.markdown and not args.claims:
        parser.error('--markdown goes with --claims: python tools/reproduce.py --claims --markdown')
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    experiments = load_experiments()
    if args.claims:
        print(claims_markdown(experiments) if args.markdown else claims_view(experiments))
        return 0
    if args.list:
        print(
            missing_report(experiments) if args.missing else '\n'.join(
                describe(e) for e in experiments.values()))
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
    if args.checkpoint or args.data_root or experiment.get('released'):
        return check_released(experiment, args.checkpoint, args.data_root, args.dry_run,
                              args.cfg_options)
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
