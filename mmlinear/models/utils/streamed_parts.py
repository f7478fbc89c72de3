"""The parts a model needs to run over bands of rows: an mmlinear backbone that streams its
map and the simple pyramid neck, and the choice of the band heights (shared by streamed
segmentation and detection)."""
from typing import Any, Callable, Optional, Sequence, Tuple

from torch import nn

from ..backbones.base_plain_backbone import BasePlainBackbone
from ..necks import SimpleFeaturePyramid
from .stream_memory import GB
from .token_stream import check_chunk_rows, check_head_rows


def streamed_parts(model: nn.Module, task: str) -> Tuple[BasePlainBackbone, SimpleFeaturePyramid]:
    """The backbone and neck of ``model``, checked.

    Args:
        model (nn.Module): An mmseg / mmdet model with ``backbone`` and ``neck``.
        task (str): What the caller does, for the errors ('segmentation', 'detection').

    Returns:
        tuple[BasePlainBackbone, SimpleFeaturePyramid]: The backbone and the neck.

    Raises:
        TypeError: Another backbone (or one whose ``out_type`` is not 'featmap'), or another
            neck, naming what is supported.
    """
    backbone = getattr(model, 'backbone', None)
    if not isinstance(backbone, BasePlainBackbone) or backbone.out_type != 'featmap':
        got = type(backbone).__name__
        if isinstance(backbone, BasePlainBackbone):
            got += f' with out_type={backbone.out_type!r}'
        raise TypeError(f"streamed {task} needs an mmlinear backbone with out_type='featmap' "
                        f'(InfViT, WeightFormer, VECA), got {got}')
    neck = getattr(model, 'neck', None)
    if not isinstance(neck, SimpleFeaturePyramid):
        raise TypeError(f'streamed {task} needs the mmlinear SimpleFeaturePyramid neck, got '
                        f'{type(neck).__name__}')
    return backbone, neck


def pick_band_rows(backbone: BasePlainBackbone,
                   image_shape: Sequence[int],
                   memory_at: Callable[[int, int], Any],
                   head_band_bytes: Callable[[Any], int],
                   finest_rows: int,
                   task: str,
                   *,
                   chunk_rows: Optional[int] = None,
                   head_rows: Optional[int] = None,
                   mem_limit_gb: Optional[float] = None,
                   buffer: str = 'memory',
                   input_in_memory: bool = True) -> Tuple[int, int]:
    """The backbone's and the head's band heights of a streamed model.

    Without a limit, heights not given are the tallest whose head band holds at most
    :attr:`BasePlainBackbone.default_band_bytes`; with ``mem_limit_gb`` the tallest whose
    predicted peak fits (at most the heights given), and a limit that no band meets is refused
    before any work.

    Args:
        backbone (BasePlainBackbone): The streamed backbone (it picks its own band height).
        image_shape (Sequence[int]): (B, C, H, W).
        memory_at (Callable[[int, int], Any]): The model's memory prediction for (backbone
            rows, head rows): an object with ``total_bytes`` and ``describe()``.
        head_band_bytes (Callable[[Any], int]): The bytes of one head band in a prediction.
        finest_rows (int): Rows of the head's finest level (the tallest head band).
        task (str): What the caller does, for the error ('segmentation', 'detection').
        chunk_rows (int, optional): The backbone's band height (patch rows), if given.
        head_rows (int, optional): The head's band height (rows of its finest level).
        mem_limit_gb (float, optional): The limit of the predicted peak.
        buffer (str): 'memory' or 'disk', the backbone's residual stream.
        input_in_memory (bool): Whether the image is one array in memory.

    Returns:
        tuple[int, int]: (chunk_rows, head_rows).

    Raises:
        ValueError: A height below 1, or a limit that even one-row bands exceed (with the
            predicted figure).
    """
    if chunk_rows is not None:
        check_chunk_rows(chunk_rows)
    if head_rows is not None:
        check_head_rows(head_rows)

    def fits(memory: Any) -> bool:
        if mem_limit_gb is None:
            return head_band_bytes(memory) <= backbone.default_band_bytes
        return memory.total_bytes <= mem_limit_gb * GB

    if mem_limit_gb is not None:
        needed = memory_at(chunk_rows or backbone.stream_row_alignment, 1)
        if not fits(needed):
            raise ValueError(f'streamed {task} needs {needed.describe()}, limit '
                             f"{mem_limit_gb:g} GB: raise mem_limit_gb, or use "
                             f"buffer='disk' or an image read by rows from a file")
    chunk_rows = backbone.pick_chunk_rows(image_shape, chunk_rows, mem_limit_gb, buffer,
                                          input_in_memory)
    if head_rows is not None and mem_limit_gb is None:
        return chunk_rows, head_rows
    if not fits(memory_at(chunk_rows, 1)):  # without a limit: even one row passes the mark
        return chunk_rows, 1
    # The tallest head band that fits (the prediction grows with the band).
    low, high = 1, min(head_rows or finest_rows, finest_rows)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(memory_at(chunk_rows, middle)) else (low, middle - 1)
    return chunk_rows, low
