"""Every process-wide patch of mmengine, mmcv and torch state that mmlinear installs.

A shim replaces an upstream attribute for the whole process (so it also applies to the
toolboxes' own ``tools/train.py``, which import mmlinear through ``custom_imports``). Each is
listed in :data:`SHIMS` with what it replaces, the upstream versions it was written and tested
against, why, and when it can go; what it installs is written and documented in its own
module, and only this module assigns to upstream attributes. :func:`install_upstream_shims`
installs the shims that importing mmlinear installs (when mmengine is present; with torch
alone, as on a bare GPU image, none is and ``mmlinear.ops`` still imports); the mmcv shim is
installed by :class:`~mmlinear.engine.CPUAmpOptimWrapper`, the only code that needs it, so that
importing mmlinear does not import mmcv's compiled ops.
"""
import importlib
from typing import Callable, Dict, NamedTuple, Set


class Shim(NamedTuple):
    """One process-wide patch.

    Args:
        replaces (str): The upstream attributes it replaces or extends.
        upstream (str): The upstream versions it was written and tested against.
        why (str): What upstream does that mmlinear cannot live with.
        remove_when (str): When the shim can go.
        install (Callable[[], None]): Installs it (called once per process).
    """
    replaces: str
    upstream: str
    why: str
    remove_when: str
    install: Callable[[], None]


def _install_safe_checkpoint_loading() -> None:
    import torch
    from mmengine.runner.checkpoint import CheckpointLoader

    from ..utils.safe_checkpoint import load_checkpoint_file, safe_checkpoint_globals
    torch.serialization.add_safe_globals(safe_checkpoint_globals())
    CheckpointLoader.register_scheme(prefixes='', loader=load_checkpoint_file, force=True)


def _install_config_scope() -> None:
    from mmengine.config import config as config_module
    from mmengine.config import utils as config_utils

    from ..utils.config_scope import follow_renamed_distributions, get_installed_path
    config_utils.MODULE2PACKAGE.setdefault('mmlinear', 'mmlinear')
    follow_renamed_distributions(config_utils.MODULE2PACKAGE)
    config_module.get_installed_path = get_installed_path


def _runner_modules() -> tuple:
    """The modules that hold mmengine's checkpoint functions under their own names (each
    ``from ... import`` made a binding that has to be replaced)."""
    import mmengine.runner
    import mmengine.runner.checkpoint
    import mmengine.runner.runner
    return mmengine.runner, mmengine.runner.checkpoint, mmengine.runner.runner


def _install_atomic_checkpoints() -> None:
    from mmengine.hooks import CheckpointHook

    from ..utils.atomic_checkpoint import save_checkpoint, save_checkpoint_with_step
    for module in _runner_modules():
        module.save_checkpoint = save_checkpoint
    CheckpointHook._save_checkpoint_with_step = save_checkpoint_with_step


def _install_latest_valid_checkpoint() -> None:
    from ..utils.latest_checkpoint import find_latest_valid_checkpoint
    for module in _runner_modules():
        module.find_latest_checkpoint = find_latest_valid_checkpoint


def _install_exact_resume() -> None:
    from mmengine.runner import EpochBasedTrainLoop, Runner

    from . import exact_resume
    Runner.save_checkpoint = exact_resume.save_checkpoint
    Runner.resume = exact_resume.resume
    Runner.build_train_loop = exact_resume.build_train_loop
    EpochBasedTrainLoop.run_epoch = exact_resume.run_epoch


def _install_mmcv_cpu_autocast() -> None:
    from .mmcv_cpu_autocast import MMCV_FLOAT32_FUNCTIONS, float32_backward, float32_forward
    for module_name, function_name in MMCV_FLOAT32_FUNCTIONS:
        try:
            function = getattr(importlib.import_module(module_name), function_name)
        except (ImportError, AttributeError):  # mmcv without its compiled ops: nothing to do
            continue
        function.forward = staticmethod(float32_forward(function.forward))
        function.backward = staticmethod(float32_backward(function.backward))


