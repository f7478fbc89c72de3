"""run_batch: an exception fails its input alone, a complete input is skipped on a rerun, and
the inputs are shared between ranks by pixels."""
import json
import os
import os.path as osp

import pytest

from mmlinear.apis.batch_run import run_batch, share_by_pixels


def test_sharing_by_pixels_puts_each_input_on_one_rank_and_balances():
    pixels = [100, 1, 1, 1, 60, 40]
    shares = share_by_pixels(pixels, 2)
    assert sorted(i for share in shares for i in share) == list(range(6))
    loads = [sum(pixels[i] for i in share) for share in shares]
    assert loads == [102, 101]  # 100+1+1 and 60+40+1
    assert share_by_pixels([5], 3) == [[0], [], []]


def write_outputs(image, folder):
    """A stand-in for a model: copies the image's bytes, fails on an image saying 'bad'."""
    content = open(image).read()
    if content == 'bad':
        raise ValueError(f'{image} is bad')
    os.makedirs(folder, exist_ok=True)
    outputs = [osp.join(folder, 'copy.txt'), osp.join(folder, 'summary.json')]
    with open(outputs[0], 'w') as f:
        f.write(content)
    summary = dict(
        image=image, outputs=outputs, seconds=0.0, peak_memory_gb=0.1, predicted_peak_gb=0.2)
    with open(outputs[1], 'w') as f:
        json.dump(summary, f)
    return summary


def planned(folder):
    return [osp.join(folder, 'copy.txt'), osp.join(folder, 'summary.json')]


@pytest.fixture
def images(tmp_path):
    paths = []
    for name, content in (('a', 'one'), ('b', 'bad'), ('c', 'three')):
        paths.append(str(tmp_path / f'{name}.txt'))
        with open(paths[-1], 'w') as f:
            f.write(content)
    return paths


def test_a_failure_is_recorded_and_a_rerun_skips_the_complete(images, tmp_path):
    out = str(tmp_path / 'out')
    lines = []
    result = run_batch(images, out, write_outputs, planned, printer=lines.append)
    assert result.exit_code == 1 and result.failed == 1 and result.total == 3
    assert [r['status'] for r in result.records] == ['done', 'failed', 'done']
    assert result.failures[0]['error'] == f'ValueError: {images[1]} is bad'
    assert lines[0] == '3 inputs: 0 complete from an earlier run (skipped), 3 to do'
    assert lines[2].startswith('[2/3] ') and 'FAILED (ValueError' in lines[2]
    with open(images[1], 'w') as f:
        f.write('two')
    result = run_batch(images, out, write_outputs, planned, printer=lines.append)
    assert result.exit_code == 0
    assert [r['status'] for r in result.records] == ['skipped', 'done', 'skipped']
    manifest = [json.loads(line) for line in open(osp.join(out, 'manifest.jsonl'))]
    assert manifest == result.records
    result = run_batch(images, out, write_outputs, planned, force=True, printer=lines.append)
    assert [r['status'] for r in result.records] == ['done'] * 3


def test_rank_manifests_a_killed_run_left_are_cleared(images, tmp_path):
    out = tmp_path / 'out'
    out.mkdir()
    (out / 'manifest.rank3.jsonl').write_text('{"input": "stale"}\n')
    run_batch(images[:1], str(out), write_outputs, planned, printer=lambda line: None)
    assert sorted(p.name for p in out.iterdir()) == ['a', 'manifest.jsonl']
