"""The papers' claims in tools/reproduce_experiments.yml: each has one id and one experiment, its
numbers are where the registry prints them from, ``--list``, ``--list --missing`` and
``--claims`` show what each has or lacks, and docs/reproduce.md's "Claims" table is the
registry's."""
import os.path as osp
import re

import pytest
import yaml
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT

import mmlinear.cli.reproduce as registry

reproduce = load_tool('reproduce', osp.join(REPO_ROOT, 'tools'))
EXPERIMENTS = registry.load_experiments()
CLAIMS = registry.all_claims(EXPERIMENTS)
WITH_NUMBERS = [(e, c) for e, c in CLAIMS if c.get('numbers')]


def test_every_claim_id_is_unique_and_belongs_to_exactly_one_experiment():
    with open(registry.EXPERIMENTS_FILE) as f:
        raw = yaml.safe_load(f)
    owners = [(claim['id'], entry['id']) for entry in raw for claim in entry.get('claims') or []]
    ids = [claim_id for claim_id, _ in owners]
    assert len(ids) == len(set(ids)) == len(CLAIMS)
    for claim_id, owner in owners:
        assert claim_id.startswith(('infvit-', 'weightformer-', 'veca-')), claim_id
        assert [e['id'] for e, c in CLAIMS if c['id'] == claim_id] == [owner]


def test_every_paper_has_claims_and_every_experiment_serves_or_checks_one():
    """An experiment without claims of its own checks one on released weights."""
    assert {e['paper'] for e, _ in CLAIMS} == {e['paper'] for e in EXPERIMENTS.values()}
    claim_ids = {c['id'] for _, c in CLAIMS}
    for experiment in EXPERIMENTS.values():
        if not experiment.get('claims'):
            assert experiment.get('released') and experiment['checks'] in claim_ids, \
                experiment['id']


@pytest.mark.parametrize('experiment, claim', WITH_NUMBERS, ids=[c['id'] for _, c in WITH_NUMBERS])
def test_the_papers_numbers_are_where_the_registry_prints_them_from(experiment, claim):
    """In the experiment's docs page (outside the claims table, which is made from the
    registry) or in the model index's results of its configs, as ``quoted_in`` says."""
    assert registry.claim_number_problems(experiment, claim) == []


def test_claims_quote_numbers_from_both_sources():
    assert {c['quoted_in'] for _, c in WITH_NUMBERS} == set(registry.QUOTED_IN)


def test_a_number_missing_from_its_source_is_named(tmp_path):
    docs = tmp_path / 'results.md'
    docs.write_text(f'The paper reports 81.5.\n\n{registry.CLAIMS_TABLE_BEGIN}\n| 84.7 |\n'
                    f'{registry.CLAIMS_TABLE_END}\n')
    experiment = dict(id='x', docs=str(docs))
    claim = dict(
        id='infvit-x', reports='top-1 81.5 and 84.7', numbers=['81.5', '84.7'], quoted_in='docs')
    # 84.7 is only in the claims table, 81.5 in the text: only 84.7 is missing.
    problems = registry.claim_number_problems(experiment, claim)
    assert problems == [f'infvit-x: 84.7 is not in {docs}']
    # A number is a whole token: 1.5 is not found in 81.5.
    problems = registry.claim_number_problems(experiment, dict(claim, numbers=['1.5']))
    assert problems == [f'infvit-x: 1.5 is not in {docs}']


@pytest.mark.parametrize(
    'experiment, claim', [(e, c) for e, c in CLAIMS if c.get('recorded')],
    ids=[c['id'] for _, c in CLAIMS if c.get('recorded')])
def test_a_claims_own_figure_is_where_it_says(experiment, claim):
    assert registry.recorded_problem(dict(docs=experiment['docs'],
                                          recorded=claim['recorded'])) is None


BASE = dict(paper='VECA', item='x', docs='README.md', paper_scale=['make bench-9216'])
#: A well-formed claim of a well-formed experiment, which the cases below spoil.
CLAIM = dict(
    id='veca-a', where='Fig. 1', reports='top-1 81.93', numbers=['81.93'], quoted_in='docs')


def refused(tmp_path, entries, message):
    path = tmp_path / 'experiments.yml'
    path.write_text(yaml.safe_dump(entries))
    with pytest.raises(ValueError, match=re.escape(message)):
        registry.load_experiments(str(path))


