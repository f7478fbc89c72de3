import json

import pytest
from analysis_tools_loader import load_tool

get_flops = load_tool('get_flops')


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
