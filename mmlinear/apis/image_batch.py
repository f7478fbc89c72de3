"""The inputs of a many-image run and the output folder each one gets.

A run is given image files, folders (searched with a glob pattern) and list files (``.txt``:
one image path a line); :func:`collect_inputs` turns them into one ordered list without
repeats, and :func:`output_names` names each input's folder under the run's output folder so
that two inputs never share one.
"""
import glob
import hashlib
import os.path as osp
from typing import List, Optional, Sequence

from .images import IMAGE_EXTENSIONS
from .large_image_inputs import RASTER_SUFFIXES
from .ome_tiff import OME_TIFF_SUFFIXES
from .whole_slide import SLIDE_SUFFIXES

#: The suffixes of the files a folder contributes when no pattern is given: every file
#: :func:`~mmlinear.apis.open_image` has a reader for.
READABLE_SUFFIXES = tuple(
    sorted({
        s.lower()
        for s in (*RASTER_SUFFIXES, *OME_TIFF_SUFFIXES, *SLIDE_SUFFIXES, *IMAGE_EXTENSIONS, '.npy')
    }))
#: The suffix of a list file: one image path a line.
LIST_SUFFIX = '.txt'


def is_batch(sources: Sequence[str]) -> bool:
    """Whether ``sources`` name a many-image run (several sources, a folder or a list file)
    rather than one image."""
    return len(sources) != 1 or osp.isdir(sources[0]) or sources[0].endswith(LIST_SUFFIX)


def _listed(list_file: str) -> List[str]:
    """The paths a list file names, relative ones taken from the list file's folder; blank
    lines and lines starting with ``#`` are skipped."""
    if not osp.isfile(list_file):
        raise FileNotFoundError(f'no list file {list_file!r}')
    folder = osp.dirname(list_file)
    with open(list_file) as f:
        lines = [line.strip() for line in f]
    return [
        line if osp.isabs(line) else osp.join(folder, line) for line in lines
        if line and not line.startswith('#')
    ]


def _folder_inputs(folder: str, pattern: Optional[str], exclude: Optional[str]) -> List[str]:
    """The files of ``folder`` that ``pattern`` matches (``**`` reaching subfolders), or its
    readable images (:data:`READABLE_SUFFIXES`, no subfolders) without one; sorted, those under
    ``exclude`` left out."""
    if pattern is None:
        found = [
            osp.join(folder, name) for name in sorted(glob.glob('*', root_dir=folder))
            if name.lower().endswith(READABLE_SUFFIXES)
        ]
    else:
        found = [
            osp.join(folder, name)
            for name in sorted(glob.glob(pattern, root_dir=folder, recursive=True))
        ]
    found = [path for path in found if osp.isfile(path)]
    if exclude is not None:
        excluded = osp.realpath(exclude) + osp.sep
        found = [path for path in found if not osp.realpath(path).startswith(excluded)]
    if not found:
        wanted = f'matching {pattern!r}' if pattern else f'with a suffix in {READABLE_SUFFIXES}'
        raise FileNotFoundError(f'no files {wanted} in the folder {folder!r}')
    return found


def collect_inputs(sources: Sequence[str],
                   pattern: Optional[str] = None,
                   exclude: Optional[str] = None) -> List[str]:
    """The images of a run, in the order given, each once.

    Args:
        sources (Sequence[str]): Image files, folders and list files (``.txt``, one path a
            line, relative to the list's folder, ``#`` comments). An image file need not
            exist: a missing one is the run's to record as failed.
        pattern (str, optional): The glob a folder's files must match, relative to the folder
            (``'*.tif'``, ``'**/*.ome.tif'``). Defaults to every file of the folder itself
            whose suffix has a reader (:data:`READABLE_SUFFIXES`).
        exclude (str, optional): A folder whose files are never inputs (the run's output
            folder, when it lies inside an input folder).

    Returns:
        list[str]: The image paths; a file reached twice (same real path) is kept once.

    Raises:
        FileNotFoundError: A list file that does not exist, a folder with no matching file,
            or nothing at all.
    """
    paths = []
    for source in sources:
        source = str(source)
        if osp.isdir(source):
            paths += _folder_inputs(source, pattern, exclude)
        elif source.endswith(LIST_SUFFIX):
            paths += _listed(source)
        else:
            paths.append(source)
    seen, inputs = set(), []
    for path in paths:
        if osp.realpath(path) not in seen:
            seen.add(osp.realpath(path))
            inputs.append(path)
    if not inputs:
        raise FileNotFoundError(f'no images in {list(sources)}')
    return inputs


def image_stem(path: str) -> str:
    """The file name without its image suffix (``scene.ome.tif`` -> ``scene``)."""
    name = osp.basename(path)
    for suffix in OME_TIFF_SUFFIXES:
        if name.lower().endswith(suffix):
            return name[:-len(suffix)]
    return osp.splitext(name)[0]


def output_names(inputs: Sequence[str]) -> List[str]:
    """The name of each input's output folder: its :func:`image_stem`, unless another input
    has the same stem, in which case each of those takes ``-`` and the first 8 hex digits of
    the SHA-1 of its real path (``a/scene.tif`` and ``b/scene.tif`` -> ``scene-1f0c9a2e`` and
    ``scene-77b3d410``). The name depends only on the input and the stems of the others, so
    the same command names the same folders again.

    Args:
        inputs (Sequence[str]): The image paths (each once, :func:`collect_inputs`).

    Returns:
        list[str]: One folder name per input, all different.
    """
    stems = [image_stem(path) for path in inputs]
    names = []
    for path, stem in zip(inputs, stems):
        if stems.count(stem) > 1:
            digest = hashlib.sha1(osp.realpath(path).encode()).hexdigest()[:8]
            stem = f'{stem}-{digest}'
        names.append(stem)
    return names
