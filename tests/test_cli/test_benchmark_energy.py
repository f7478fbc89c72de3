"""Energy per image from the hardware's counters: RAPL's powercap files, NVML, or a reason."""
import pytest
import torch

from mmlinear.cli.benchmark import run_case
from mmlinear.cli.benchmark.energy import EnergyMeter, energy_meter, nvml_meter, rapl_meter
from mmlinear.cli.benchmark.report import energy_lines


def write_zone(root, zone, name, energy_uj, max_range_uj=1000):
    path = root / zone
    path.mkdir(parents=True, exist_ok=True)
    (path / 'name').write_text(name + '\n')
    (path / 'energy_uj').write_text(f'{energy_uj}\n')
    (path / 'max_energy_range_uj').write_text(f'{max_range_uj}\n')


def test_rapl_sums_the_package_zones_across_a_wrap_and_leaves_their_parts_out(tmp_path):
    """Two packages (one wraps at its 1000 uJ range) and a core zone inside package 0,
    which is part of it and must not be counted again."""
    write_zone(tmp_path, 'intel-rapl:0', 'package-0', 900)
    write_zone(tmp_path, 'intel-rapl:1', 'package-1', 100)
    write_zone(tmp_path, 'intel-rapl:0:0', 'core', 50)
    meter, source = rapl_meter(str(tmp_path))
    assert source == 'RAPL package-0 + package-1 (whole packages)'
    meter.start()
    (tmp_path / 'intel-rapl:0' / 'energy_uj').write_text('300\n')  # 900 -> 1000 = 0 -> 300
    (tmp_path / 'intel-rapl:1' / 'energy_uj').write_text('600\n')
    (tmp_path / 'intel-rapl:0:0' / 'energy_uj').write_text('999\n')
    assert meter.stop() == pytest.approx((400 + 500) * 1e-6)


def test_a_counter_read_while_measuring_catches_every_wrap():
    """Read often enough, a counter that wraps twice between start and stop is counted in
    full (read only at both ends it would look like one small step)."""
    readings = iter([[900], [100], [950], [200]])  # range 1000: +200, +850, +250
    meter = EnergyMeter(lambda: next(readings), [1000], 1e-3, 'scripted')
    meter.start()
    meter.sample()
    meter.sample()
    assert meter.stop() == pytest.approx(1.3)


def test_without_a_counter_the_reason_is_given(tmp_path):
    assert rapl_meter(str(tmp_path /
                          'absent')) == (None, f'no RAPL package zone under {tmp_path / "absent"}')
    (tmp_path / 'intel-rapl:0' / 'energy_uj').mkdir(parents=True)  # unreadable as a number
    meter, reason = rapl_meter(str(tmp_path))
    assert meter is None and 'cannot be read' in reason
    assert nvml_meter(library='libnvidia-ml-not-here.so.1') == (
        None, 'NVML (libnvidia-ml-not-here.so.1) is not installed')


def test_a_benchmark_case_reports_energy_exactly_where_this_machine_can_measure_it():
    meter, source = energy_meter('cpu')
    case = dict(
        model='weightformer-test',
        resolution=32,
        batch=2,
        dtype='fp32',
        mode='forward',
        device='cpu',
        warmup=0,
        repeats=2,
        threads=torch.get_num_threads())
    result = run_case(case)
    assert result['status'] == 'ok' and result['energy_source'] == source
    if meter is None:
        assert 'energy_j_per_img' not in result
    else:
        assert result['energy_j_per_img'] >= 0


def test_the_report_gives_joules_per_image_or_why_not():
    common = dict(model='m', dtype='fp32', mode='forward', batch=1, resolution=224)
    measured = [dict(common, energy_j_per_img=0.8712, energy_source='RAPL package-0')]
    assert energy_lines(
        measured)[-1] == '| m | fp32 | forward | 1 | 224px | 0.871 J | RAPL package-0 |'
    absent = [dict(common, energy_source='no RAPL package zone under /sys/class/powercap')]
    assert energy_lines(absent) == [
        '', 'Energy per image: not available (no RAPL package zone under /sys/class/powercap).'
    ]
    assert energy_lines([]) == []
