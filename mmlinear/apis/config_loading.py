"""Loading a config and telling which OpenMMLab toolbox it belongs to.

One set of tools and APIs serves mmpretrain, mmdet and mmseg; the config's ``default_scope``
decides which toolbox's runner, inferencer or exporter applies.
"""
import os.path as osp
from typing import Optional

from mmengine.config import Config

SCOPES = ('mmpretrain', 'mmdet', 'mmseg')


def load_config(path: str, cfg_options: Optional[dict] = None) -> Config:
    """Load a config (``mmlinear`` must be imported first for ``mmlinear::`` bases).

    Args:
        path (str): Config file.
        cfg_options (dict, optional): ``--cfg-options`` overrides.

    Returns:
        Config: The merged config.
    """
    if not osp.isfile(path):
        raise FileNotFoundError(f'config file not found: {path}')
    cfg = Config.fromfile(path)
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    return cfg


def toolbox_scope(cfg: Config) -> str:
    """The toolbox a config belongs to, from its ``default_scope``.

    Raises:
        ValueError: If the scope is not one of mmpretrain, mmdet, mmseg.
    """
    scope = cfg.get('default_scope', 'mmengine')
    if scope not in SCOPES:
        raise ValueError(f'config default_scope {scope!r} is not supported by mmlinear tools; '
                         f'allowed: {", ".join(SCOPES)}')
    return scope
