"""The parts a model needs to run over bands of rows: an mmlinear backbone that streams its
map and the simple pyramid neck, and the choice of the band heights (:class:`StreamedBands`,
shared by streamed segmentation and detection)."""
from abc import ABC, abstractmethod
from typing import Any, NamedTuple, Optional, Sequence, Tuple

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


class BandPlan(NamedTuple):
    """The band heights of a streamed model and its predicted peak memory with them.

    Attributes:
        chunk_rows (int): The backbone's band height (patch rows).
        head_rows (int): The heads' band height (rows of their finest level).
        memory (Any): The model's prediction with these heights: an object with
            ``total_bytes`` and ``describe()`` (``StreamedSegmentationMemory``,
            ``StreamedDetectionMemory``).
    """
    chunk_rows: int
    head_rows: int
    memory: Any


class StreamedBands(ABC):
    """What streamed segmentation and detection share: the backbone's and the heads' band
    heights, picked from the model's own prediction of its peak memory.

    A subclass sets :attr:`task` and ``backbone`` and defines :meth:`predict_memory` (whose
    prediction has ``total_bytes``, ``head_band_bytes`` and ``describe()``) and
    :meth:`finest_rows`.
    """

    #: What the model does, for the errors ('segmentation', 'detection').
    task: str
    backbone: BasePlainBackbone

    @property
    def in_channels(self) -> int:
        """int: The bands (channels) of the images the backbone takes."""
        return self.backbone.patch_embed.in_channels

    @abstractmethod
    def predict_memory(self, image_shape: Sequence[int], *, chunk_rows: int, head_rows: int,
                       buffer: str, input_in_memory: bool, **memory_options: int) -> Any:
        """The model's peak memory beyond the weights with these band heights, before any
        work: an object with ``total_bytes``, ``head_band_bytes`` and ``describe()``."""

    @abstractmethod
    def finest_rows(self, image_shape: Sequence[int]) -> int:
        """Rows of the heads' finest level for (B, C, H, W) images (the tallest head band)."""

    def plan_bands(self,
                   image_shape: Sequence[int],
                   *,
                   chunk_rows: Optional[int] = None,
                   head_rows: Optional[int] = None,
                   mem_limit_gb: Optional[float] = None,
                   buffer: str = 'memory',
                   input_in_memory: bool = True,
                   **memory_options: int) -> BandPlan:
        """The backbone's and the heads' band heights, and the predicted peak with them.

        Without a limit, heights not given are the tallest whose head band holds at most
        :attr:`BasePlainBackbone.default_band_bytes`; with ``mem_limit_gb`` the tallest whose
        predicted peak fits (at most the heights given), and a limit that no band meets is
        refused before any work.

        Args:
            image_shape (Sequence[int]): (B, C, H, W).
            chunk_rows (int, optional): The backbone's band height (patch rows), if given.
            head_rows (int, optional): The heads' band height (rows of their finest level).
            mem_limit_gb (float, optional): The limit of the predicted peak.
            buffer (str): 'memory' or 'disk', the backbone's residual stream.
            input_in_memory (bool): Whether the image is one array in memory.
            **memory_options (int): What else the peak depends on (segmentation:
                ``output_bytes``, the whole-image outputs the caller holds).

        Returns:
            BandPlan: (chunk_rows, head_rows, memory).

        Raises:
            ValueError: A height below 1, or a limit that even one-row bands exceed (with the
                predicted figure).
        """
        if chunk_rows is not None:
            check_chunk_rows(chunk_rows)
        if head_rows is not None:
            check_head_rows(head_rows)

        def memory_at(backbone_rows: int, rows: int) -> Any:
            return self.predict_memory(
                image_shape,
                chunk_rows=backbone_rows,
                head_rows=rows,
                buffer=buffer,
                input_in_memory=input_in_memory,
                **memory_options)

        def fits(memory: Any) -> bool:
            if mem_limit_gb is None:
                return memory.head_band_bytes <= self.backbone.default_band_bytes
            return memory.total_bytes <= mem_limit_gb * GB

        if mem_limit_gb is not None:
            needed = memory_at(chunk_rows or self.backbone.stream_row_alignment, 1)
            if not fits(needed):
                raise ValueError(f'streamed {self.task} needs {needed.describe()}, limit '
                                 f"{mem_limit_gb:g} GB: raise mem_limit_gb, or use "
                                 f"buffer='disk' or an image read by rows from a file")
        chunk_rows = self.backbone.pick_chunk_rows(image_shape, chunk_rows, mem_limit_gb, buffer,
                                                   input_in_memory)
        if head_rows is not None and mem_limit_gb is None:
            return BandPlan(chunk_rows, head_rows, memory_at(chunk_rows, head_rows))
        # The tallest head band that fits (the prediction grows with the band); without a
        # limit, even one row may pass the mark, and one row it is then.
        low, best = 1, memory_at(chunk_rows, 1)
        if not fits(best):
            return BandPlan(chunk_rows, low, best)
        finest = self.finest_rows(image_shape)
        high = min(head_rows or finest, finest)
        while low < high:
            middle = (low + high + 1) // 2
            memory = memory_at(chunk_rows, middle)
            if fits(memory):
                low, best = middle, memory
            else:
                high = middle - 1
        return BandPlan(chunk_rows, low, best)
