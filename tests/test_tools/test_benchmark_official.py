"""tools/analysis_tools/benchmark_official.py: the parts that need no copy of the official
code (argument checks, the error for a folder without it, the table)."""
import pytest
from analysis_tools_loader import load_tool, run_tool_main

TOOL = load_tool('benchmark_official')


@pytest.mark.parametrize(
    'args, message',
    [([], 'give --weightformer-repo, --veca-repo or both'),
     (['--veca-repo', '.', '--dtypes', 'float16'], "--dtypes must be among ['float32', "
      "'bfloat16'], got ['float16']"),
     (['--veca-repo', '.', '--resolutions', '900'], 'multiples of 16 (the patch size), got [900]'),
     (['--veca-repo', '.', '--repeats', '0'], '--repeats must be at least 1, got 0')])
def test_invalid_options_are_refused_with_their_allowed_values(args, message):
    result = run_tool_main(TOOL, *args)
    assert result.returncode == 2
    assert message in result.stderr


@pytest.mark.parametrize('option, missing', [('--weightformer-repo', 'model/wfm.py'),
                                             ('--veca-repo', 'veca/model.py')])
def test_a_folder_without_the_official_code_is_a_clear_error(tmp_path, option, missing):
    result = run_tool_main(TOOL, option, tmp_path, '--resolutions', '32')
    assert result.returncode == 1
    assert f'{tmp_path} does not hold the official' in result.stderr
    assert f'{missing} not found in it' in result.stderr


def test_the_table_gives_both_latencies_and_their_ratio():
    row = TOOL.Row(
        'VECA-S',
        896,
        'bfloat16',
        official_ms=200.,
        ours_ms=150.,
        paired_ratio=0.74,
        ours_diff=0.03,
        official_diff=0.04)
    header, rule, line = TOOL.format_table([row]).splitlines()
    assert header.count('|') == rule.count('|') == line.count('|')
    assert line == '| VECA-S | 896 | bfloat16 | 200.0 | 150.0 | 0.75x | 0.74x | 3.0e-02 | 4.0e-02 |'


def test_each_dtype_is_compared_with_float32_of_the_same_model_and_size():
    rows = [
        TOOL.Row('VECA-S', 896, 'float32', 300., 200., 0.67, 0., 0.),
        TOOL.Row('VECA-S', 896, 'bfloat16', 150., 90., 0.6, 0.03, 0.03),
        TOOL.Row('VECA-S', 2048, 'bfloat16', 900., 800., 0.9, 0.03, 0.03),
    ]
    assert TOOL.format_dtype_ratios(rows) == [
        'VECA-S 896 px: bfloat16 / float32 = 0.45x (mmlinear), 0.50x (official)'
    ]
