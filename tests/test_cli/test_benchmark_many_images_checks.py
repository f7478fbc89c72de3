"""The many-image benchmark's comparisons: class maps byte for byte, detections to 1e-4, a
missing output named; and the kill after a given number of inputs."""
import json
import os
import sys

import pytest

from mmlinear.cli.benchmark.many_images import manifest_statuses, outputs_differ, run_killed_after


def detections(tmp_path, name, shift=0.0, score=0.9):
    folder = tmp_path / name
    folder.mkdir()
    annotation = dict(
        category_id=1,
        bbox=[10.0 + shift, 20.0, 5.0, 6.0],
        score=score,
        segmentation=dict(size=[64, 64], counts='abc'))
    (folder / 'detections.json').write_text(json.dumps(dict(annotations=[annotation])))
    return folder


def test_class_maps_must_be_byte_equal(tmp_path):
    a, b = tmp_path / 'a', tmp_path / 'b'
    a.mkdir(), b.mkdir()
    (a / 'class_map.tif').write_bytes(b'\x00\x01')
    assert outputs_differ(str(a), str(b)) == f'{b / "class_map.tif"} is missing'
    (b / 'class_map.tif').write_bytes(b'\x00\x01')
    assert outputs_differ(str(a), str(b)) is None
    (b / 'class_map.tif').write_bytes(b'\x00\x02')
    assert outputs_differ(str(a), str(b)) == 'class_map.tif differs'


def test_detections_agree_to_1e_4(tmp_path):
    reference = detections(tmp_path, 'reference')
    assert outputs_differ(str(reference), str(detections(tmp_path, 'close', 5e-4))) is None
    assert 'bbox' in outputs_differ(str(reference), str(detections(tmp_path, 'far', 5e-3)))
    assert 'score' in outputs_differ(str(reference), str(detections(tmp_path, 'score', score=0.8)))


def test_a_folder_without_outputs_is_a_difference(tmp_path):
    assert 'no output' in outputs_differ(str(tmp_path), str(tmp_path))


def test_the_run_is_killed_once_the_manifest_holds_enough_done(tmp_path):
    manifest = tmp_path / 'manifest.jsonl'
    # A stand-in run that rewrites its manifest atomically after each input, as the tool does,
    # then waits for a signal: it ends only if killed, however slow the machine is.
    partial = str(tmp_path / 'manifest.partial')
    script = (f'import json, os, signal\n'
              f'records = []\n'
              f'for i in range(5):\n'
              f'    records.append(dict(input=str(i), status="done"))\n'
              f'    open({partial!r}, "w").write("\\n".join(map(json.dumps, records)))\n'
              f'    os.replace({partial!r}, {str(manifest)!r})\n'
              f'signal.pause()\n')
    done = run_killed_after([sys.executable, '-c', script], dict(os.environ), str(tmp_path / 'log'),
                            str(manifest), 3)
    assert 3 <= len(done) <= 5
    # it returned, so it killed the run: the stand-in never ends by itself
    assert len(manifest_statuses(str(manifest))) <= 5


def test_a_run_that_ends_before_the_kill_is_an_error(tmp_path):
    with pytest.raises(RuntimeError, match='before the kill after 3'):
        run_killed_after([sys.executable, '-c', 'pass'], dict(os.environ), str(tmp_path / 'log'),
                         str(tmp_path / 'manifest.jsonl'), 3)
