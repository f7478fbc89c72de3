"""The manifest's records, its atomic rewrite, the merge of the ranks' manifests, the test
of complete outputs (a summary that parses, names the image and lists files that exist) and
that of a run stopped by a signal."""
import json
import os

import pytest

from mmlinear.apis.run_manifest import (completed_outputs, merge_rank_manifests, new_record,
                                        rank_manifest, read_manifest, stopped_on_signal,
                                        write_manifest)


def test_a_record_refuses_an_unknown_status_or_field():
    assert new_record('a.tif', 'out/a', 'done', seconds=1.0)['seconds'] == 1.0
    with pytest.raises(ValueError, match="status must be one of .*'done'"):
        new_record('a.tif', 'out/a', 'finished')
    with pytest.raises(ValueError, match="unknown record fields \\['second'\\]"):
        new_record('a.tif', 'out/a', 'done', second=1.0)


def test_rank_manifests_merge_in_the_order_of_the_inputs(tmp_path):
    out = str(tmp_path)
    write_manifest(rank_manifest(out, 1), [new_record('b', 'out/b', 'failed', error='E', rank=1)])
    write_manifest(rank_manifest(out, 0), [new_record('c', 'out/c', 'done', rank=0)])
    merged = merge_rank_manifests(out, ['a', 'b', 'c'], {'a': new_record('a', 'out/a', 'skipped')})
    assert [(r['input'], r['status']) for r in merged] == [('a', 'skipped'), ('b', 'failed'),
                                                           ('c', 'done')]
    assert read_manifest(str(tmp_path / 'manifest.jsonl')) == merged
    assert sorted(p.name for p in tmp_path.iterdir()) == ['manifest.jsonl']


def test_a_run_stopped_on_a_signal_is_told_from_one_killed_or_complete(tmp_path):
    out = str(tmp_path)
    signal_time = 1000.0
    pending = [new_record('a', 'out/a', 'done', rank=0), new_record('b', 'out/b', 'pending')]

    def manifest_written(records, at):
        write_manifest(str(tmp_path / 'manifest.jsonl'), records)
        os.utime(tmp_path / 'manifest.jsonl', (at, at))

    assert not stopped_on_signal(out, signal_time)  # no manifest
    manifest_written(pending, signal_time + 1)
    assert stopped_on_signal(out, signal_time)  # merged after the signal, images pending
    manifest_written(pending, signal_time - 1)
    assert not stopped_on_signal(out, signal_time)  # written before the signal only
    manifest_written(pending[:1], signal_time + 1)
    assert not stopped_on_signal(out, signal_time)  # nothing pending: the run completed
    manifest_written(pending, signal_time + 1)
    write_manifest(rank_manifest(out, 1), [new_record('c', 'out/c', 'done', rank=1)])
    assert not stopped_on_signal(out, signal_time)  # a rank was killed before the merge


@pytest.fixture
def finished(tmp_path):
    image = tmp_path / 'scene.tif'
    image.write_bytes(b'')
    planned = [str(tmp_path / 'out' / 'class_map.tif'), str(tmp_path / 'out' / 'summary.json')]
    (tmp_path / 'out').mkdir()
    (tmp_path / 'out' / 'class_map.tif').write_bytes(b'map')
    (tmp_path / 'out' / 'summary.json').write_text(
        json.dumps(dict(image=str(image), outputs=planned)))
    return str(image), planned


def test_complete_outputs_are_recognised(finished):
    image, planned = finished
    assert completed_outputs(image, planned) == planned


def test_a_missing_output_or_summary_or_another_image_is_not_complete(finished, tmp_path):
    image, planned = finished
    assert completed_outputs(str(tmp_path / 'other.tif'), planned) is None
    assert completed_outputs(image, planned[:1] + ['x/probabilities.tif'] + planned[1:]) is None
    (tmp_path / 'out' / 'class_map.tif').unlink()
    assert completed_outputs(image, planned) is None
    (tmp_path / 'out' / 'summary.json').write_text('{"image": "torn')
    assert completed_outputs(image, planned) is None
