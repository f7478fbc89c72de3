"""Semantic segmentation of a whole image of any size with an mmseg model, seeing the whole
image at once (no sliding window), with memory bounded by bands of rows."""
import os
from typing import Any, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from mmlinear.models.decode_heads.context_window_uper_head import context_window_of
from mmlinear.models.streaming import BUFFERS, allocate_buffer
from mmlinear.models.streaming.band_planner import BandPlan, StreamOptions
from mmlinear.models.streaming.segmentation import StreamedSegmentation
from mmlinear.models.utils import check_choice
from mmlinear.models.utils.windowed_pyramid_pooling import ContextWindow
from mmlinear.utils.deprecation import renamed_arguments
from .large_image_inputs import open_image, whole_image_rows
from .large_image_plan import class_map_dtype, output_bytes


@renamed_arguments(chunk_rows='band_rows')
def segment_large_image(
        model: nn.Module,
        source: Union[str, os.PathLike, Any],
        *,
        plan: Optional[BandPlan] = None,
        mem_limit_gb: Optional[float] = None,
        return_logits: bool = False,
        band_rows: Optional[int] = None,
        head_rows: Optional[int] = None,
        buffer: str = 'memory',
        buffer_dir: Optional[str] = None,
        progress: Optional[bool] = None,
        context_window: ContextWindow = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    """Segment one image of any size whole, as mmseg's ``mode='whole'`` inference would.

    The backbone streams over the image, the neck and UPerHead run over bands of rows (their
    pyramid pooling over the whole top map or a window around each position), and each band
    of logits is resized to the image's rows and turned into classes, so memory is bounded by
    the bands, not the image
    (see docs/design.md, "Whole-image segmentation"). The logits equal mmseg's
    ``inference_model`` in mode 'whole' up to rounding.

    The image is segmented at its own resolution: a resizing transform in the config's test
    pipeline is skipped, with a warning (resizing a huge image to the training scale would
    lose what it is segmented whole for); so is padding asked of the data preprocessor at
    test time (mmlinear backbones take any size).

    Args:
        model (nn.Module): An mmseg ``EncoderDecoder`` (e.g. from ``mmseg.apis.init_model``)
            with an mmlinear backbone, the ``SimpleFeaturePyramid`` neck and a ``UPerHead``.
        source (str | PathLike | array-like): An image file, or an (H, W, C) / (H, W) array
            taken as ``inference_model`` takes an array (channels in the order the data
            preprocessor expects: BGR for mmcv-read images); a numpy memmap (or a ``.npy``
            path, mapped) is read by rows.
        plan (BandPlan, optional): The band heights, from :func:`plan_large_image` with this
            model, image and options (it has the predicted peak memory); None (the default)
            plans them from ``mem_limit_gb``, ``band_rows`` and ``head_rows``.
        mem_limit_gb (float, optional): Pick the tallest bands whose predicted peak fits;
            refused before any work, with the predicted figure, when none does.
        return_logits (bool): Also return the logits. Defaults to False.
        band_rows (int, optional): The backbone's band height (patch rows;
            deprecated spelling ``chunk_rows``).
        head_rows (int, optional): Rows of the decode head's finest level per band.
        buffer (str): 'memory', or 'disk': the backbone's stream, its map and the outputs in
            memory-mapped temporary files (removed with them). Defaults to 'memory'.
        buffer_dir (str, optional): The folder of 'disk' buffers.
        progress (bool, optional): Show progress bars; None shows them once a run takes a
            few seconds.
        context_window (None | str | int | tuple[int, int]): The window (rows, columns) of
            the head's pyramid pooling around each position, in cells of the head's top
            input level (the training crop over that level's stride, e.g. 128 / 16 = 8 for
            the demo UperNet): positions see the context they were trained with instead of
            the whole image. 'whole' pools the whole image (exact global context) whatever
            the head's setting. None (default) takes the head's own setting
            (``ContextWindowUPerHead.context_window``, e.g. 8 in the demo InfViT UperNet's
            config; the whole image for mmseg's ``UPerHead``).

    Returns:
        Tensor | tuple[Tensor, Tensor]: The (H, W) class map (uint8 for up to 256 classes,
        else int32; 0/1 for a single-class sigmoid head, thresholded as mmseg does), and with
        ``return_logits`` the (num_classes, H, W) logits (float32), both CPU tensors.
    """
    check_choice('buffer', buffer, BUFFERS)
    image = open_image(source)
    preprocessor = model.data_preprocessor
    skipped_padding = None
    if getattr(preprocessor, 'test_cfg', None):
        skipped_padding = (f'segment_large_image does not pad at test time: the data '
                           f'preprocessor\'s test_cfg {dict(preprocessor.test_cfg)} is skipped')
    streamed = StreamedSegmentation(model, context_window_of(model.decode_head, context_window))
    rows, H, W = whole_image_rows(model, image, streamed.in_channels,
                                  'segment_large_image segments', skipped_padding)
    num_classes = streamed.num_classes
    map_dtype = class_map_dtype(num_classes)
    held = output_bytes(num_classes, H, W, return_logits, buffer)
    class_map: Optional[Tensor] = None
    logits: Optional[Tensor] = None
    threshold = getattr(model.decode_head, 'threshold', None)
    for (start, stop), band in streamed.logit_bands(
            rows,
            plan,
            StreamOptions(band_rows, head_rows, mem_limit_gb, buffer, buffer_dir, progress),
            output_bytes=held):
        if class_map is None:
            # Allocated once the backbone has run, so that its peak and theirs never add up.
            class_map = allocate_buffer((H, W), map_dtype, buffer, buffer_dir)
            if return_logits:
                logits = allocate_buffer((num_classes, H, W), torch.float32, buffer, buffer_dir)
        band = band[0]
        if num_classes > 1:
            classes = band.argmax(0)
        else:  # mmseg's binary head: the sigmoid against the head's threshold
            classes = (band[0].sigmoid() > threshold)
        class_map[start:stop] = classes.to(map_dtype).cpu()
        if logits is not None:
            logits[:, start:stop] = band.float().cpu()
    return (class_map, logits) if return_logits else class_map