@pytest.mark.parametrize('changes, message', [
    (dict(where=''), "a: claim 'veca-a' lacks where"),
    (dict(table='2'), "claim 'veca-a' has table; a claim takes id, where, reports"),
    (dict(numbers=['81.9']), "its number '81.9' is not a text its reports shows"),
    (dict(numbers=[81.93]), 'its number 81.93 is not a text its reports shows'),
    (dict(quoted_in='paper'), "quoted_in is 'paper'; its numbers are quoted in one of docs"),
    (dict(why_missing=dict(demo='x')), "why_missing names 'demo'; a claim takes paper_scale"),
    (dict(recorded=dict(section='s', shows='t'), why_missing=dict(recorded='x')),
     'why_missing gives a reason for recorded, but the claim records its own figure'),
])
def test_a_malformed_claim_is_refused(tmp_path, changes, message):
    refused(tmp_path, [dict(BASE, id='a', claims=[dict(CLAIM, **changes)])], message)


def test_a_claim_given_twice_or_a_check_of_no_claim_is_refused(tmp_path):
    twice = "claim id 'veca-a' is given twice"
    refused(tmp_path, [dict(BASE, id='a', claims=[CLAIM, CLAIM])], twice)
    refused(tmp_path, [dict(BASE, id='a', claims=[CLAIM]),
                       dict(BASE, id='b', claims=[CLAIM])], twice)
    refused(tmp_path, [dict(BASE, id='a', claims=[CLAIM], checks='veca-a')],
            "a: checks 'veca-a', which is no claim of another experiment")
    refused(tmp_path, [dict(BASE, id='a', checks='veca-b')], "a: checks 'veca-b', which is no")


def test_the_list_shows_each_claim_under_its_experiment():
    listed = run_tool_main(reproduce, '--list').stdout
    headers = [listed.index(f'{i}  [{e["paper"]}]  runs: ') for i, e in EXPERIMENTS.items()]
    for (start,
         end), experiment in zip(zip(headers, headers[1:] + [len(listed)]), EXPERIMENTS.values()):
        block = listed[start:end]
        for claim in experiment.get('claims') or []:
            assert f'\n    claim {claim["id"]} ({claim["where"]}): ' in block
        if experiment.get('checks'):
            assert f'\n    checks the number of claim {experiment["checks"]}\n' in block
    # A claim's own figure and its own reasons, under it.
    assert '    claim infvit-size (' in listed and \
        '        its demo figure: section "Parameters and FLOPs (exact, machine-independent)"' \
        in listed
    assert '    claim weightformer-predictor-variants (' in listed and \
        '        no demo figure: the variants other than the released predictors are known ' \
        'here by their names in Fig. 3 only' in listed
    assert '    claim veca-budget-regions (' in listed and \
        '        its demo figure: section "Core analyses (demo scale)"' in listed


