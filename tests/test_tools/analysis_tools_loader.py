"""Import a script of ``tools/analysis_tools`` as a module (the folder is not a package)."""
import importlib.util
import os.path as osp
import sys

from conftest import REPO_ROOT

TOOLS_DIR = osp.join(REPO_ROOT, 'tools', 'analysis_tools')


def load_tool(name: str):
    """The module ``tools/analysis_tools/<name>.py``, imported once."""
    module_name = f'mmlinear_analysis_tool_{name}'
    if module_name in sys.modules:
        return sys.modules[module_name]
    if TOOLS_DIR not in sys.path:
        sys.path.insert(0, TOOLS_DIR)  # the tools import their siblings by name
    spec = importlib.util.spec_from_file_location(module_name, osp.join(TOOLS_DIR, f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
