"""Shared fixtures. ``tests/`` has no ``__init__.py``: the mmseg wheel ships a top-level
``tests`` package that would shadow ours."""
import os
import os.path as osp
import subprocess
import sys
from typing import Dict, NamedTuple, Tuple

import pytest

REPO_ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity, capped by a cgroup v2 CPU quota.

    A container often shows all the host's cores while its quota allows two; torch would then
    start a thread per visible core and the threads would mostly wait for each other.
    """
    cpus = len(os.sched_getaffinity(0))
    try:
        with open('/sys/fs/cgroup/cpu.max') as f:
            quota, period = f.read().split()
        if quota != 'max':
            cpus = min(cpus, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return cpus


# Before torch is imported (here and in the tools the tests start), unless the caller chose;
# pytest-xdist workers (`make test` runs two) share the CPUs.
workers = int(os.environ.get('PYTEST_XDIST_WORKER_COUNT', '1'))
os.environ.setdefault('OMP_NUM_THREADS', str(max(1, usable_cpus() // workers)))
# mmlinear.ops.linear otherwise measures at first use which CPU backend runs a layer, and a
# choice made by the machine's speed would change outputs at rounding level from run to run.
# The tests of the other backends ask for them (tests/test_ops/test_linear.py,
# tests/test_models/test_backbones/test_cpu_backends.py).
os.environ.setdefault('MMLINEAR_CPU_BACKEND', 'pytorch')


def pytest_addoption(parser):
    parser.addoption('--run-slow', action='store_true', help='also run tests marked slow')


def pytest_collection_modifyitems(config, items):
    if config.getoption('--run-slow'):
        return
    skip = pytest.mark.skip(reason='slow: run with --run-slow (make test-all)')
    for item in items:
        if 'slow' in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope='session')
def repo_root() -> str:
    return REPO_ROOT


@pytest.fixture
def mmengine_log():
    """The messages logged through mmengine's current logger while the test runs (a list
    that fills as they come)."""
    import logging

    from mmengine.logging import MMLogger  # here: the op tests run without mmengine
    messages = []
    handler = logging.Handler()
    handler.emit = lambda record: messages.append(record.getMessage())
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    yield messages
    logger.removeHandler(handler)


@pytest.fixture(scope='session')
def tiny_data(tmp_path_factory) -> str:
    """The bundled shapes sets at 5% size (deterministic), written once per session."""
    out = str(tmp_path_factory.mktemp('data') / 'shapes')
    subprocess.run([
        sys.executable,
        osp.join(REPO_ROOT, 'tools/misc/make_tiny_datasets.py'), '--out', out, '--scale', '0.05'
    ],
                   check=True,
                   capture_output=True)
    return out


class DemoCheckpoint(NamedTuple):
    """A demo config, a checkpoint of its freshly initialised model and an image to run."""
    config: str
    checkpoint: str
    image: str
    classes: Tuple[str, ...]


# task: (demo config, data root under the shapes sets, folder of test images there)
DEMO_TASKS = {
    'cls': ('infvit-demo-linear_shapes-cls.py', 'cls', 'val/circle'),
    'det': ('mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco.py', 'coco/', 'images/val'),
    'seg': ('upernet_infvit-demo-linear_shapes-ade.py', 'ade', 'images/validation'),
}


@pytest.fixture(scope='session')
def demo_checkpoints(tiny_data, tmp_path_factory) -> Dict[str, DemoCheckpoint]:
    """Per demo task ('cls', 'det', 'seg'): the demo config, a checkpoint of its model as
    built (random weights) holding ``meta.dataset_meta`` as a runner saves it (the metainfo of
    the config's test dataset, read from the tiny sets), and the first test image.

    The weights are drawn from a fixed seed, the same on every machine and whatever ran
    before: the random Mask R-CNN of some seeds predicts no mask pixel on the test scenes
    (seed 3 on the first scene), which would leave the tests comparing masks nothing to compare.
    """
    import torch
    from mmengine.config import Config
    from mmengine.registry import DATASETS, MODELS, DefaultScope
    from mmengine.runner import save_checkpoint

    out = tmp_path_factory.mktemp('demo_checkpoints')
    checkpoints = {}
    for task, (name, root, images) in DEMO_TASKS.items():
        config = osp.join(REPO_ROOT, 'configs', 'demo', name)
        cfg = Config.fromfile(config)
        data_root = osp.join(tiny_data, root)
        with DefaultScope.overwrite_default_scope(cfg.default_scope), \
                torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = MODELS.build(cfg.model)
            metainfo = DATASETS.build(dict(cfg.test_dataloader.dataset,
                                           data_root=data_root)).metainfo
        checkpoint = str(out / f'{task}.pth')
        save_checkpoint(
            dict(meta=dict(dataset_meta=metainfo), state_dict=model.state_dict()), checkpoint)
        image_dir = osp.join(data_root, images)
        image = osp.join(image_dir, sorted(os.listdir(image_dir))[0])
        checkpoints[task] = DemoCheckpoint(config, checkpoint, image, tuple(metainfo['classes']))
    return checkpoints
