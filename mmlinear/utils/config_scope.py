"""Make ``mmlinear::<path>`` usable in ``_base_`` lists of downstream configs.

mmengine resolves ``pkg::path`` only for packages in its ``MODULE2PACKAGE`` table, then reads
``<pkg>/.mim/model-index.yml`` and falls back to ``<pkg>/.mim/configs/<path>``. mmlinear ships
both (``mmlinear/.mim``); :mod:`mmlinear.engine.upstream_shims` adds its entry to the table and
installs :func:`get_installed_path`, before any config is parsed (importing mmlinear does).

mmengine finds the package folder through the distribution's install location, which for an
editable (PEP 660) install is site-packages, where no ``mmlinear/`` folder exists. For mmlinear
the folder of the imported package is used instead.

The table maps a module to the distribution pip installs it from (``mmseg`` to
``mmsegmentation``), which mmengine then looks up by name. The maintained continuation of the
toolboxes installs the same modules from other distributions (``onedl-mmsegmentation``), so
:func:`follow_renamed_distributions` points such entries at the module itself, which mmengine
finds through its import spec.
"""
import importlib.metadata
import importlib.util
import os.path as osp
from typing import Dict

from mmengine.config import config as config_module

# mmengine's own lookup, taken before the shim replaces it (the shim imports this module first).
_upstream_get_installed_path = config_module.get_installed_path


def get_installed_path(package: str) -> str:
    """mmengine's ``get_installed_path``, with mmlinear's folder taken from the imported package.

    Args:
        package (str): A package name of a ``pkg::path`` config reference.

    Returns:
        str: The folder the package is installed in.
    """
    if package == 'mmlinear':
        return osp.dirname(osp.dirname(osp.abspath(__file__)))
    return _upstream_get_installed_path(package)


def follow_renamed_distributions(table: Dict[str, str]) -> None:
    """Point each entry whose distribution is not installed, but whose module is, at the
    module (in place).

    Args:
        table (dict[str, str]): mmengine's ``MODULE2PACKAGE``: module name to distribution name.
    """
    for module, distribution in table.items():
        if module == distribution:
            continue
        try:
            importlib.metadata.distribution(distribution)
        except importlib.metadata.PackageNotFoundError:
            if importlib.util.find_spec(module) is not None:
                table[module] = module
