"""Image files read into normalised batches, for the analysis tools that run on images."""
import itertools
import os
import os.path as osp
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
from PIL import Image
from torch import Tensor

IMAGE_EXTENSIONS = ('.png', '.jpg', '.jpeg', '.bmp', '.JPEG')


def list_images(paths: Sequence[str], max_images: Optional[int] = None) -> List[str]:
    """Image files given directly or found (sorted) in the given directories.

    A folder is searched with its subfolders, so a classification split laid out as
    ``split/<class>/<image>`` (mmpretrain's ``CustomDataset``) can be given as it is. The
    subfolders are interleaved (the first image of each, then the second of each, ...), so
    that ``max_images`` takes images of every class rather than all of the first one.

    Args:
        paths (Sequence[str]): Image files or folders.
        max_images (int, optional): Keep only the first ``max_images`` files.

    Returns:
        list[str]: The image paths, folders expanded as above.

    Raises:
        FileNotFoundError: If a path does not exist or no image is found.
    """
    files = []
    for path in paths:
        if osp.isdir(path):
            files += _folder_images(path)
        elif osp.isfile(path):
            files.append(path)
        else:
            raise FileNotFoundError(f'no image or folder at {path}')
    if not files:
        raise FileNotFoundError(f'no images ({", ".join(IMAGE_EXTENSIONS)}) in {list(paths)} '
                                'or their subfolders')
    return files[:max_images] if max_images else files


def _folder_images(folder: str) -> List[str]:
    """A folder's own images (sorted), then its subfolders' images interleaved."""
    entries = sorted(os.listdir(folder))
    own = [
        osp.join(folder, e) for e in entries
        if e.endswith(IMAGE_EXTENSIONS) and osp.isfile(osp.join(folder, e))
    ]
    nested = [
        _folder_images(osp.join(folder, e)) for e in entries if osp.isdir(osp.join(folder, e))
    ]
    interleaved = [f for group in itertools.zip_longest(*nested) for f in group if f is not None]
    return own + interleaved


def load_images(files: Sequence[str], size: Optional[int], mean: Sequence[float],
                std: Sequence[float]) -> Tuple[Tensor, List[np.ndarray]]:
    """Read RGB images, resize them to ``size`` squares (if given) and normalise them.

    Args:
        files (Sequence[str]): Image paths (all the same size when ``size`` is None).
        size (int, optional): Square side to resize to (bilinear).
        mean (Sequence[float]): RGB mean on the 0-255 scale.
        std (Sequence[float]): RGB standard deviation on the 0-255 scale.

    Returns:
        tuple[Tensor, list[np.ndarray]]: The (B, 3, H, W) float batch and the (H, W, 3) uint8
        images as shown.

    Raises:
        ValueError: If the images differ in size and no ``size`` is given.
    """
    images = []
    for file in files:
        with Image.open(file) as opened:
            image = opened.convert('RGB')
        if size:
            image = image.resize((size, size), Image.BILINEAR)
        images.append(np.asarray(image))
    if len({im.shape for im in images}) > 1:
        raise ValueError('images differ in size; give --img-size to resize them')
    x = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).float()
    x = (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    return x, images
