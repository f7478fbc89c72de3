"""tools/inference/large_image.py on several images: a folder through one command gives each
good image the outputs of a one-image run and records the bad ones; a rerun after a kill does
the incomplete images only; --force redoes all; SIGTERM stops after the image in progress."""
import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import test_large_image as one_image
import tifffile
import torch
from analysis_tools_loader import run_tool_main
from conftest import REPO_ROOT

CONFIG = one_image.CONFIG
scene_channels, write_raster = one_image.scene_channels, one_image.write_raster
# The fixtures of the one-image tests: the tool, and the demo UperNet's random checkpoint.
tool, checkpoint = one_image.tool, one_image.checkpoint
SCRIPT = os.path.join(REPO_ROOT, 'tools', 'inference', 'large_image.py')
#: name -> (height, width) of the good images of the folder.
GOOD = {'a_small': (64, 64), 'b_wide': (48, 136), 'c_tall': (104, 56)}


@pytest.fixture
def folder(tmp_path):
    """Three good GeoTIFFs of different sizes, an OME-TIFF, a truncated GeoTIFF and one of 2
    channels."""
    images = tmp_path / 'images'
    images.mkdir()
    for seed, (name, (height, width)) in enumerate(GOOD.items()):
        write_raster(images / f'{name}.tif', scene_channels(height, width, seed=seed))
    # an OME-TIFF (no georeference), its folder named without the two suffixes
    tifffile.imwrite(
        images / 'f_slide.ome.tif',
        scene_channels(72, 80, seed=7),
        ome=True,
        metadata={'axes': 'CYX'})
    whole = open(write_raster(tmp_path / 'whole.tif', scene_channels(64, 64)), 'rb').read()
    (images / 'd_corrupt.tif').write_bytes(whole[:200])
    write_raster(images / 'e_two_bands.tif', scene_channels(64, 64, count=2))
    return images


def manifest(out):
    return [json.loads(line) for line in (out / 'manifest.jsonl').read_text().splitlines()]


def statuses(out):
    return {os.path.basename(r['input']): r['status'] for r in manifest(out)}


def test_a_folder_gives_each_good_image_its_one_image_outputs_and_records_the_bad(
        tool, checkpoint, folder, tmp_path):
    out = tmp_path / 'out'
    result = run_tool_main(tool, folder, CONFIG, checkpoint, '--out', out)
    assert result.returncode == 1
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith('2 of 6 inputs failed: ')
    assert 'd_corrupt.tif' in last_line and 'e_two_bands.tif' in last_line
    records = {os.path.basename(r['input']): r for r in manifest(out)}
    bad = ['d_corrupt.tif', 'e_two_bands.tif']
    assert list(records) == [f'{n}.tif' for n in GOOD] + bad + ['f_slide.ome.tif']
    assert 'takes images of 3 channels, the image has 2' in records['e_two_bands.tif']['error']
    assert records['d_corrupt.tif']['status'] == 'failed' and records['d_corrupt.tif']['error']
    # a progress line per image, with the count and the time left
    assert '[6/6] ' in result.stdout and 'ETA' in result.stdout
    for name, file in [(n, f'{n}.tif') for n in GOOD] + [('f_slide', 'f_slide.ome.tif')]:
        record = records[file]
        assert record['status'] == 'done' and record['error'] is None
        assert record['predicted_peak_gb'] > 0
        # the image's own peak, above what the process held before it (weights included)
        summary = json.loads((out / name / 'summary.json').read_text())
        assert 0 <= record['peak_memory_gb'] == summary['peak_memory_gb'] < summary['peak_rss_gb']
        single = tmp_path / f'single_{name}'
        assert run_tool_main(tool, folder / file, CONFIG, checkpoint, '--out',
                             single).returncode == 0
        assert (out / name / 'class_map.tif').read_bytes() == \
            (single / 'class_map.tif').read_bytes()
        assert record['outputs'] == [
            str(out / name / 'class_map.tif'),
            str(out / name / 'summary.json')
        ]
    # nothing is written for the failed images (no folder, or an empty one)
    assert not any((out / 'd_corrupt').glob('*')) and not any((out / 'e_two_bands').glob('*'))


