import json
import math

import pytest

from mmlinear.cli.benchmark import (fit_exponent, fit_line, format_exponent, machine_info,
                                    markdown_tables, summarize_fits, write_outputs)
from mmlinear.cli.benchmark.report import KERNEL_ISA_VARIABLES, kernel_isa, streamed_table


def test_fit_exponent_recovers_power_laws_over_the_largest_points():
    tokens = [196, 1024, 4096, 16384]
    assert fit_exponent(tokens, [3 * n for n in tokens])[0] == pytest.approx(1.0)
    assert fit_exponent(tokens, [5e-3 * n**2 for n in tokens])[0] == pytest.approx(2.0)
    # Linear plus quadratic cost: the slope climbs towards 2 as the largest points are used.
    mixed = [1e4 * n + n**2 for n in tokens]
    slope_all, used_all = fit_exponent(tokens, mixed, last=4)
    slope_top, used_top = fit_exponent(tokens, mixed, last=2)
    assert used_all == tokens and used_top == tokens[-2:]
    assert 1 < slope_all < slope_top < 2
    # Failed cases (None) are left out; one point cannot give a slope.
    assert math.isnan(fit_exponent([196, 1024], [1.0, None])[0])
    with pytest.raises(ValueError, match='last must be >= 2'):
        fit_exponent(tokens, mixed, last=1)
    assert format_exponent(float('nan')) == 'n/a (one point)'
    assert format_exponent(1.004) == '1.00'


def result_rows():
    """A linear series (time and memory double with the tokens) and a failed one."""
    rows = []
    for resolution, tokens, ms in ((32, 4, 10.), (64, 16, 40.), (128, 64, 160.)):
        rows.append(
            dict(
                model='lin',
                resolution=resolution,
                tokens=tokens,
                batch=1,
                dtype='fp32',
                mode='forward',
                device='cpu',
                status='ok',
                median_ms=ms,
                throughput_img_s=1e3 / ms,
                peak_mem_mb=ms / 10,
                warmup=0,
                repeats=1,
                note=''))
        rows.append(
            dict(
                rows[-1],
                model='big',
                status='OOM' if resolution == 32 else 'skipped',
                median_ms=None,
                throughput_img_s=None,
                peak_mem_mb=None,
                note='' if resolution == 32 else 'a smaller resolution ended with OOM'))
    return rows


def test_fits_and_tables_per_series():
    rows = result_rows()
    fits = summarize_fits(rows, last=3)
    assert [f['model'] for f in fits] == ['big', 'lin']
    assert math.isnan(fits[0]['time_exponent']) and fits[0]['fit_tokens'] == []
    assert fits[1]['time_exponent'] == pytest.approx(1.0)
    assert fits[1]['memory_exponent'] == pytest.approx(1.0)
    assert fits[1]['fit_tokens'] == [4, 16, 64]
    assert fit_line(fits[1]) == ('lin b1 fp32 forward: time exponent 1.00, memory exponent 1.00 '
                                 '(fitted over N = [4, 16, 64])')
    table = markdown_tables(rows, fits).splitlines()
    assert table[0] == ('| model | dtype | mode | batch | 32px (4 tok) | 64px (16 tok) | '
                        '128px (64 tok) |')
    assert table[2] == ('| big | fp32 | forward | 1 | OOM | skipped (a smaller resolution '
                        'ended with OOM) | skipped (a smaller resolution ended with OOM) |')
    assert table[3] == ('| lin | fp32 | forward | 1 | 10 ms / 1 MB | 40 ms / 4 MB | '
                        '160 ms / 16 MB |')
    assert table[7].startswith('| big | fp32 | forward | 1 | n/a (one point) |')
    assert table[8] == '| lin | fp32 | forward | 1 | 1.00 | 1.00 | 4, 16, 64 |'


def test_the_kernels_instruction_set_names_the_caps_in_effect(monkeypatch):
    """A figure measured with the kernels capped below the CPU's own (to run those of a lesser
    CPU) says so: the caps set are named beside ATen's capability, and none when unset."""
    import torch
    for name in KERNEL_ISA_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    capability = torch.backends.cpu.get_cpu_capability()
    assert kernel_isa() == capability == machine_info('cpu')['kernel_isa']
    monkeypatch.setenv('ONEDNN_MAX_CPU_ISA', 'AVX2')
    monkeypatch.setenv('MKL_ENABLE_INSTRUCTIONS', 'AVX2')
    assert kernel_isa() == (f'{capability} (ONEDNN_MAX_CPU_ISA=AVX2, '
                            'MKL_ENABLE_INSTRUCTIONS=AVX2)')


def test_outputs_are_written(tmp_path):
    rows = result_rows()
    fits = summarize_fits(rows, last=3)
    info = machine_info('cpu')
    assert info['cpu_count'] >= 1 and len(info['load_average']) == 3 and 'gpu' not in info
    settings = dict(device='cpu', threads=1, fit_last=3, out=str(tmp_path))
    write_outputs(str(tmp_path), rows, fits, settings, info)
    with open(tmp_path / 'results.json') as f:
        written = json.load(f)
    assert written['settings'] == settings and len(written['results']) == 6
    assert (tmp_path / 'results.csv').read_text().splitlines()[0] == (
        'model,resolution,tokens,batch,dtype,mode,device,status,median_ms,throughput_img_s,'
        'peak_mem_mb,predicted_mem_mb,band_rows,energy_j_per_img,energy_source,warmup,repeats,'
        'note')
    assert (tmp_path / 'results.md').read_text() == markdown_tables(rows, fits)
    assert (tmp_path / 'scaling.png').read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_streamed_rows_are_set_beside_the_whole_image_ones():
    common = dict(model='m', dtype='fp32', batch=1, resolution=4096, status='ok', note='')
    rows = [
        dict(common, mode='forward', median_ms=2000., peak_mem_mb=8000.),
        dict(
            common,
            mode='streamed',
            median_ms=2200.,
            peak_mem_mb=2000.,
            predicted_mem_mb=2200.,
            band_rows=18),
    ]
    lines = streamed_table(rows)
    assert lines[-1] == (
        '| m | fp32 | 1 | 4096px | 18 | 2.0 s / 8,000 MB | 2.2 s / 2,000 MB | 1.10 | '
        '0.25 | 2,200 MB | 1.10 |')
    assert streamed_table(rows[:1]) == []
