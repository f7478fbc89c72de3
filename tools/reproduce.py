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
import glob
import json
import os
import os.path as osp
import re
import shlex
import subprocess
import sys
from typing import Dict, List, Optional, Sequence, Tuple

import yaml

REPO_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
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
#: The lines around the claims table that ``--claims --markdown`` writes into docs/reproduce.md.
CLAIMS_TABLE_BEGIN = '<!-- claims table: python tools/reproduce.py --claims --markdown -->'
CLAIMS_TABLE_END = '<!-- end of the claims table -->'
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


def section_text(path: str, heading: str) -> str:
    """The text of a Markdown file's section: from the heading whose title is ``heading``
    to the next heading of the same or a higher level (lines in code blocks are not
    headings), its runs of white space made single spaces.

    Raises:
        ValueError: The file has no such heading, or has it more than once.
    """
    with open(osp.join(REPO_ROOT, path)) as f:
        lines = f.read().splitlines()
    headings = []  # (line index, level, title)
    in_code = False
    for index, line in enumerate(lines):
        if line.lstrip().startswith('```'):
            in_code = not in_code
        title = None if in_code else re.match(r'(#+)\s+(.*?)\s*$', line)
        if title:
            headings.append((index, len(title.group(1)), title.group(2)))
    found = [(index, level) for index, level, title in headings if title == heading]
    if len(found) != 1:
        raise ValueError(f'{path} has {"no" if not found else len(found)} headings {heading!r}')
    start, level = found[0]
    end = next((index for index, other, _ in headings if index > start and other <= level),
               len(lines))
    return ' '.join(' '.join(lines[start + 1:end]).split())


def recorded_problem(experiment: dict) -> Optional[str]:
    """Why an experiment's recorded demo-scale figure is not where ``recorded`` says (its
    ``section`` of the ``docs`` file must show the text ``shows``), else None."""
    recorded = experiment['recorded']
    try:
        text = section_text(experiment['docs'], recorded['section'])
    except ValueError as e:
        return str(e)
    if ' '.join(recorded['shows'].split()) not in text:
        return (f'the section {recorded["section"]!r} of {experiment["docs"]} does not show '
                f'{recorded["shows"]!r}')
    return None


def lack_line(what: str, reason: Optional[str]) -> str:
    """A lack as ``--list --missing`` prints it: with its reason, or "(no reason given)"."""
    return f'{what}: {reason}' if reason else f'{what} (no reason given)'


def missing_parts(experiment: dict) -> List[str]:
    """What an experiment lacks, a line each, with the reason its ``why_missing`` (or its
    ``pending``) gives: no paper-scale command (nor a check of released weights), no demo
    command, a recorded figure that is not where ``recorded`` says, demo commands whose
    figure was never recorded."""
    lacks = []
    if not has_part(experiment, 'paper_scale'):
        lacks.append(('paper_scale', 'no paper-scale command'))
    if not experiment.get('demo'):
        lacks.append(('demo', 'no demo command'))
    if experiment.get('recorded'):
        problem = recorded_problem(experiment)
        if problem:
            lacks.append(('recorded', f'the recorded demo figure is missing: {problem}'))
    elif experiment.get('demo'):
        lacks.append(('recorded', 'a demo command never recorded'))
    reasons = experiment.get('why_missing') or {}
    lines = []
    for part, what in lacks:
        reason = reasons.get(part) or (experiment.get('pending') if part != 'recorded' else None)
        lines.append(lack_line(what, reason))
    return lines


def claim_figure(experiment: dict, claim: dict) -> Optional[dict]:
    """Where a claim's demo-scale figure is recorded (a ``section`` of the experiment's
    ``docs`` and a text it ``shows``): the claim's own ``recorded``, else its experiment's
    unless the claim gives a reason why that figure is not its own; None where there is none."""
    if claim.get('recorded'):
        return claim['recorded']
    if 'recorded' in (claim.get('why_missing') or {}):
        return None
    return experiment.get('recorded')


def claim_lacks(experiment: dict, claim: dict) -> List[Tuple[str, str, Optional[str], bool]]:
    """What a claim lacks: ``(part, what, reason, own)`` for its paper-scale command
    (``part`` 'paper_scale') and its demo figure ('recorded'). ``own`` tells a lack that the
    claim's own ``why_missing`` (or its own ``recorded``) gives from one it has from its
    experiment, whose reason (``why_missing``, else ``pending``) is then the reason."""
    reasons = claim.get('why_missing') or {}
    experiment_reasons = experiment.get('why_missing') or {}
    lacks = []
    if 'paper_scale' in reasons:
        lacks.append(('paper_scale', 'no paper-scale command', reasons['paper_scale'], True))
    elif not has_part(experiment, 'paper_scale'):
        lacks.append(('paper_scale', 'no paper-scale command', experiment_reasons.get('paper_scale')
                      or experiment.get('pending'), False))
    figure = claim_figure(experiment, claim)
    if figure:
        problem = recorded_problem(dict(docs=experiment['docs'], recorded=figure))
        if problem:
            lacks.append(('recorded', f'the recorded demo figure is missing: {problem}', None,
                          bool(claim.get('recorded'))))
    elif 'recorded' in reasons:
        lacks.append(('recorded', 'no demo figure', reasons['recorded'], True))
    else:
        lacks.append(('recorded', 'no demo figure', experiment_reasons.get('demo')
                      or experiment_reasons.get('recorded') or experiment.get('pending'), False))
    return lacks