def test_a_rerun_redoes_only_incomplete_images_and_force_redoes_all(tool, checkpoint, folder,
                                                                    tmp_path):
    out = tmp_path / 'out'
    pattern = ('--pattern', '[abc]_*.tif')
    assert run_tool_main(tool, folder, *pattern, CONFIG, checkpoint, '--out', out).returncode == 0
    finished = {name: (out / name / 'class_map.tif').read_bytes() for name in GOOD}
    # What a kill leaves: b's class map written but no summary; c's class map torn while it was
    # written under its temporary name, the summary of the earlier run still there.
    (out / 'b_wide' / 'summary.json').unlink()
    (out / 'c_tall' / 'class_map.tif').unlink()
    (out / 'c_tall' / 'class_map.partial.tif').write_bytes(b'torn')
    result = run_tool_main(tool, folder, *pattern, CONFIG, checkpoint, '--out', out)
    assert result.returncode == 0, result.stderr
    assert '3 inputs: 1 complete from an earlier run (skipped), 2 to do' in result.stdout
    assert statuses(out) == {'a_small.tif': 'skipped', 'b_wide.tif': 'done', 'c_tall.tif': 'done'}
    assert {name: (out / name / 'class_map.tif').read_bytes() for name in GOOD} == finished
    assert not (out / 'c_tall' / 'class_map.partial.tif').exists()
    result = run_tool_main(tool, folder, *pattern, CONFIG, checkpoint, '--out', out, '--force')
    assert result.returncode == 0
    assert set(statuses(out).values()) == {'done'}
    assert {name: (out / name / 'class_map.tif').read_bytes() for name in GOOD} == finished


def test_a_list_file_and_repeated_names_get_folders_of_their_own(tool, checkpoint, tmp_path):
    for sub, seed in (('north', 1), ('south', 2)):
        (tmp_path / sub).mkdir()
        write_raster(tmp_path / sub / 'scene.tif', scene_channels(64, 64, seed=seed))
    listing = tmp_path / 'inputs.txt'
    listing.write_text('# two scenes of the same name\nnorth/scene.tif\n\nsouth/scene.tif\n')
    out = tmp_path / 'out'
    result = run_tool_main(tool, listing, CONFIG, checkpoint, '--out', out)
    assert result.returncode == 0, result.stderr
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert len(folders) == 2 and all(f.startswith('scene-') for f in folders)
    maps = [(out / f / 'class_map.tif').read_bytes() for f in folders]
    assert maps[0] != maps[1]


def test_help_describes_the_tool_in_whole_sentences(tool):
    result = run_tool_main(tool, '--help')
    assert result.returncode == 0
    description = ' '.join(result.stdout.split('\n\n')[1].split())
    assert description == ('Segment or detect on large images whole, one or a folder of them: '
                           'raster files in, class-map GeoTIFFs or detections (COCO JSON, '
                           'GeoJSON) out.')


def test_options_of_a_run_of_several_images_are_refused_for_one(tool, checkpoint, tmp_path):
    image = write_raster(tmp_path / 'scene.tif', scene_channels(64, 64))
    result = run_tool_main(tool, image, CONFIG, checkpoint, '--out', tmp_path / 'out', '--pattern',
                           '*.tif')
    assert result.returncode == 1
    assert "--pattern '*.tif' selects the files of a folder, and no folder was given" in \
        result.stderr
    result = run_tool_main(tool, image, CONFIG, checkpoint, '--out', tmp_path / 'out', '--launcher',
                           'pytorch')
    assert result.returncode == 1 and 'it was given one image' in result.stderr
    result = run_tool_main(tool, tmp_path, '--pattern', '*.png', CONFIG, checkpoint, '--out',
                           tmp_path / 'out')
    assert result.returncode == 1 and "no files matching '*.png' in the folder" in result.stderr
    assert not (tmp_path / 'out').exists()


def run_script(*args, **popen):
    env = dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=REPO_ROOT)
    return subprocess.Popen([sys.executable, SCRIPT, *map(str, args)],
                            cwd=REPO_ROOT,
                            env=env,
                            stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE,
                            text=True,
                            **popen)


def wait_for_first_done(process, out):
    """Wait until the manifest records an image as done (or the process ends)."""
    while process.poll() is None:
        path = out / 'manifest.jsonl'
        if path.exists() and 'done' in statuses(out).values():
            return
        time.sleep(0.05)


@pytest.fixture(scope='module')
def many(tmp_path_factory):
    """Six good rasters: a run long enough to be stopped in the middle."""
    images = tmp_path_factory.mktemp('many')
    for index in range(6):
        write_raster(images / f'scene_{index}.tif', scene_channels(96, 96, seed=index))
    return images


