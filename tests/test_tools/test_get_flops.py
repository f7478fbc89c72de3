import functools
import json
import os.path as osp
import shlex
import tempfile
from typing import List, Tuple

import pytest
from analysis_tools_loader import load_tool

import mmlinear.cli.reproduce as registry

get_flops = load_tool('get_flops')

#: Claims whose demo figure is a table of a registry command of get_flops.py: the claim and
#: the command's --out.
RECORDED_COUNTS = {
    'veca-attention-flops-resolution': 'work_dirs/reproduce/veca-interactions/block_flops.md',
    'infvit-depth-efficiency': 'work_dirs/reproduce/infsa-energy/depth_flops.md',
}


@functools.lru_cache(maxsize=None)
def registry_run(claim_id: str,
                 smallest_only: bool = False) -> Tuple[dict, dict, List[str], List[dict]]:
    """Run the registry's demo command of get_flops.py that makes the claim's figure, into a
    temporary folder instead (with ``smallest_only``, its first model at its first resolution
    alone): the claim's experiment and the claim, the tables the command wrote and its rows."""
    experiment, claim = next(
        (e, c) for e, c in registry.all_claims(registry.load_experiments()) if c['id'] == claim_id)
    command = next(c for c in experiment['demo']
                   if registry.work_folder(c) == RECORDED_COUNTS[claim_id])
    argv = shlex.split(command)[2:]
    written = osp.join(tempfile.mkdtemp(), 'flops.md')
    argv[argv.index('--out') + 1] = written
    if smallest_only:
        for option in ('--models', '--resolutions'):
            first = argv.index(option) + 1
            last = next((i for i in range(first, len(argv)) if argv[i].startswith('--')), len(argv))
            del argv[first + 1:last]
    get_flops.main(argv)
    with open(written) as f:
        tables = f.read().split('\n\n')
    with open(osp.splitext(written)[0] + '.json') as f:
        return experiment, claim, tables, json.load(f)


def test_cli_writes_the_markdown_table_beside_the_references(tmp_path, capsys):
    out = tmp_path / 'flops.md'
    get_flops.main([
        '--models', 'weightformer-test', 'weightformer-t', '--resolutions', '64', '224', '--out',
        str(out)
    ])
    table = out.read_text().splitlines()
    assert table[0].startswith('| model | resolution | cores K | patch tokens |')
    assert len(table) == 2 + 4
    # WeightFormer scores no query-key pair: 100 % fewer than a dense ViT.
    assert table[5].startswith(
        '| weightformer-t | 224 | - | 196 | 6.88 | 2.25 | 1.12 | 0 | 100.0 % |')
    assert table[5].endswith('1.124 GMACs (ref. code) |')
    assert table[2].endswith('| - |')  # no reference number for the test preset
    rows = json.loads((tmp_path / 'flops.json').read_text())
    assert rows[3]['interactions_per_layer'] == [0] * 17
    assert rows[3]['dense_vit_interactions'] == 197**2
    with pytest.raises(SystemExit, match='unknown model'):
        get_flops.main(['--models', 'nope'])


def test_veca_budgets_give_interactions_and_flops_per_budget(tmp_path):
    out = tmp_path / 'veca.md'
    get_flops.main([
        '--models', 'veca-small', 'deit-t-sdpa', '--resolutions', '512', '--active-cores', '8',
        '64', '--out',
        str(out)
    ])
    rows = json.loads((tmp_path / 'veca.json').read_text())
    assert [(r['model'], r['active_cores']) for r in rows] == [('veca-small', 8),
                                                               ('veca-small', 64),
                                                               ('deit-t-sdpa', None)]
    # 2 N K + K^2 per layer at N = 1024; the dense ViT (DeiT-T, a class token) scores 1025^2.
    assert rows[0]['interactions_per_layer'] == [2 * 1024 * 8 + 8**2] * 12
    assert rows[1]['interactions_per_layer'] == [135_168] * 12
    assert rows[2]['interactions_per_layer'] == [1025**2] * 12
    assert rows[0]['flops'] < rows[1]['flops']
    table = out.read_text().splitlines()
    assert '| 135,168 | 87.1 % |' in table[3]
    # The reference FLOPs were counted at the default budget (64) only.
    assert table[3].endswith('46.81 GFLOPs (ref. code) |') and table[2].endswith('| - |')
    assert '| 1,050,625 | 0.0 % |' in table[4]


