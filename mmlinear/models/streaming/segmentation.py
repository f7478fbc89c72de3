"""Whole-image semantic segmentation over bands of rows: a streamed backbone, then the neck
and the decode head band by band, for images of any size."""
from typing import Any, Iterator, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from ..utils.windowed_pyramid_pooling import ContextWindow, check_context_window
from .band_planner import BandPlan, BandPlanner, StreamOptions, streamed_parts
from .band_progress import BandProgress
from .band_resize import Span, resize_band, source_span
from .memory_model import GB, StreamedMemory
from .token_stream import check_head_rows, row_bands
from .uper_head_bands import UPerHeadBands, check_uper_head


class StreamedSegmentationMemory(NamedTuple):
    """The predicted peak memory of a streamed segmentation beyond the weights, in bytes.

    The backbone runs first (its own peak, :class:`StreamedMemory`, with its output map);
    then its stream is gone, the whole-image outputs are allocated, and the neck and head run
    over bands of the map it left.

    Attributes:
        backbone (StreamedMemory): The backbone's streamed forward.
        head_band_bytes (int): One band of the neck and decode head, its class scores resized
            to the image's rows included.
        output_bytes (int): The class map and logits held in memory for the whole image
            (allocated after the backbone has run).
        head_rows (int): Rows of the head's finest level per band.
    """
    backbone: StreamedMemory
    head_band_bytes: int
    output_bytes: int
    head_rows: int

    @property
    def total_bytes(self) -> int:
        """int: The larger of the two phases (the head's with the whole-image outputs)."""
        return self.backbone.then_heads(self.head_band_bytes + self.output_bytes)

    def describe(self) -> str:
        """str: The total and its parts, in GB."""
        return (f'{self.total_bytes / GB:.2f} GB (backbone {self.backbone.describe()}; head '
                f'bands of {self.head_rows} rows {self.head_band_bytes / GB:.2f}; outputs '
                f'{self.output_bytes / GB:.2f})')