def claim_number_problems(experiment: dict, claim: dict) -> List[str]:
    """The numbers of a claim that are not where its ``quoted_in`` says the registry prints
    them from: the experiment's ``docs`` page (outside the claims table, which is made from
    the registry) or the model index's results of the experiment's configs."""
    if not claim.get('numbers'):
        return []
    if claim['quoted_in'] == 'docs':
        source = experiment['docs']
        with open(osp.join(REPO_ROOT, source)) as f:
            text = f.read()
        if CLAIMS_TABLE_BEGIN in text:
            text = text[:text.index(CLAIMS_TABLE_BEGIN)] + text[text.index(CLAIMS_TABLE_END):]
    else:
        source = 'the model index'
        text = '\n'.join(reported_results(experiment))
    return [
        f'{claim["id"]}: {number} is not in {source}' for number in claim['numbers']
        if not number_pattern(number).search(text)
    ]


def describe(experiment: dict) -> str:
    """One experiment's lines for ``--list``: what it shows, what it can run, where its
    demo-scale figure is recorded (or why none is), and the claims it serves, each with what it
    has or lacks beside its experiment (its own figure, its own reason)."""
    runs = [
        scale for scale, key in (('demo', 'demo'), ('paper', 'paper_scale')) if experiment.get(key)
    ]
    if experiment.get('released'):
        runs.append(f'released weights (--checkpoint {experiment["released"]["weights"]} '
                    '--data-root DATA_ROOT)')
    lines = [
        f'{experiment["id"]}  [{experiment["paper"]}]  runs: {", ".join(runs) or "none"}',
        f'    {experiment["item"]}', f'    results: {experiment["docs"]}'
    ]
    reasons = experiment.get('why_missing') or {}
    if experiment.get('recorded'):
        lines.append(f'    demo figure: {experiment["docs"]}, section '
                     f'"{experiment["recorded"]["section"]}"')
    elif reasons.get('demo') or reasons.get('recorded'):
        lines.append(f'    no demo figure: {reasons.get("demo") or reasons.get("recorded")}')
    if experiment.get('pending'):
        lines.append(f'    pending: {experiment["pending"]}')
    if experiment.get('checks'):
        lines.append(f'    checks the number of claim {experiment["checks"]}')
    for claim in experiment.get('claims') or []:
        lines.append(f'    claim {claim["id"]} ({claim["where"]}): {claim["reports"]}')
        if claim.get('recorded'):
            lines.append(f'        its demo figure: section "{claim["recorded"]["section"]}"')
        for _, what, reason, own in claim_lacks(experiment, claim):
            if own:
                lines.append(f'        {lack_line(what, reason)}')
    return '\n'.join(lines)


def claim_tally(lacks: List[set]) -> str:
    """How many of the claims whose lacking parts are ``lacks`` (a set of :data:`CLAIM_PARTS`
    per claim) are incomplete, and how many lack a demo figure and a paper-scale command."""
    return (f'{sum(bool(parts) for parts in lacks)} of {len(lacks)} claims incomplete '
            f'({sum("recorded" in parts for parts in lacks)} without a demo figure, '
            f'{sum("paper_scale" in parts for parts in lacks)} without a paper-scale command)')


def missing_report(experiments: Dict[str, dict]) -> str:
    """``--list --missing``: each experiment that lacks something, with what and why, and its
    claims that lack something (what they lack beside their experiment, with their own reason;
    "as above" where they lack what the experiment lacks), then a count of the lacks, of the
    incomplete claims and of the lacks without a reason."""
    lines, count, lacking, unexplained = [], 0, 0, 0
    claim_parts = []
    for experiment_id, experiment in experiments.items():
        lacks = missing_parts(experiment)
        claim_lines = []
        for claim in experiment.get('claims') or []:
            parts = claim_lacks(experiment, claim)
            claim_parts.append({part for part, *_ in parts})
            for _, what, reason, own in parts:
                if own:
                    claim_lines.append(f'    claim {claim["id"]}: {lack_line(what, reason)}')
                    unexplained += not reason
                else:
                    claim_lines.append(f'    claim {claim["id"]}: {what}, as above')
        if lacks or claim_lines:
            lines.append(experiment_id)
            lines += [f'    {lack}' for lack in lacks] + claim_lines
        lacking += bool(lacks)
        count += len(lacks)
        unexplained += sum(lack.endswith('(no reason given)') for lack in lacks)
    lines.append(f'{count} missing in {lacking} of {len(experiments)} experiments; '
                 f'{claim_tally(claim_parts)}; {unexplained} without a reason given')
    return '\n'.join(lines)


