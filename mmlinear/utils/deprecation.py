"""Spellings that a release renamed: they keep working for one more release, with a
``FutureWarning`` that names the new spelling (docs/design.md, section 3).

Every shim warns through :func:`warn_renamed`: keyword arguments (:func:`renamed_arguments`),
config keys (:func:`renamed_keys`), command-line flags (:class:`RenamedFlag`) and module
attributes (:func:`renamed_attributes`).
"""
import argparse
import functools
import warnings
from typing import Any, Callable, Dict, Mapping, Optional


def warn_renamed(old: str, new: str, where: str, stacklevel: int = 2) -> None:
    """Warn that ``old`` is a deprecated spelling of ``new``.

    Args:
        old (str): The retired spelling.
        new (str): The spelling to use.
        where (str): What takes it (a function, a config, a tool), named in the message.
        stacklevel (int): As :func:`warnings.warn`: 1 is the caller of this function.
            Defaults to 2 (the caller's caller: the code that used the retired spelling).
    """
    warnings.warn(
        f'{where}: {old!r} is deprecated and will be removed in the next release; '
        f'use {new!r}',
        FutureWarning,
        stacklevel=stacklevel + 1)


def renamed_keys(options: Mapping[str, Any],
                 renames: Mapping[str, str],
                 where: str,
                 stacklevel: int = 2) -> Dict[str, Any]:
    """``options`` with every retired key given under its new name, warning for each.

    Args:
        options (Mapping[str, Any]): Keyword arguments or config keys.
        renames (Mapping[str, str]): Retired key -> new key.
        where (str): What takes the options, named in the warning.
        stacklevel (int): As :func:`warn_renamed`. Defaults to 2.

    Returns:
        dict: A copy of ``options``, the retired keys replaced.

    Raises:
        TypeError: A retired key given together with its new spelling.
    """
    options = dict(options)
    for old, new in renames.items():
        if old in options:
            if new in options:
                raise TypeError(f'{where}: got both {old!r} and its new spelling {new!r}')
            warn_renamed(old, new, where, stacklevel + 1)
            options[new] = options.pop(old)
    return options


def renamed_arguments(**renames: str) -> Callable[[Callable], Callable]:
    """Decorate a function whose keyword arguments ``old=new`` were renamed.

    Example:
        >>> @renamed_arguments(old_rows='rows')
        ... def read(x, *, rows=None): ...
    """

    def decorate(func: Callable) -> Callable:

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            if any(old in kwargs for old in renames):
                kwargs = renamed_keys(kwargs, renames, f'{func.__qualname__}()')
            return func(*args, **kwargs)

        return wrapper

    return decorate


class RenamedFlag(argparse.Action):
    """The ``argparse`` action of a retired flag: warns, then stores as the new flag does.

    Example:
        >>> parser.add_argument('--rows', type=int)
        >>> parser.add_argument('--old-rows', type=int, dest='rows', action=RenamedFlag,
        ...                     new='--rows', help=argparse.SUPPRESS)
    """

    def __init__(self, *args, new: str, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.new = new

    def __call__(self,
                 parser: argparse.ArgumentParser,
                 namespace: argparse.Namespace,
                 values: Any,
                 option_string: Optional[str] = None) -> None:
        warn_renamed(option_string, self.new, parser.prog)
        setattr(namespace, self.dest, values)


def renamed_attributes(module_globals: Dict[str, Any],
                       renames: Mapping[str, str]) -> Callable[[str], Any]:
    """A module's ``__getattr__`` (PEP 562) that gives each retired name the object of its
    new name, with a warning.

    Args:
        module_globals (dict): The module's ``globals()``, which hold the new names.
        renames (Mapping[str, str]): Retired name -> new name.
    """
    module = module_globals['__name__']

    def __getattr__(name: str) -> Any:
        if name not in renames:
            raise AttributeError(f'module {module!r} has no attribute {name!r}')
        warn_renamed(name, renames[name], module)
        return module_globals[renames[name]]

    return __getattr__