@pytest.fixture(scope='module')
def whole(tool, checkpoint, many, tmp_path_factory):
    """The outputs of an uninterrupted run over ``many``: the tool's main in this process, on
    one thread as run_script's processes run."""
    out = tmp_path_factory.mktemp('whole') / 'out'
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        result = run_tool_main(tool, many, CONFIG, checkpoint, '--out', out)
    finally:
        torch.set_num_threads(threads)
    assert result.returncode == 0, result.stderr
    return out


def assert_same_class_maps(out, whole):
    for index in range(6):
        name = f'scene_{index}'
        assert (out / name / 'class_map.tif').read_bytes() == \
            (whole / name / 'class_map.tif').read_bytes()
        assert json.loads(
            (out / name / 'summary.json').read_text())['image'].endswith(f'{name}.tif')
    assert not list(out.rglob('*.partial*'))


@pytest.mark.parametrize('how', ['SIGKILL', 'SIGTERM'])
def test_a_stopped_run_finishes_the_rest_when_run_again(checkpoint, many, whole, tmp_path, how):
    out = tmp_path / 'out'
    process = run_script(many, CONFIG, checkpoint, '--out', out)
    wait_for_first_done(process, out)
    process.send_signal(getattr(signal, how))
    stdout, stderr = process.communicate(timeout=600)
    if how == 'SIGTERM':
        # the image in progress finishes, then the run stops with the requeue status
        assert process.returncode == 75, stderr
        assert 'stopped by SIGTERM' in stderr and 'run the same command again' in stderr
        assert 'pending' in statuses(out).values()
    else:
        assert process.returncode == -signal.SIGKILL
    stopped = statuses(out)
    assert set(stopped.values()) <= {'done', 'pending'}
    done_before = {name for name, status in stopped.items() if status == 'done'}
    rerun = run_script(many, CONFIG, checkpoint, '--out', out)
    stdout, stderr = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, stderr
    after = statuses(out)
    assert {n for n, s in after.items() if s == 'skipped'} >= done_before
    assert set(after.values()) <= {'done', 'skipped'} and len(after) == 6
    # the outputs are those of an uninterrupted run
    assert_same_class_maps(out, whole)


@pytest.mark.parametrize('how', ['SIGTERM', 'SIGUSR1'])
def test_a_signal_while_the_model_loads_leaves_every_image_pending_with_75(
        tool, checkpoint, folder, tmp_path, monkeypatch, how):
    import mmseg.apis
    load = mmseg.apis.init_model

    def load_and_receive_the_signal(*args, **kwargs):
        # A real signal to this process, while the tool loads its model.
        os.kill(os.getpid(), getattr(signal, how))
        return load(*args, **kwargs)

    monkeypatch.setattr(mmseg.apis, 'init_model', load_and_receive_the_signal)
    out = tmp_path / 'out'
    handlers = {name: signal.getsignal(getattr(signal, name)) for name in ('SIGTERM', 'SIGUSR1')}
    result = run_tool_main(tool, folder, CONFIG, checkpoint, '--out', out)
    assert result.returncode == 75, result.stderr
    assert f'stopped by {how}' in result.stderr and '6 of 6 inputs left to do' in result.stderr
    assert set(statuses(out).values()) == {'pending'}
    assert not [p for p in out.iterdir() if p.is_dir()]
    # the process's own handlers are back once the tool returns
    assert {name: signal.getsignal(getattr(signal, name)) for name in handlers} == handlers
    monkeypatch.setattr(mmseg.apis, 'init_model', load)
    rerun = run_tool_main(tool, folder, CONFIG, checkpoint, '--out', out)
    assert rerun.returncode == 1  # the two bad inputs
    after = statuses(out)
    assert [after[f'{name}.tif'] for name in GOOD] == ['done'] * len(GOOD)
    assert after['d_corrupt.tif'] == after['e_two_bands.tif'] == 'failed'


def free_port():
    """A TCP port free at this moment (a fixed one would collide with another run)."""
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


