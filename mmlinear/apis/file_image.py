"""What the readers of large image files (OME-TIFF, raster, whole-slide) share: their optional
library, the path check, and closing the file, also on leaving a ``with`` block."""
import importlib
import os
import os.path as osp
from types import ModuleType
from typing import TypeVar, Union

_Image = TypeVar('_Image', bound='FileImage')


def import_reader(module: str, files: str, requirement: str, packages: str) -> ModuleType:
    """The reader library ``module``, imported on first use.

    Args:
        module (str): Its import name.
        files (str): What it reads, for the error (e.g. 'OME-TIFF files').
        requirement (str): What those files need, for the error.
        packages (str): What to install with pip.

    Raises:
        ImportError: It is not installed, saying what to install.
    """
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(f'{files} need {requirement}: pip install {packages}') from error


class FileImage:
    """An image file, opened by a subclass as an (H, W, C) array that reads only the rows it is
    sliced for, and closed by :meth:`close` or on leaving a ``with`` block.

    Args:
        path (str | PathLike): The file.
        kind (str): What the file is, for the error (e.g. 'raster').

    Raises:
        FileNotFoundError: No such file.
    """

    def __init__(self, path: Union[str, os.PathLike], kind: str) -> None:
        self.path = os.fspath(path)
        if not osp.isfile(self.path):
            raise FileNotFoundError(f'no {kind} file {self.path!r}')

    def close(self) -> None:
        """Close the file."""
        raise NotImplementedError

    def __enter__(self: _Image) -> _Image:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