SHIMS: Dict[str, Shim] = {
    'safe_checkpoint_loading':
    Shim(
        replaces="torch's weights-only allowlist (add_safe_globals); mmengine "
        "CheckpointLoader's loader of local paths",
        upstream='mmengine 0.10.7, torch >= 2.6',
        why='mmengine calls torch.load without weights_only, which torch 2.6 made True and '
        'which refuses mmengine checkpoints (they pickle the message hub); '
        'utils/safe_checkpoint.py allows exactly their globals',
        remove_when='mmengine saves checkpoints that load with weights_only=True, or loads '
        'them with an allowlist of its own',
        install=_install_safe_checkpoint_loading),
    'config_scope':
    Shim(
        replaces='mmengine.config.utils.MODULE2PACKAGE (an entry; entries of toolboxes '
        'installed under other distribution names), mmengine.config.config.get_installed_path',
        upstream='mmengine 0.10.7, onedl-mmengine 0.10.12',
        why="mmengine resolves 'pkg::path' only for the OpenMMLab packages of its table, "
        'finds an editable install in site-packages, where no mmlinear folder is, and looks '
        "the toolboxes up by their upstream distribution names, which the onedl stack's are "
        'not (utils/config_scope.py)',
        remove_when='mmengine lets a package register its config scope, finds editable '
        'installs and looks packages up by module',
        install=_install_config_scope),
    'atomic_checkpoints':
    Shim(
        replaces='mmengine.runner[.checkpoint, .runner].save_checkpoint, '
        'CheckpointHook._save_checkpoint_with_step',
        upstream='mmengine 0.10.7',
        why='upstream writes checkpoints in place (a kill or a full disk tears the file), '
        'deletes the dropped checkpoint before writing the next and rewrites last_checkpoint '
        'in place (utils/atomic_checkpoint.py)',
        remove_when='mmengine writes checkpoints and last_checkpoint atomically, new before '
        'old',
        install=_install_atomic_checkpoints),
    'latest_valid_checkpoint':
    Shim(
        replaces='mmengine.runner[.checkpoint, .runner].find_latest_checkpoint',
        upstream='mmengine 0.10.7',
        why='auto-resume takes whatever last_checkpoint names, readable or not '
        '(utils/latest_checkpoint.py)',
        remove_when="mmengine's auto-resume skips checkpoints it cannot read",
        install=_install_latest_valid_checkpoint),
    'exact_resume':
    Shim(
        replaces='Runner.save_checkpoint, Runner.resume, Runner.build_train_loop, '
        'EpochBasedTrainLoop.run_epoch',
        upstream='mmengine 0.10.7 (run_epoch is its copy, plus the skip)',
        why='upstream saves no random states, restarts a mid-epoch checkpoint\'s epoch '
        'from its first batch, and data-loading workers draw augmentations from generators '
        'no checkpoint holds (engine/exact_resume.py, engine/sample_seeding.py)',
        remove_when='mmengine restores random states and the position inside an epoch',
        install=_install_exact_resume),
    'mmcv_cpu_autocast':
    Shim(
        replaces='mmcv.ops NMSop and RoIAlignFunction forward / backward',
        upstream='mmcv 2.1.0',
        why="mmcv's CPU kernels of nms and RoIAlign take float32 / float64 only, so a "
        'detector under CPU bfloat16 autocast stops at the RPN (engine/mmcv_cpu_autocast.py)',
        remove_when="mmcv's CPU nms and RoIAlign take bfloat16",
        install=_install_mmcv_cpu_autocast),
}

#: The shims importing mmlinear installs; the others are installed by the code that needs them.
AT_IMPORT = ('safe_checkpoint_loading', 'config_scope', 'atomic_checkpoints',
             'latest_valid_checkpoint', 'exact_resume')

_installed: Set[str] = set()


def install_shim(name: str) -> None:
    """Install the shim ``name`` of :data:`SHIMS` (idempotent).

    Args:
        name (str): A key of :data:`SHIMS`.
    """
    if name not in SHIMS:
        raise KeyError(f'unknown shim {name!r}; the shims are {", ".join(SHIMS)}')
    if name in _installed:
        return
    SHIMS[name].install()
    _installed.add(name)


def install_upstream_shims() -> None:
    """Install the shims of :data:`AT_IMPORT` (idempotent; needs mmengine)."""
    for name in AT_IMPORT:
        install_shim(name)