class StreamedSegmentation(BandPlanner):
    """An mmseg ``EncoderDecoder`` run over an image in bands of rows.

    The backbone streams (:meth:`BasePlainBackbone.forward_streamed`) and leaves its map
    (in memory or in a mapped file); the simple pyramid's levels are made from it band by
    band (:meth:`SimpleFeaturePyramid.forward_rows`) and UPerHead runs over bands of its
    finest level (:class:`UPerHeadBands`, its pyramid pooling over the whole top map first,
    or over a window around each position, band by band).
    Each band of class scores is resized to the image's rows as ``decode_head.predict``
    resizes the whole map, so the bands equal mmseg's whole-image logits up to rounding.

    Args:
        segmentor (nn.Module): An mmseg ``EncoderDecoder`` with an mmlinear plain backbone
            (``out_type='featmap'``), a ``SimpleFeaturePyramid`` neck and a ``UPerHead``.
        context_window (None | int | tuple[int, int]): The window (rows, columns) of the
            head's pyramid pooling around each position, in cells of its top input level
            (see ``ContextWindowUPerHead``); None (default): the whole top level. Callers
            pass the head's own with :func:`~mmlinear.models.decode_heads.context_window_of`.
    """

    task = 'segmentation'
    batch_of_one = False

    def __init__(self, segmentor: nn.Module, context_window: ContextWindow = None) -> None:
        backbone, neck = streamed_parts(segmentor, self.task)
        self.model = segmentor
        self.backbone, self.neck, self.decode_head = backbone, neck, segmentor.decode_head
        check_uper_head(self.decode_head)
        self.context_window = check_context_window(context_window)

    @property
    def num_classes(self) -> int:
        """int: Channels of the logits (``out_channels`` of the decode head)."""
        return self.decode_head.out_channels

    def _map_shape(self, image_shape: Sequence[int]) -> Tuple[int, int]:
        return self.backbone.grid_shape(image_shape)

    def finest_rows(self, image_shape: Sequence[int]) -> int:
        """Rows of the head's finest input level for (B, C, H, W) images."""
        levels = self.neck.level_shapes(self._map_shape(image_shape))
        return levels[self.decode_head.in_index[0]][0]

    def _head_bands(self,
                    map_shape: Tuple[int, int],
                    read_map: Optional[Any] = None) -> UPerHeadBands:

        def read_level(level: int, span: Span) -> Tensor:
            return self.neck.forward_rows(read_map, map_shape, level, span)

        return UPerHeadBands(self.decode_head, self.neck.level_shapes(map_shape), read_level,
                             self.context_window)

    def image_bands(self, image_shape: Sequence[int],
                    head_rows: int) -> Iterator[Tuple[Span, Span]]:
        """The bands of image rows and, for each, the rows of the head's finest level its
        resized logits read.

        Args:
            image_shape (Sequence[int]): (B, C, H, W).
            head_rows (int): Rows of the finest level per band, >= 1.

        Yields:
            tuple[Span, Span]: (image rows, finest-level rows).
        """
        check_head_rows(head_rows)
        height, finest_rows = image_shape[2], self.finest_rows(image_shape)
        rows_per_band = max(1, head_rows * height // finest_rows)
        align = self.decode_head.align_corners
        for span in row_bands(height, rows_per_band):
            yield span, source_span(span, finest_rows, height, align)

    def predict_memory(self,
                       image_shape: Sequence[int],
                       *,
                       band_rows: int,
                       head_rows: int,
                       buffer: str = 'memory',
                       input_in_memory: bool = True,
                       output_bytes: int = 0) -> StreamedSegmentationMemory:
        """The peak memory of :meth:`logit_bands` beyond the weights, before any work.

        Args:
            image_shape (Sequence[int]): (B, C, H, W).
            band_rows (int): The backbone's band height (patch rows).
            head_rows (int): Rows of the head's finest level per band.
            buffer (str): Where the backbone's stream and map live ('memory' or 'disk').
            input_in_memory (bool): Whether the normalised image is one tensor in memory.
            output_bytes (int): What the caller holds for the whole image (class map, logits).

        Returns:
            StreamedSegmentationMemory: The parts and the total.
        """
        backbone = self.backbone.predict_streamed_memory(
            image_shape, band_rows=band_rows, buffer=buffer, input_in_memory=input_in_memory)
        B, W = image_shape[0], image_shape[3]
        itemsize = self.backbone.patch_embed.projection.weight.element_size()
        head = self._head_bands(self._map_shape(image_shape))
        rows, finest = next(self.image_bands(image_shape, head_rows))  # the tallest band
        # The head's band, and its logits resized to the image rows (taps, then columns).
        resized = 2 * self.num_classes * (rows[1] - rows[0]) * W
        band_bytes = B * (head.band_elements(finest) + resized) * itemsize
        return StreamedSegmentationMemory(backbone, band_bytes, output_bytes, head_rows)

    def logit_bands(self,
                    image: Any,
                    plan: Optional[BandPlan] = None,
                    options: StreamOptions = StreamOptions(),
                    *,
                    output_bytes: int = 0) -> Iterator[Tuple[Span, Tensor]]:
        """The logits of the whole image, band of rows by band of rows (inference).

        Args:
            image (Tensor | array-like): (B, C, H, W) images normalised as the data
                preprocessor normalises them (a tensor, or an array read by rows; see
                :meth:`BasePlainBackbone.forward_streamed`), with the padding mask attached
                as the preprocessor attaches it, if any.
            plan (BandPlan, optional): The band heights, planned beforehand by
                :meth:`plan_bands` for this image and these options; None (the default)
                plans them from ``options``.
            options (StreamOptions): Band heights (``head_rows``: rows of the head's finest
                level), memory limit (checked against :meth:`predict_memory`), buffers and
                progress bars (the backbone's, then the head's). Defaults to picking them.
            output_bytes (int): Whole-image outputs the caller holds, for the limit.

        Yields:
            tuple[Span, Tensor]: Image rows (start, stop) and their logits (B, num_classes,
            stop - start, W), as ``decode_head.predict`` gives them for the whole image (the
            input's own size), in the weights' dtype and device.
        """
        shape, plan = self.start(image, plan, options, output_bytes=output_bytes)
        head_rows = plan.head_rows
        with torch.no_grad():
            feature_map, read_map = self.stream_feature_map(image, plan.band_rows, options)
            head = self._head_bands(tuple(feature_map.shape[2:]), read_map)
            bands = list(self.image_bands(shape, head_rows))
            with BandProgress(len(bands) + 1, options.progress, label='decode head') as bar:
                bar.describe('pyramid pooling')
                head.pool(head_rows)
                bar.advance()
                finest = head.shapes[0]
                align = self.decode_head.align_corners
                for index, (rows, finest_rows) in enumerate(bands):
                    bar.describe(f'band {index + 1}/{len(bands)}')
                    logits = head.logits(finest_rows)
                    yield rows, resize_band(logits, finest_rows[0], rows, finest[0],
                                            (shape[2], shape[3]), align)
                    bar.advance()