def test_two_processes_under_torchrun_share_the_images_and_do_each_once(
        checkpoint, many, whole, tmp_path):
    out = tmp_path / 'out'
    process = subprocess.Popen([
        sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node', '2', '--master_port',
        str(free_port()), SCRIPT, many, CONFIG, checkpoint, '--out', out, '--launcher', 'pytorch'
    ],
                               cwd=REPO_ROOT,
                               env=dict(os.environ, OMP_NUM_THREADS='1', PYTHONPATH=REPO_ROOT),
                               stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE,
                               text=True)
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode == 0, stdout[-3000:] + stderr[-3000:]
    records = manifest(out)
    assert [os.path.basename(r['input']) for r in records] == [f'scene_{i}.tif' for i in range(6)]
    assert {r['status'] for r in records} == {'done'}
    # equal sizes: three images each; every image in one rank's record only
    assert sorted(r['rank'] for r in records) == [0, 0, 0, 1, 1, 1]
    assert '[rank 0] ' in stdout and '[rank 1] ' in stdout
    assert sorted(p.name for p in out.glob('manifest*')) == ['manifest.jsonl']
    assert_same_class_maps(out, whole)


def stop_with_sigterm_then_rerun(command, env, out, whole):
    """Run a job script over ``many``, send it SIGTERM once an image is done, check it stops
    with the requeue status and images pending, then run it again: it completes the rest,
    with the class maps of one uninterrupted process."""
    job = subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while job.poll() is None and not any('"done"' in p.read_text()
                                         for p in out.glob('manifest.rank*.jsonl')):
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    stdout, stderr = job.communicate(timeout=600)
    assert job.returncode == 75, stdout[-3000:] + stderr[-3000:]
    assert 'inference stopped on a signal (status 75): run the same command again' in stderr
    stopped = statuses(out)
    assert 'pending' in stopped.values() and 'done' in stopped.values()
    assert not list(out.glob('manifest.rank*'))  # rank 0 merged them
    rerun = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    after = statuses(out)
    assert {n for n, s in stopped.items() if s == 'done'} == \
        {n for n, s in after.items() if s == 'skipped'}
    assert set(after.values()) == {'done', 'skipped'}
    assert_same_class_maps(out, whole)


def test_dist_infer_stops_torchrun_on_sigterm_with_75_and_a_rerun_completes(
        checkpoint, many, whole, tmp_path):
    out = tmp_path / 'out'
    env = dict(os.environ, PYTHON=sys.executable, OMP_NUM_THREADS='1', PORT=str(free_port()))
    command = ['bash', 'tools/dist_infer.sh', many, CONFIG, checkpoint, out, '2', '--device', 'cpu']
    # torchrun itself exits 1 when it passes a signal on; the script reads the run's state
    stop_with_sigterm_then_rerun(command, env, out, whole)


# slurm is not installed where the suite runs: this srun runs the step's tasks on this machine
# as slurm's does (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; SIGUSR1 passed on to every task,
# SIGTERM answered by killing them; the highest status returned), so that the script's command
# line, the slurm launcher and the requeue status are tested; the scheduler itself is not.
LOCAL_SRUN = r'''#!/usr/bin/env bash
ntasks=1
while [[ $1 == -* ]]; do
    case $1 in
        -p) shift ;;
        --ntasks=*) ntasks=${1#*=} ;;
    esac
    shift
done
pids=()
for ((task = 0; task < ntasks; task++)); do
    SLURM_PROCID=$task SLURM_LOCALID=$task SLURM_NTASKS=$ntasks SLURM_NODELIST=localhost "$@" &
    pids+=($!)
done
trap 'kill -KILL "${pids[@]}" 2>/dev/null || true' TERM
trap 'kill -USR1 "${pids[@]}" 2>/dev/null || true' USR1
highest=0
for pid in "${pids[@]}"; do
    while true; do
        wait "$pid" && status=0 || status=$?
        kill -0 "$pid" 2>/dev/null || break
    done
    if [[ $status -gt $highest ]]; then highest=$status; fi
done
exit "$highest"
'''


def test_slurm_infer_stops_on_sigterm_with_75_and_a_rerun_completes(checkpoint, many, whole,
                                                                    tmp_path):
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir()
    (bin_dir / 'srun').write_text(LOCAL_SRUN)
    (bin_dir / 'srun').chmod(0o755)
    out = tmp_path / 'out'
    env = dict(
        os.environ,
        PATH=f'{bin_dir}:{os.environ["PATH"]}',
        PYTHON=sys.executable,
        OMP_NUM_THREADS='1',
        GPUS='2',
        GPUS_PER_NODE='2',
        MASTER_ADDR='127.0.0.1',
        MASTER_PORT=str(free_port()))
    command = [
        'bash', 'tools/slurm_infer.sh', 'PARTITION', 'JOB', many, CONFIG, checkpoint, out,
        '--device', 'cpu'
    ]
    stop_with_sigterm_then_rerun(command, env, out, whole)