def all_claims(experiments: Dict[str, dict]) -> List[Tuple[dict, dict]]:
    """Every ``(experiment, claim)``, in the file's order."""
    return [(e, c) for e in experiments.values() for c in e.get('claims') or []]


def claims_summary(experiments: Dict[str, dict]) -> str:
    """One line: the claims per paper, how many are incomplete, how many lack a demo figure and
    how many a paper-scale command."""
    pairs = all_claims(experiments)
    papers: Dict[str, int] = {}
    for experiment, _ in pairs:
        papers[experiment['paper']] = papers.get(experiment['paper'], 0) + 1
    per_paper = ', '.join(f'{paper} {n}' for paper, n in papers.items())
    lacks = [{part for part, *_ in claim_lacks(e, c)} for e, c in pairs]
    return f'claims per paper: {per_paper}; {claim_tally(lacks)}'


def claim_status(experiments: Dict[str, dict], experiment: dict, claim: dict) -> Tuple[str, str]:
    """A claim's paper-scale run (the command that prints it, and the checks of released
    weights of its number) or why there is none, and its demo figure (the page and section)
    or why there is none."""
    lacks = {part: (what, reason) for part, what, reason, _ in claim_lacks(experiment, claim)}
    if 'paper_scale' in lacks:
        paper = lack_line('none', lacks['paper_scale'][1])
    else:
        paper = f'python tools/reproduce.py {experiment["id"]} --scale paper' if \
            experiment.get('paper_scale') else f'released weights ({experiment["id"]})'
        checks = [e['id'] for e in experiments.values() if e.get('checks') == claim['id']]
        if checks:
            paper += '; released weights checked by ' + ', '.join(checks)
    figure = claim_figure(experiment, claim)
    if 'recorded' in lacks:
        what, reason = lacks['recorded']
        demo = lack_line('none' if what == 'no demo figure' else what, reason)
    else:
        demo = f'{experiment["docs"]}, section "{figure["section"]}"'
    return paper, demo


def claims_view(experiments: Dict[str, dict]) -> str:
    """``--claims``: each claim, where the paper states it, what it reports, its experiment,
    its paper-scale run and its demo figure (or why either is missing), then the summary."""
    lines = []
    for experiment, claim in all_claims(experiments):
        paper, demo = claim_status(experiments, experiment, claim)
        lines += [
            f'{claim["id"]}  [{experiment["paper"]}, {claim["where"]}]  experiment '
            f'{experiment["id"]}', f'    {claim["reports"]}', f'    paper scale: {paper}',
            f'    demo figure: {demo}'
        ]
    return '\n'.join(lines + [claims_summary(experiments)])


def claims_markdown(experiments: Dict[str, dict]) -> str:
    """``--claims --markdown``: the claims as the table of docs/reproduce.md, between the
    lines that mark it as made from the registry, with the summary below it."""

    def cell(text: str) -> str:
        return ' '.join(text.split()).replace('|', '/')

    lines = [
        CLAIMS_TABLE_BEGIN, '',
        '| claim | paper, where | reported | experiment | paper scale | demo figure, or why none |',
        '|---|---|---|---|---|---|'
    ]
    for experiment, claim in all_claims(experiments):
        paper, demo = claim_status(experiments, experiment, claim)
        paper = re.sub(r'^(python tools/reproduce\.py \S+ --scale paper)', r'`\1`', paper)
        lines.append(f'| `{claim["id"]}` | {experiment["paper"]}, {cell(claim["where"])} | '
                     f'{cell(claim["reports"])} | `{experiment["id"]}` | {cell(paper)} | '
                     f'{cell(demo)} |')
    return '\n'.join(lines + ['', claims_summary(experiments) + '.', '', CLAIMS_TABLE_END])


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


def paper_metric(config: str) -> str:
    """The first metric the model index reports for a config, as ``dataset name value``."""
    import modelindex
    for model in modelindex.load(MODEL_INDEX).models:
        if model.config == config and model.results:
            result = model.results[0]
            name, value = next(iter(result.metrics.items()))
            return f'{result.dataset} {name} {value}'
    raise ValueError(f'the model index reports no result for {config}')


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