def test_a_claim_has_what_its_experiment_has_unless_it_says_otherwise(tmp_path):
    docs = tmp_path / 'results.md'
    docs.write_text('# Results\n\n## Demo\n\n| demo | 99.0 |\n\n## Other\n\n| other | 1.0 |\n')
    train = 'python tools/train.py configs/demo/x.py --work-dir work_dirs/x'
    base = dict(paper='VECA', item='x', docs=str(docs))
    entries = [
        dict(
            base,
            id='complete',
            demo=[train],
            paper_scale=['make bench-9216'],
            recorded=dict(section='Demo', shows='| demo | 99.0 |'),
            claims=[
                dict(id='veca-complete', where='Fig. 1', reports='r'),
                dict(
                    id='veca-own-figure',
                    where='Fig. 2',
                    reports='r',
                    recorded=dict(section='Other', shows='| other | 1.0 |')),
                dict(
                    id='veca-own-reasons',
                    where='Fig. 3',
                    reports='r',
                    why_missing=dict(paper_scale='not counted', recorded='not drawn')),
                dict(
                    id='veca-wrong-figure',
                    where='Fig. 4',
                    reports='r',
                    recorded=dict(section='Other', shows='| other | 2.0 |')),
            ]),
        dict(
            base,
            id='paper-only',
            paper_scale=['make bench-scaling'],
            why_missing=dict(demo='needs a GPU'),
            claims=[dict(id='veca-paper-only', where='Table 1', reports='r')]),
        dict(
            base,
            id='pending',
            pending='outside this plugin',
            claims=[dict(id='veca-pending', where='Sec. 5', reports='r')]),
    ]
    path = tmp_path / 'experiments.yml'
    path.write_text(yaml.safe_dump(entries))
    experiments = registry.load_experiments(str(path))
    assert registry.missing_report(experiments).splitlines() == [
        'complete',
        '    claim veca-own-reasons: no paper-scale command: not counted',
        '    claim veca-own-reasons: no demo figure: not drawn',
        f"    claim veca-wrong-figure: the recorded demo figure is missing: the section 'Other' "
        f"of {docs} does not show '| other | 2.0 |' (no reason given)",
        'paper-only',
        '    no demo command: needs a GPU',
        '    claim veca-paper-only: no demo figure, as above',
        'pending',
        '    no paper-scale command: outside this plugin',
        '    no demo command: outside this plugin',
        '    claim veca-pending: no paper-scale command, as above',
        '    claim veca-pending: no demo figure, as above',
        '3 missing in 2 of 3 experiments; 4 of 6 claims incomplete (4 without a demo figure, 2 '
        'without a paper-scale command); 1 without a reason given',
    ]
    view = registry.claims_view(experiments).splitlines()
    assert view[:4] == [
        'veca-complete  [VECA, Fig. 1]  experiment complete', '    r',
        '    paper scale: python tools/reproduce.py complete --scale paper',
        f'    demo figure: {docs}, section "Demo"'
    ]
    assert view[4:8][3] == f'    demo figure: {docs}, section "Other"'
    assert view[-1] == ('claims per paper: VECA 6; 4 of 6 claims incomplete (4 without a demo '
                        'figure, 2 without a paper-scale command)')


def test_the_missing_summary_counts_the_claims():
    report = run_tool_main(reproduce, '--list', '--missing').stdout.splitlines()
    lacks = [{part for part, *_ in registry.claim_lacks(e, c)} for e, c in CLAIMS]
    summary = re.fullmatch(
        r'\d+ missing in \d+ of (\d+) experiments; (\d+) of (\d+) claims incomplete \((\d+) '
        r'without a demo figure, (\d+) without a paper-scale command\); 0 without a reason given',
        report[-1])
    assert summary, report[-1]
    assert [int(n) for n in summary.groups()] == [
        len(EXPERIMENTS),
        sum(bool(parts) for parts in lacks),
        len(CLAIMS),
        sum('recorded' in parts for parts in lacks),
        sum('paper_scale' in parts for parts in lacks)
    ]
    # Every incomplete claim is named under its experiment.
    for (experiment, claim), parts in zip(CLAIMS, lacks):
        assert bool(parts) == any(line.startswith(f'    claim {claim["id"]}: ') for line in report)


def test_the_claims_table_of_the_docs_is_the_registrys():
    with open(osp.join(REPO_ROOT, 'docs', 'reproduce.md')) as f:
        text = f.read()
    begin = text.index(registry.CLAIMS_TABLE_BEGIN)
    end = text.index(registry.CLAIMS_TABLE_END) + len(registry.CLAIMS_TABLE_END)
    assert text[begin:end] == registry.claims_markdown(EXPERIMENTS), \
        'regenerate it: python tools/reproduce.py --claims --markdown'
    assert text[:begin].rstrip().endswith('fails when it differs.')
    printed = run_tool_main(reproduce, '--claims', '--markdown')
    assert printed.returncode == 0 and printed.stdout.rstrip('\n') == text[begin:end]


def test_the_claims_view_lists_every_claim_and_markdown_needs_it():
    view = run_tool_main(reproduce, '--claims').stdout
    for experiment, claim in CLAIMS:
        assert f'{claim["id"]}  [{experiment["paper"]}, {claim["where"]}]  experiment ' \
            f'{experiment["id"]}\n' in view
    assert 'released weights checked by weightformer-t-released, weightformer-s-released, ' \
        'weightformer-b-released' in view
    alone = run_tool_main(reproduce, '--markdown')
    assert alone.returncode == 2 and '--markdown goes with --claims' in alone.stderr
