import os.path as osp

import pytest
import torch

from mmlinear.cli.benchmark import GridSettings, launch_case, run_case, run_grid

REPO_ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
DEMO_UPERNET = osp.join(REPO_ROOT, 'configs', 'demo', 'upernet_infvit-demo-linear_shapes-ade.py')


def measured_a_peak(result):
    """Whether a case run in this process measured its peak. Here it can be 0: the test
    process's heap, grown by earlier tests, may hold the case without a new resident page,
    so that a positive peak is checked in a fresh worker
    (test_a_fresh_worker_measures_the_peak_of_its_case)."""
    return result['peak_mem_mb'] is not None and result['peak_mem_mb'] >= 0 and \
        result['mem_method'] is not None


def test_run_case_times_forward_and_backward():
    case = dict(
        model='infvit-test-linear',
        resolution=(48, 80),
        batch=2,
        dtype='bf16',
        mode='train',
        device='cpu',
        warmup=1,
        repeats=2,
        threads=torch.get_num_threads())
    result = run_case(case)
    assert result['status'] == 'ok'
    assert len(result['times_ms']) == 2 and all(t > 0 for t in result['times_ms'])
    assert min(result['times_ms']) <= result['median_ms'] <= max(result['times_ms'])
    assert measured_a_peak(result)
    assert result['params'] > 0


def test_a_worker_that_fails_otherwise_than_by_memory_is_an_error():
    case = dict(
        model='no-such-model',
        resolution=32,
        batch=1,
        dtype='fp32',
        mode='forward',
        device='cpu',
        warmup=0,
        repeats=1,
        threads=1)
    # A hang guard only: the worker fails while it builds the model, long before.
    with pytest.raises(RuntimeError, match='benchmark worker failed for') as error:
        launch_case(case, timeout=3600)
    assert "unknown model 'no-such-model'" in str(error.value)  # the worker's own error


def streamed_case(**options):
    """A one-run streamed case of WeightFormer-test on a 96 x 64 image, bands of 2 rows."""
    return dict(
        dict(
            model='weightformer-test',
            resolution=(96, 64),
            batch=1,
            dtype='fp32',
            mode='streamed',
            device='cpu',
            warmup=0,
            repeats=1,
            threads=torch.get_num_threads(),
            band_rows=2), **options)


@pytest.mark.parametrize('stream_input', ['tensor', 'file'])
def test_run_case_streams_and_predicts_its_peak(stream_input):
    """Streamed cases run forward_streamed on the image (a tensor, or a raw file read by rows)
    and report the memory model's prediction of their peak beside the measured one."""
    result = run_case(streamed_case(stream_input=stream_input))
    assert result['status'] == 'ok' and measured_a_peak(result)
    # 1 x 3 x 96 x 64 float32 is 72 KiB more in memory when the image is a tensor.
    tensor_mb = 3 * 96 * 64 * 4 / 2**20
    expected_floor = tensor_mb if stream_input == 'tensor' else 0.
    assert result['predicted_mem_mb'] > expected_floor
    assert result['band_rows'] == 2  # the band height it ran with


@pytest.mark.parametrize('case', ['streamed-backbone', 'streamed-segmentor'])
def test_a_fresh_worker_measures_the_peak_of_its_case(case):
    """In a fresh process, as the benchmark runs every case, the activations of a case raise
    the resident peak above the built model."""
    if case == 'streamed-backbone':
        options = streamed_case(stream_input='file')
    else:
        options = segmentor_case(mode='streamed', band_rows=2, stream_input='tensor')
    result = launch_case(options, timeout=3600)
    assert result['status'] == 'ok' and result['peak_mem_mb'] > 0


def test_a_streamed_case_under_bf16_is_predicted_under_its_autocast():
    """The band's linear-layer outputs are counted in bf16 when the case runs under bf16
    autocast, so the same band is predicted smaller than in fp32."""
    fp32, bf16 = (run_case(streamed_case(dtype=dtype)) for dtype in ('fp32', 'bf16'))
    assert fp32['status'] == bf16['status'] == 'ok'
    assert 0 < bf16['predicted_mem_mb'] < fp32['predicted_mem_mb']


def segmentor_case(**options):
    """A one-run case of the demo UperNet on a 96 x 64 image."""
    return dict(
        dict(
            model=DEMO_UPERNET,
            resolution=(96, 64),
            batch=1,
            dtype='fp32',
            device='cpu',
            warmup=0,
            repeats=1,
            threads=torch.get_num_threads()), **options)


@pytest.mark.parametrize('mode, stream_input', [('forward', 'tensor'), ('streamed', 'tensor'),
                                                ('streamed', 'file')])
def test_a_segmentor_config_measures_the_whole_model(mode, stream_input):
    """A segmentor's config runs mmseg's whole-image inference ('forward') or
    segment_large_image ('streamed', with its predicted peak) on one generated image."""
    result = run_case(segmentor_case(mode=mode, band_rows=2, stream_input=stream_input))
    assert result['status'] == 'ok' and measured_a_peak(result) and result['params'] > 0
    assert (result['predicted_mem_mb'] > 0) if mode == 'streamed' else \
        result['predicted_mem_mb'] is None


def test_a_segmentor_is_not_trained_by_the_benchmark():
    with pytest.raises(ValueError, match="measured in modes 'forward'"):
        run_case(segmentor_case(mode='train'))


def test_a_resolution_the_model_refuses_is_recorded_and_ends_its_series(tmp_path):
    """A Linformer built for 32 px (5 tokens) runs at 32 px and refuses the 17 tokens of
    64 px: the case is 'refused' with the model's reason, not a crash of the benchmark (nor of
    the FLOP count that plans it), and the larger resolutions are skipped."""
    config = tmp_path / 'infvit-test-linformer-32px.py'
    config.write_text("model = dict(backbone=dict(type='mmlinear.InfViT', arch='test', "
                      "attn_type='linformer', img_size=32))\n")
    settings = GridSettings(
        models=[str(config)],
        resolutions=[32, 64, 128],
        warmup=0,
        repeats=1,
        time_budget=36000,
        threads=torch.get_num_threads())
    # The worker in this process: a fresh one per case only adds seconds of imports.
    rows = run_grid(settings, launch=lambda case, timeout: run_case(case))
    assert [r['status'] for r in rows] == ['ok', 'refused', 'skipped']
    assert 'Linformer projects at most max_tokens=5 tokens' in rows[1]['note']
    assert rows[1]['median_ms'] is None
    assert rows[2]['note'] == 'a smaller resolution ended with refused'
