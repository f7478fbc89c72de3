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
    assert table[0].startswith('| model | resolution | patch tokens |')
    assert len(table) == 2 + 4
    assert table[5].startswith('| weightformer-t | 224 | 196 | 6.88 | 2.25 | 1.12 |')
    assert table[5].endswith('1.124 GMACs (ref. code) |')
    assert table[2].endswith('| - |')  # no reference number for the test preset
    assert (tmp_path / 'flops.json').exists()
    with pytest.raises(SystemExit, match='unknown model'):
        get_flops.main(['--models', 'nope'])
