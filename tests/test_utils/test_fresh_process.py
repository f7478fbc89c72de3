"""mmlinear.utils.fresh_process: the launcher every benchmark measures in a fresh process with."""
import pytest

from mmlinear.utils.fresh_process import WorkerFailed, run_in_fresh_process


def test_a_fresh_process_returns_the_result_it_prints_with_this_mmlinear_and_env():
    code = (
        'import json, os, sys, mmlinear; from mmlinear.utils.fresh_process import print_result; '
        'print("noise"); print_result(dict(payload=json.loads(sys.argv[1]), '
        'mmlinear=mmlinear.__file__, env=os.environ["MMLINEAR_TEST_VAR"])); print("after")')
    result = run_in_fresh_process(['-c', code], {'n': 3}, env={'MMLINEAR_TEST_VAR': 'set'})
    import mmlinear
    assert result == dict(payload={'n': 3}, mmlinear=mmlinear.__file__, env='set')


def test_a_fresh_process_without_a_result_raises_with_its_status_and_stderr():
    code = 'import sys; sys.stderr.write("went wrong\\n"); sys.exit(3)'
    with pytest.raises(WorkerFailed, match='status 3') as failure:
        run_in_fresh_process(['-c', code], {})
    assert failure.value.returncode == 3 and 'went wrong' in failure.value.stderr
