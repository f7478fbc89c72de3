"""A few training iterations of a demo config on the tiny shapes sets, for the tests that
check a demo model trains (the fine-tuning demos start from random weights here)."""
import os.path as osp

from conftest import REPO_ROOT
from mmengine.config import Config
from mmengine.runner import Runner

from mmlinear.cli import fix_dataloaders


def train_demo_briefly(config: str,
                       data_root: str,
                       work_dir: str,
                       max_iters: int = 2,
                       **backbone_options) -> Runner:
    """Train ``configs/demo/<config>`` for ``max_iters`` iterations from random weights.

    Args:
        config (str): The demo config's file name under ``configs/demo``.
        data_root (str): The dataset folder the config's training set is read from (e.g. the
            tiny sets' ``coco/``).
        work_dir (str): The runner's work directory.
        max_iters (int): Training iterations (batches of 2). Defaults to 2.
        **backbone_options: Overrides of ``model.backbone`` (e.g. ``attn_type``).

    Returns:
        Runner: The runner after training (``runner.iter == max_iters``).
    """
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', 'demo', config))
    # No classifier checkpoint here: the fine-tuning demos start from random weights.
    cfg.model.backbone.update(init_cfg=None, **backbone_options)
    cfg.train_dataloader.update(num_workers=0, persistent_workers=False, batch_size=2)
    cfg.train_dataloader.dataset.data_root = data_root
    for part in ('val', 'test'):  # training only: the evaluators read the full data's paths
        cfg[f'{part}_dataloader'] = cfg[f'{part}_cfg'] = cfg[f'{part}_evaluator'] = None
    cfg.train_cfg = dict(type='IterBasedTrainLoop', max_iters=max_iters)
    cfg.param_scheduler = []
    cfg.default_hooks.checkpoint = None
    cfg.work_dir = work_dir
    fix_dataloaders(cfg)
    runner = Runner.from_cfg(cfg)
    runner.train()
    return runner
