"""What the registry's experiments and the papers' claims have and lack: the recorded demo
figures found in their docs sections, the reasons given for what is missing, and the views of
``tools/reproduce.py --list``, ``--missing`` and ``--claims``."""
import os.path as osp
import re
from typing import Dict, List, Optional, Tuple

from .registry import REPO_ROOT, has_part, number_pattern, reported_results

#: The lines around the claims table that ``--claims --markdown`` writes into docs/reproduce.md.
CLAIMS_TABLE_BEGIN = '<!-- claims table: python tools/reproduce.py --claims --markdown -->'
CLAIMS_TABLE_END = '<!-- end of the claims table -->'


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
    """How many of the claims whose lacking parts are ``lacks`` (a set of
    :data:`~.registry.CLAIM_PARTS` per claim) are incomplete, and how many lack a demo figure
    and a paper-scale command."""
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
