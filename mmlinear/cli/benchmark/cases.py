"""What a benchmark case is: the options a case takes, its statuses and its input size."""
import math
from typing import Sequence, Tuple, Union

DTYPES = ('fp32', 'bf16', 'fp16')
MODES = ('forward', 'train', 'streamed')
#: Where a streamed case's image comes from: one tensor in memory, or a raw file read by rows.
STREAM_INPUTS = ('tensor', 'file')
DEVICES = ('cpu', 'cuda')
PATCH_SIZE = 16  # every preset uses 16 x 16 patches; tokens on the plots are patch tokens
OK = 'ok'
#: A case whose input the built model refuses (a ValueError naming why, e.g. Linformer's
#: projection has no columns for more tokens than it was built for): a result of the case,
#: as an OOM is, not a failure of the benchmark.
REFUSED = 'refused'

Resolution = Union[int, Sequence[int]]


def image_hw(resolution: Resolution) -> Tuple[int, int]:
    """(H, W) of a resolution given as a square side or as [H, W].

    Args:
        resolution (int | Sequence[int]): A square side or an (H, W) pair in pixels.

    Returns:
        tuple[int, int]: (H, W).
    """
    if isinstance(resolution, int):
        return resolution, resolution
    height, width = resolution
    return height, width


def num_tokens(resolution: Resolution, patch_size: int = PATCH_SIZE) -> int:
    """Number of patch tokens of an input (the patch embeddings pad to whole patches).

    Args:
        resolution (int | Sequence[int]): A square side or an (H, W) pair in pixels.
        patch_size (int): Patch side in pixels. Defaults to 16.

    Returns:
        int: ceil(H / p) * ceil(W / p).
    """
    height, width = image_hw(resolution)
    return math.ceil(height / patch_size) * math.ceil(width / patch_size)


def series_key(row: dict) -> Tuple[str, int, str, str]:
    """The series a result row belongs to: (model, batch, dtype, mode).

    Args:
        row (dict): A result row (or a fit) with those four keys.

    Returns:
        tuple: (model, batch, dtype, mode); the resolutions of one series share it.
    """
    return row['model'], row['batch'], row['dtype'], row['mode']
