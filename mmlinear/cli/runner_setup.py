"""What ``tools/train.py``, ``tools/test.py`` and the analysis tools share to set a run up:
their common arguments, the launcher (distributed or not), the work dir, the dataloaders' and
optimizer wrapper's adjustments and the check that a config's data exists.

Loading the config itself is :func:`mmlinear.apis.load_config` (the Python API loads configs
too); one pair of tools serves mmpretrain, mmdet and mmseg
(:func:`mmlinear.apis.toolbox_scope`).
"""
import argparse
import os
import os.path as osp
import subprocess
from typing import List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist
from mmengine.config import Config, DictAction
from mmengine.registry import RUNNERS
from mmengine.runner import Runner


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every mmlinear tool shares: work dir, config overrides, launcher."""
    parser.add_argument('--work-dir', help='where logs (and checkpoints) go')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override config settings, e.g. train_cfg.max_epochs=1')
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm', 'mpi'],
        default='none',
        help='job launcher')
    # torch.distributed.launch passes --local-rank (older: --local_rank); torchrun sets env vars.
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)


def parse_tool_args(parser: argparse.ArgumentParser,
                    argv: Optional[List[str]] = None) -> argparse.Namespace:
    """Parse the arguments (``argv``, by default the command line's) and expose
    ``--local-rank`` as ``LOCAL_RANK``, as torchrun does."""
    args = parser.parse_args(argv)
    os.environ.setdefault('LOCAL_RANK', str(args.local_rank))
    return args


def pair_checkpoints(models: Sequence[str],
                     checkpoints: Optional[Sequence[str]]) -> List[Optional[str]]:
    """One checkpoint per model from a tool's ``--checkpoints`` ('none' or no list: None).

    Args:
        models (Sequence[str]): The ``--models`` given.
        checkpoints (Sequence[str], optional): The ``--checkpoints`` given.

    Returns:
        list[str | None]: A path or None per model.

    Raises:
        ValueError: If the two lists differ in length.
    """
    if checkpoints is None:
        return [None] * len(models)
    if len(checkpoints) != len(models):
        raise ValueError(f'--checkpoints needs one entry per model ({len(models)}), got '
                         f'{len(checkpoints)}')
    return [None if c == 'none' else c for c in checkpoints]


def set_work_dir(cfg: Config, work_dir: Optional[str], config_path: str) -> None:
    """``--work-dir`` wins, then the config's, then ``./work_dirs/<config name>``."""
    if work_dir is not None:
        cfg.work_dir = work_dir
    elif cfg.get('work_dir') is None:
        cfg.work_dir = osp.join('./work_dirs', osp.splitext(osp.basename(config_path))[0])


def fix_dataloaders(cfg: Config) -> None:
    """Apply mmpretrain's loader defaults and keep loaders valid with ``num_workers=0``.

    mmpretrain's own train script collates with ``default_collate`` (plain mmengine would
    use ``pseudo_collate``, which mmpretrain's data preprocessor does not expect), and torch
    refuses ``persistent_workers`` without workers.
    """
    scope = cfg.get('default_scope')
    for name in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        loader = cfg.get(name)
        if not loader:
            continue
        if scope == 'mmpretrain':
            loader.setdefault('collate_fn', dict(type='default_collate'))
        if loader.get('num_workers', 0) == 0:
            loader['persistent_workers'] = False


def _dataset_paths(dataset: dict, key: str) -> List[Tuple[str, str]]:
    """(config key, local path) of every file or folder a dataset config names, through
    dataset wrappers (``dataset`` / ``datasets``)."""
    if 'dataset' in dataset:
        return _dataset_paths(dataset['dataset'], f'{key}.dataset')
    if 'datasets' in dataset:
        return [
            p for i, d in enumerate(dataset['datasets'])
            for p in _dataset_paths(d, f'{key}.datasets[{i}]')
        ]
    root = dataset.get('data_root') or ''
    paths = [(f'{key}.data_root', root)] if root else []
    if dataset.get('ann_file'):
        paths.append((f'{key}.ann_file', osp.join(root, dataset['ann_file'])))
    prefix = dataset.get('data_prefix')
    prefixes = prefix.items() if isinstance(prefix, dict) else [('', prefix)] if prefix else []
    for name, value in prefixes:
        if value:
            paths.append(
                (f'{key}.data_prefix' + (f'.{name}' if name else ''), osp.join(root, value)))
    return [(k, p) for k, p in paths if '://' not in p]


def check_dataset_paths(cfg: Config, loaders: Sequence[str]) -> None:
    """Fail before anything is built if a dataloader's data is missing.

    Args:
        cfg (Config): The run's config.
        loaders (Sequence[str]): The dataloaders the run uses, e.g. ('train_dataloader',
            'val_dataloader').

    Raises:
        FileNotFoundError: Naming every missing path with its config key.
    """
    missing = [(key, path) for name in loaders if cfg.get(name)
               for key, path in _dataset_paths(cfg[name].get('dataset', {}), name + '.dataset')
               if not osp.exists(path)]
    if missing:
        listing = '\n'.join(f'  {key}: {path}' for key, path in missing)
        raise FileNotFoundError(
            f'the config points at data that does not exist:\n{listing}\n'
            'Fix the paths (e.g. --cfg-options <key>=<path>); the demo configs read the '
            'bundled data, written by `python tools/misc/make_tiny_datasets.py` (or `make data`).')


def enable_amp(cfg: Config) -> None:
    """Switch the optimizer wrapper to mixed precision.

    On CUDA this is mmengine's ``AmpOptimWrapper`` with a dynamic loss scale (float16); on a
    machine without a GPU, mmlinear's ``CPUAmpOptimWrapper`` (bfloat16).
    """
    wrapper = cfg.optim_wrapper
    if wrapper.get('type', 'OptimWrapper') in ('AmpOptimWrapper', 'mmlinear.CPUAmpOptimWrapper'):
        return
    if wrapper.get('type', 'OptimWrapper') != 'OptimWrapper':
        raise ValueError(f'--amp needs optim_wrapper.type OptimWrapper, got {wrapper.type!r}')
    if torch.cuda.is_available():
        wrapper.type = 'AmpOptimWrapper'
        wrapper.setdefault('loss_scale', 'dynamic')
    else:
        wrapper.type = 'mmlinear.CPUAmpOptimWrapper'


def _slurm_env_to_torch_env() -> None:
    """Fill torch.distributed's env:// variables from SLURM's (as mmengine does for CUDA)."""
    os.environ.setdefault('RANK', os.environ['SLURM_PROCID'])
    os.environ.setdefault('WORLD_SIZE', os.environ['SLURM_NTASKS'])
    os.environ.setdefault('LOCAL_RANK', os.environ.get('SLURM_LOCALID', '0'))
    if 'MASTER_ADDR' not in os.environ:
        nodes = os.environ['SLURM_NODELIST']
        os.environ['MASTER_ADDR'] = subprocess.getoutput(
            f'scontrol show hostname {nodes} | head -n1')
    os.environ.setdefault('MASTER_PORT', '29500')


def torchrun_attempt() -> int:
    """How many times torchrun has restarted this worker's group (0 outside torchrun)."""
    return int(os.environ.get('TORCHELASTIC_RESTART_COUNT', '0'))


def _init_process_group(backend: str) -> None:
    """``init_process_group`` from the env:// variables, keyed by torchrun's attempt.

    torchrun's static rendezvous (``--master_addr`` / ``--master_port``, as dist_train.sh runs
    it) keeps one store for every attempt of a run, and the keys of ``init_process_group``
    name no attempt: a restarted worker could read the address that a dead worker of the
    previous attempt left there (gloo then fails with "Connection refused"). After a restart
    the keys get a prefix of their own.
    """
    attempt = torchrun_attempt()
    if attempt == 0:
        dist.init_process_group(backend=backend)
        return
    store, rank, world_size = next(dist.rendezvous('env://'))
    dist.init_process_group(
        backend=backend,
        store=dist.PrefixStore(f'mmlinear/attempt_{attempt}', store),
        rank=rank,
        world_size=world_size)


def start_gloo_group(launcher: str) -> None:
    """Join the gloo process group of a 'pytorch' (torchrun), 'slurm' (srun) or 'mpi' launch,
    from the variables the launcher sets (a no-op where the group exists).

    Gloo runs on the CPU whether or not there are GPUs: it is the group of training without
    CUDA, and of the tools whose processes exchange only a few numbers
    (``tools/inference/large_image.py``).
    """
    if launcher == 'slurm':
        _slurm_env_to_torch_env()
    elif launcher == 'mpi':
        os.environ.setdefault('RANK', os.environ['OMPI_COMM_WORLD_RANK'])
        os.environ.setdefault('WORLD_SIZE', os.environ['OMPI_COMM_WORLD_SIZE'])
        os.environ.setdefault('LOCAL_RANK', os.environ['OMPI_COMM_WORLD_LOCAL_RANK'])
    if not dist.is_initialized():
        _init_process_group('gloo')


def prepare_launcher(cfg: Config, launcher: str) -> None:
    """Set up distributed running; on a machine without CUDA, use gloo.

    mmengine 0.10.7's ``init_dist`` always calls ``torch.cuda.set_device`` and its default DDP
    wrapper passes ``device_ids=[LOCAL_RANK]``, which DDP rejects for CPU modules. Without
    CUDA we therefore create the gloo process group here (mmengine then skips its own) and
    give the wrapper ``device_ids=None``. A worker that torchrun restarted creates its group
    here with CUDA too (:func:`_init_process_group` says why).

    Args:
        cfg (Config): The config; ``launcher`` and, without CUDA, ``model_wrapper_cfg`` and
            ``env_cfg.dist_cfg`` are updated.
        launcher (str): 'none', 'pytorch', 'slurm' or 'mpi'.
    """
    cfg.launcher = launcher
    if launcher == 'none':
        return
    if torch.cuda.is_available():
        if launcher == 'pytorch' and torchrun_attempt() > 0:
            # As mmengine's init_dist (which skips an initialised group), with the prefix.
            torch.cuda.set_device(int(os.environ['LOCAL_RANK']))
            _init_process_group(cfg.get('env_cfg', {}).get('dist_cfg', {}).get('backend', 'nccl'))
        return
    start_gloo_group(launcher)
    cfg.setdefault('env_cfg', {}).setdefault('dist_cfg', {})['backend'] = 'gloo'
    wrapper = cfg.get('model_wrapper_cfg') or {}
    wrapper.setdefault('type', 'MMDistributedDataParallel')
    wrapper['device_ids'] = None
    cfg.model_wrapper_cfg = wrapper


def close_launcher() -> None:
    """Shut the process group down cleanly before the interpreter exits.

    A gloo group left to the interpreter's exit can abort a rank ("terminate called without
    an active exception") while its peer is still closing its connections; a barrier then an
    explicit destroy lets every rank leave together.
    """
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def run_runner(cfg: Config, launcher: str, loaders: Sequence[str], mode: str) -> None:
    """The end that tools/train.py and tools/test.py share: make the config's loaders valid
    (:func:`fix_dataloaders`), check the dataset paths of ``loaders``, start the launcher,
    build the runner (the config's ``runner_type``, else mmengine's ``Runner``), run it and
    close the launcher.

    Args:
        cfg (Config): The full config.
        launcher (str): 'none', 'pytorch' or 'slurm'.
        loaders (Sequence[str]): The dataloaders the run reads, e.g. ``['test_dataloader']``.
        mode (str): The runner's method to call: 'train' or 'test'.
    """
    fix_dataloaders(cfg)
    check_dataset_paths(cfg, loaders)
    prepare_launcher(cfg, launcher)
    runner = Runner.from_cfg(cfg) if 'runner_type' not in cfg else RUNNERS.build(cfg)
    getattr(runner, mode)()
    close_launcher()
