"""Import a script of ``tools/`` as a module (the folders of scripts are not packages), and run
its command line in this process.

The scripts import only the installed ``mmlinear`` package, never each other, so nothing is
put on ``sys.path``.
"""
import contextlib
import importlib.util
import io
import os.path as osp
import sys
from types import ModuleType, SimpleNamespace

from conftest import REPO_ROOT

TOOLS_DIR = osp.join(REPO_ROOT, 'tools', 'analysis_tools')


def load_tool(name: str, folder: str = TOOLS_DIR) -> ModuleType:
    """The module ``<folder>/<name>.py`` (by default a script of ``tools/analysis_tools``),
    imported once."""
    module_name = f'mmlinear_tool_{osp.basename(folder)}_{name}'
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, osp.join(folder, f'{name}.py'))
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def run_tool_main(tool: ModuleType, *args) -> SimpleNamespace:
    """Run ``tool.main(args)`` in this process (a subprocess per call costs seconds of
    imports), capturing what it prints.

    Returns:
        SimpleNamespace: ``returncode`` (the status ``main`` returns, as ``sys.exit(main())``
        gives it to the interpreter: None is 0; or the status of its ``SystemExit``),
        ``stdout`` and ``stderr``.
    """
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            returncode = tool.main([str(a) for a in args]) or 0
        except SystemExit as e:
            # As the interpreter exits: None is 0, a message goes to stderr with status 1.
            returncode = e.code
            if returncode is None:
                returncode = 0
            elif not isinstance(returncode, int):
                print(returncode, file=sys.stderr)
                returncode = 1
    return SimpleNamespace(returncode=returncode, stdout=out.getvalue(), stderr=err.getvalue())
