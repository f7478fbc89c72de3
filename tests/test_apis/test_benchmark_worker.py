import pytest
import torch

from mmlinear.apis.benchmark import launch_case, run_case


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
    assert result['peak_mem_mb'] > 0
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
