"""The registry of the three papers' experiments (``tools/reproduce_experiments.yml``): read
and checked (ids, reasons, claims, one work folder per command), the commands of a scale, and
what the model index says the paper reports."""
import os.path as osp
import re
import shlex
from typing import Dict, List

import yaml

#: The source checkout the registry describes (its commands run from it; its docs, Makefile and
#: configs are read from it).
REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__)))))
EXPERIMENTS_FILE = osp.join(REPO_ROOT, 'tools', 'reproduce_experiments.yml')
MODEL_INDEX = osp.join(REPO_ROOT, 'mmlinear', '.mim', 'model-index.yml')
MAKEFILE = osp.join(REPO_ROOT, 'Makefile')
SCALES = ('demo', 'paper')
#: What an experiment can lack (the keys of its ``why_missing``), in the order reported.
PARTS = ('paper_scale', 'demo', 'recorded')
#: What a claim can lack beside its experiment (the keys of a claim's ``why_missing``).
CLAIM_PARTS = ('paper_scale', 'recorded')
#: The keys a claim takes.
CLAIM_KEYS = ('id', 'where', 'reports', 'numbers', 'quoted_in', 'recorded', 'why_missing')
#: Where a claim's ``numbers`` are printed from: the experiment's ``docs`` page, or the model
#: index's results of the configs of its paper-scale commands (:func:`reported_results`).
QUOTED_IN = ('docs', 'model index')
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


def has_part(experiment: dict, part: str) -> bool:
    """Whether an experiment has a part of :data:`PARTS`: paper-scale commands (or a check of
    released weights), demo commands, a recorded demo-scale figure."""
    if part == 'paper_scale':
        return bool(experiment.get('paper_scale') or experiment.get('released'))
    return bool(experiment.get(part))


def check_reasons(experiment: dict) -> None:
    """Refuse a ``why_missing`` that names no part of :data:`PARTS`, or a part the experiment
    has (a reason left behind when the part was added).

    Raises:
        ValueError: Naming the experiment and the key.
    """
    for part in experiment.get('why_missing') or {}:
        if part not in PARTS:
            raise ValueError(f'{experiment["id"]}: why_missing names {part!r}; it takes '
                             f'{", ".join(PARTS)}')
        if has_part(experiment, part):
            raise ValueError(f'{experiment["id"]}: why_missing gives a reason for {part}, '
                             'which it has')


def number_pattern(number: str) -> re.Pattern:
    """A number as a whole token of a text: ``81.5`` is not found in ``181.5`` nor in
    ``81.53``."""
    return re.compile(rf'(?<![\d.]){re.escape(number)}(?!\d|\.\d)')


def check_claims(experiment: dict) -> None:
    """Refuse a claim without ``id``, ``where`` or ``reports``, with a key of no meaning,
    with a number its ``reports`` does not show or that says not where it is printed from, with
    a reason for no part of :data:`CLAIM_PARTS`, or with both its own demo figure and a reason
    why it has none.

    Raises:
        ValueError: Naming the experiment, the claim and the key.
    """
    for claim in experiment.get('claims') or []:
        name = f'{experiment["id"]}: claim {claim.get("id")!r}'
        absent = [key for key in ('id', 'where', 'reports') if not claim.get(key)]
        if absent:
            raise ValueError(f'{name} lacks {", ".join(absent)}')
        unknown = sorted(set(claim) - set(CLAIM_KEYS))
        if unknown:
            raise ValueError(f'{name} has {", ".join(unknown)}; a claim takes '
                             f'{", ".join(CLAIM_KEYS)}')
        numbers = claim.get('numbers') or []
        if numbers and claim.get('quoted_in') not in QUOTED_IN:
            raise ValueError(f'{name}: quoted_in is {claim.get("quoted_in")!r}; its numbers '
                             f'are quoted in one of {", ".join(QUOTED_IN)}')
        for number in numbers:
            if not isinstance(number, str) or not number_pattern(number).search(claim['reports']):
                raise ValueError(f'{name}: its number {number!r} is not a text its reports shows')
        for part in claim.get('why_missing') or {}:
            if part not in CLAIM_PARTS:
                raise ValueError(f'{name}: why_missing names {part!r}; a claim takes '
                                 f'{", ".join(CLAIM_PARTS)}')
        if 'recorded' in (claim.get('why_missing') or {}) and claim.get('recorded'):
            raise ValueError(f'{name}: why_missing gives a reason for recorded, but the claim '
                             'records its own figure')


def load_experiments(path: str = EXPERIMENTS_FILE) -> Dict[str, dict]:
    """The experiments by id, in the file's order.

    Raises:
        ValueError: An id is given twice (an experiment's, or a claim's across every
            experiment), a reason is given for a part an experiment has or for no part
            (:func:`check_reasons`), a claim is malformed (:func:`check_claims`), a ``checks``
            names no claim of another experiment, or two commands share a work folder
            (:func:`check_work_folders`).
    """
    with open(path) as f:
        experiments = yaml.safe_load(f)
    by_id: Dict[str, dict] = {}
    claim_owner: Dict[str, str] = {}
    for experiment in experiments:
        if experiment['id'] in by_id:
            raise ValueError(f'{path}: experiment id {experiment["id"]!r} is given twice')
        try:
            check_reasons(experiment)
            check_claims(experiment)
        except ValueError as e:
            raise ValueError(f'{path}: {e}') from None
        for claim in experiment.get('claims') or []:
            if claim['id'] in claim_owner:
                raise ValueError(f'{path}: claim id {claim["id"]!r} is given twice')
            claim_owner[claim['id']] = experiment['id']
        by_id[experiment['id']] = experiment
    for experiment in experiments:
        checked = experiment.get('checks')
        if checked and claim_owner.get(checked) in (None, experiment['id']):
            raise ValueError(f'{path}: {experiment["id"]}: checks {checked!r}, which is no claim '
                             'of another experiment')
    try:
        check_work_folders(experiments)
    except ValueError as e:
        raise ValueError(f'{path}: {e}') from None
    return by_id


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
    if experiment.get('released'):
        configs.add(experiment['released']['config'])
    lines = []
    for model in modelindex.load(MODEL_INDEX).models:
        if model.config in configs and model.results:
            metrics = '; '.join(f'{result.dataset} {name} {value}' for result in model.results
                                for name, value in result.metrics.items())
            lines.append(f'  {model.name}: {metrics}')
    return ['reported by the paper (model index; not reproduced here):'] + lines if lines else []


def paper_metric(config: str) -> str:
    """The first metric the model index reports for a config, as ``dataset name value``."""
    import modelindex
    for model in modelindex.load(MODEL_INDEX).models:
        if model.config == config and model.results:
            result = model.results[0]
            name, value = next(iter(result.metrics.items()))
            return f'{result.dataset} {name} {value}'
    raise ValueError(f'the model index reports no result for {config}')
