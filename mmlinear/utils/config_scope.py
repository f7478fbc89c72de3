"""Make ``mmlinear::<path>`` usable in ``_base_`` lists of downstream configs.

mmengine resolves ``pkg::path`` only for packages in its ``MODULE2PACKAGE`` table, then reads
``<pkg>/.mim/model-index.yml`` and falls back to ``<pkg>/.mim/configs/<path>``. mmlinear ships
both (``mmlinear/.mim``) and this adds its entry to the table; it must run before the config is
parsed, which importing mmlinear does.

mmengine finds the package folder through the distribution's install location, which for an
editable (PEP 660) install is site-packages, where no ``mmlinear/`` folder exists. For mmlinear
the folder of the imported package is used instead.
"""
import os.path as osp

from mmengine.config import config as config_module
from mmengine.config import utils as config_utils

_registered = False


def register_config_scope() -> None:
    """Add ``mmlinear`` to mmengine's config-scope table and its path lookup (idempotent)."""
    global _registered
    if _registered:
        return
    config_utils.MODULE2PACKAGE.setdefault('mmlinear', 'mmlinear')
    original = config_module.get_installed_path

    def get_installed_path(package: str) -> str:
        if package == 'mmlinear':
            return osp.dirname(osp.dirname(osp.abspath(__file__)))
        return original(package)

    config_module.get_installed_path = get_installed_path
    _registered = True