def test_block_table_gives_one_block_and_its_attention(tmp_path):
    out = tmp_path / 'blocks.md'
    get_flops.main([
        '--models', 'vit-test-sdpa', 'weightformer-test', '--resolutions', '64', '--block', '1',
        '--out',
        str(out)
    ])
    tables = out.read_text().split('\n\n')
    assert len(tables) == 2 and tables[0].startswith('| model | resolution | cores K |')
    # mmpretrain's ViT, width 32, MLP 64, 16 patches and a class token: 315,520 FLOPs, of
    # which its attention 176,256 (see tests/test_apis/test_flops.py).
    assert tables[1].splitlines()[0] == ('| model | resolution | cores K | tokens (patches + '
                                         'extra) | block 1 GFLOPs | its attention GFLOPs |')
    assert tables[1].splitlines()[2] == '| vit-test-sdpa | 64 | - | 17 | 0.000 | 0.000 |'
    assert tables[1].splitlines()[3].endswith('| - |')  # WeightFormer's blocks have none
    rows = json.loads((tmp_path / 'blocks.json').read_text())
    assert (rows[0]['block'], rows[0]['block_tokens'], rows[0]['block_flops'],
            rows[0]['block_attention_flops']) == (1, 17, 315_520, 176_256)
    assert rows[1]['block_attention_flops'] is None
    with pytest.raises(SystemExit, match='block 2 of VisionTransformer: it has 2 blocks'):
        get_flops.main(['--models', 'vit-test-sdpa', '--resolutions', '64', '--block', '2'])


@pytest.mark.parametrize('argv,message', [
    (['--models', 'veca-small', '--active-cores', '12'], r'8, 16, 24, 32, 40, 48, 56, 64'),
    (['--models', 'weightformer-test', '--active-cores', '8'
      ], r'--active-cores applies to backbones with a core budget \(VECA\)'),
])
def test_bad_budgets_are_refused_with_the_allowed_values(argv, message):
    with pytest.raises(SystemExit, match=message):
        get_flops.main(argv + ['--resolutions', '64'])


def test_a_resolution_below_one_patch_is_refused():
    with pytest.raises(SystemExit, match='--resolutions must be >= 16'):
        get_flops.main(['--resolutions', '8'])


def table_rows(table: str) -> List[str]:
    """The rows of a markdown table, header and rule left out, spaces normalised."""
    return [' '.join(line.split()) for line in table.splitlines()[2:] if line.startswith('|')]


@pytest.mark.parametrize('claim_id', RECORDED_COUNTS)
def test_the_recorded_counts_hold_at_the_commands_first_model_and_resolution(claim_id):
    """Every row the claim's command writes for its first model at its first resolution
    stands in the recorded
    table (the table of the command's whose header the section shows) as it is written
    today; the whole command is the slow test below."""
    experiment, claim, tables, _ = registry_run(claim_id, smallest_only=True)
    section = ' '.join(
        registry.section_text(experiment['docs'], claim['recorded']['section']).split())
    recorded = [t for t in tables if ' '.join(t.strip().splitlines()[0].split()) in section]
    rows = [row for table in recorded for row in table_rows(table)]
    assert len(recorded) == 1 and rows and all(row in section for row in rows)


@pytest.mark.slow
@pytest.mark.parametrize('claim_id', RECORDED_COUNTS)
def test_the_recorded_counts_are_those_the_registry_command_prints(claim_id):
    """The table of the claim's demo figure, whole, as its command writes it today."""
    experiment, claim, tables, _ = registry_run(claim_id)
    recorded = claim['recorded']
    table = next(t for t in tables if recorded['shows'] in t)
    section = registry.section_text(experiment['docs'], recorded['section'])
    assert ' '.join(table.split()) in section


@pytest.mark.slow
def test_veca_base_attention_costs_less_than_softmax_from_384_px_and_the_block_from_512():
    """What configs/veca/README.md says of the block table."""
    *_, rows = registry_run('veca-attention-flops-resolution')
    veca = {r['resolution']: r for r in rows if r['model'] == 'veca-base'}
    vit = {r['resolution']: r for r in rows if r['model'] == 'vit-b-sdpa'}
    cheaper_attention = [
        r for r in veca if veca[r]['block_attention_flops'] < vit[r]['block_attention_flops']
    ]
    cheaper_block = [r for r in veca if veca[r]['block_flops'] < vit[r]['block_flops']]
    assert cheaper_attention == [384, 512, 768, 1024]
    assert cheaper_block == [512, 768, 1024]
