"""Output files that are whole or absent: written under a temporary name beside the final one,
renamed over it once complete.

A writer that is killed or fails part-way (a tool's GeoTIFF, a converted checkpoint, a
generated raster) then leaves no file under the final name that a later run or a user would
take for a finished one. Checkpoints written during training go through
:func:`mmlinear.utils.atomic_checkpoint.write_file_atomic` instead, which also fsyncs and
clears what a killed earlier write left.
"""
import contextlib
import os
import os.path as osp
from typing import Iterator


def partial_path(path: str) -> str:
    """The temporary name of ``path`` while it is written: ``.partial`` before its extension,
    so that writers that go by the extension still see it.

    Args:
        path (str): The final file, e.g. ``out/class_map.tif``.

    Returns:
        str: e.g. ``out/class_map.partial.tif``.
    """
    base, extension = osp.splitext(path)
    return f'{base}.partial{extension}'


@contextlib.contextmanager
def atomic_output(path: str) -> Iterator[str]:
    """Give the temporary name to write ``path`` under; rename it to ``path`` when the block
    ends without an error.

    Args:
        path (str): The final file (overwritten if it exists).

    Yields:
        str: :func:`partial_path` of ``path``, for the block to write. Whatever the block
        leaves there is removed if it raises, and ``path`` is then left as it was.

    Example:
        >>> with atomic_output('scene.tif') as partial:
        ...     write_geotiff(partial, image, georeference)
    """
    partial = partial_path(path)
    try:
        yield partial
        os.replace(partial, path)
    finally:
        if osp.exists(partial):
            os.remove(partial)
