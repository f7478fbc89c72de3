"""The package's layering (docs/design.md, section 1): every import of an mmlinear module,
lazy ones inside functions included, goes to the importer's own floor or a lower one."""
import ast
import os.path as osp
from pathlib import Path
from typing import List, Tuple

from conftest import REPO_ROOT

PACKAGE = Path(REPO_ROOT) / 'mmlinear'

#: The floors of docs/design.md's diagram, ground floor 0; `tools/` above them all.
FLOORS = {
    'utils': 0,
    'version': 0,
    '_ext': 0,
    'ops': 1,
    'models': 2,
    'engine': 2,
    'datasets': 2,
    'registry': 2,
    'apis': 3,
    'visualization': 3,
    'evaluation': 3,
    'cli': 4,
}

#: The floors inside ``mmlinear.models`` (docs/design.md, section 1): the streaming package sits
#: just above the helpers, below the layers, backbones and necks that stream through it.
MODEL_FLOORS = {
    'utils': 0,
    'streaming': 1,
    'data_preprocessors': 1,
    'losses': 1,
    'layers': 2,
    'backbones': 3,
    'necks': 3,
    'decode_heads': 3,
    'algorithms': 4,
    'segmentors': 4,
    'detectors': 4,
}


def imported_modules(tree: ast.Module, package: List[str]) -> List[Tuple[ast.stmt, str]]:
    """(node, absolute module name) of every import in ``tree``, relative ones resolved
    against ``package`` (the importing module's package, as a list of names)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                base = node.module.split('.')
            else:
                base = package[:len(package) - node.level + 1] + \
                    (node.module.split('.') if node.module else [])
            # `from . import x` and `from mmlinear import x` import the submodule x.
            if len(base) == 1 and base[0] == 'mmlinear':
                found += [(node, f'mmlinear.{alias.name}') for alias in node.names]
            else:
                found.append((node, '.'.join(base)))
    return found


def upward_imports(path: Path, source: str) -> List[str]:
    """The imports of the mmlinear module at ``path`` (with text ``source``) that go up a floor.

    Importing the package itself (``import mmlinear``, for its config scope and shims) is
    allowed anywhere.

    Returns:
        list[str]: ``'<file>:<line> imports <module> (<floor> over <floor>)'`` per offender.
    """
    parts = path.relative_to(PACKAGE).with_suffix('').parts
    own = parts[0]
    package = ['mmlinear'] + list(parts[:-1])
    offenders = []
    for node, module in imported_modules(ast.parse(source), package):
        names = module.split('.')
        if names[0] != 'mmlinear' or len(names) == 1 or names[1] == own:
            continue
        if FLOORS[names[1]] > FLOORS[own]:
            offenders.append(f'{osp.relpath(path, REPO_ROOT)}:{node.lineno} imports {module} '
                             f'({names[1]} is above {own})')
    return offenders


def upward_model_imports(path: Path, source: str) -> List[str]:
    """The imports of a module of ``mmlinear.models`` (at ``path``, with text ``source``) that
    go up a floor of :data:`MODEL_FLOORS`.

    Returns:
        list[str]: ``'<file>:<line> imports <module> (<part> is above <part>)'`` per offender.
    """
    parts = path.relative_to(PACKAGE / 'models').with_suffix('').parts
    own = parts[0]
    package = ['mmlinear', 'models'] + list(parts[:-1])
    offenders = []
    for node, module in imported_modules(ast.parse(source), package):
        names = module.split('.')
        if names[:2] != ['mmlinear', 'models'] or len(names) == 2 or names[2] == own:
            continue
        if MODEL_FLOORS[names[2]] > MODEL_FLOORS[own]:
            offenders.append(f'{osp.relpath(path, REPO_ROOT)}:{node.lineno} imports {module} '
                             f'({names[2]} is above {own})')
    return offenders


def package_modules() -> List[Path]:
    """Every module of the package but its ``__init__`` (which is the package itself)."""
    return [p for p in sorted(PACKAGE.rglob('*.py')) if p != PACKAGE / '__init__.py']


def test_every_part_of_the_package_has_a_floor():
    parts = {p.relative_to(PACKAGE).with_suffix('').parts[0] for p in package_modules()}
    assert parts <= set(FLOORS), f'no floor in docs/design.md for {sorted(parts - set(FLOORS))}'


def test_no_module_imports_from_a_floor_above_its_own():
    offenders = [o for p in package_modules() for o in upward_imports(p, p.read_text())]
    assert not offenders, 'imports that go up a floor:\n' + '\n'.join(offenders)


def test_apis_importing_cli_is_an_upward_import():
    """The check sees an API module reaching for the tools' glue, however it is spelt."""
    path = PACKAGE / 'apis' / 'image_inference.py'
    for source in ('from mmlinear.cli import fix_dataloaders\n', 'import mmlinear.cli.benchmark\n',
                   'from mmlinear import cli\n',
                   'def f():\n    from ..cli.runner_setup import set_work_dir\n'):
        assert upward_imports(path, source), source


def test_same_and_lower_floors_and_the_package_itself_are_allowed():
    path = PACKAGE / 'cli' / 'benchmark' / 'worker.py'
    source = ('import mmlinear\nfrom mmlinear.apis import build_backbone\n'
              'from ..runner_setup import set_work_dir\nfrom . import cases\n'
              'from mmlinear.utils.timing import median_ms\n')
    assert upward_imports(path, source) == []


def model_modules() -> List[Path]:
    """Every module of a part of ``mmlinear.models`` (not the package's own ``__init__``)."""
    models = PACKAGE / 'models'
    return [p for p in package_modules() if p.parent != models and models in p.parents]


def test_every_part_of_models_has_a_floor():
    parts = {p.relative_to(PACKAGE / 'models').parts[0] for p in model_modules()}
    assert parts <= set(MODEL_FLOORS), f'no floor for models/{sorted(parts - set(MODEL_FLOORS))}'


def test_no_module_of_models_imports_from_a_part_above_its_own():
    offenders = [o for p in model_modules() for o in upward_model_imports(p, p.read_text())]
    assert not offenders, 'imports that go up inside models/:\n' + '\n'.join(offenders)


def test_streaming_importing_a_backbone_is_an_upward_import():
    """The streaming package may not reach up for the backbones or necks it serves."""
    path = PACKAGE / 'models' / 'streaming' / 'band_planner.py'
    for source in ('from ..backbones.base_plain_backbone import BasePlainBackbone\n',
                   'from mmlinear.models.necks import SimpleFeaturePyramid\n',
                   'def f():\n    from ..layers import InfViTBlock\n'):
        assert upward_model_imports(path, source), source
    assert upward_model_imports(path, 'from ..utils import check_choice\n') == []
