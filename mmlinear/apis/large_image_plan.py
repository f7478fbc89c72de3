"""The bands a whole-image segmentation or detection will run with, and its predicted peak
memory, known before any work: what :func:`segment_large_image` and
:func:`detect_large_image` take as ``plan``, and what a command line prints first."""
import os
from typing import Any, Optional, Union

import torch
from torch import nn

from mmlinear.models.data_preprocessors.normalized_rows import NormalizedRows
from mmlinear.models.streaming import BUFFERS
from mmlinear.models.streaming.band_planner import BandPlan, BandPlanner
from mmlinear.models.utils import check_choice
from mmlinear.utils.deprecation import renamed_arguments
from .large_image_inputs import open_image


def class_map_dtype(num_classes: int) -> torch.dtype:
    """The dtype of a class map: uint8 for up to 256 classes, else int32."""
    return torch.uint8 if num_classes <= 256 else torch.int32


def output_bytes(num_classes: int,
                 height: int,
                 width: int,
                 return_logits: bool,
                 buffer: str = 'memory') -> int:
    """Bytes of the whole-image outputs of :func:`segment_large_image` held in memory: the
    class map, and the float32 logits with ``return_logits``; none in 'disk' buffers."""
    if buffer != 'memory':
        return 0
    total = height * width * class_map_dtype(num_classes).itemsize
    return total + (num_classes * height * width * 4 if return_logits else 0)


def band_planner(model: nn.Module, context_window: Optional[Any] = None) -> BandPlanner:
    """The streamed form of an mmseg segmentor (it has a ``decode_head``) or an mmdet
    two-stage detector (a ``roi_head``), checked as the whole-image APIs check it; a
    segmentor's pyramid pooling over ``context_window`` (see :func:`segment_large_image`).

    Raises:
        TypeError: A model that is neither, or whose parts do not stream (naming them).
    """
    if hasattr(model, 'decode_head'):
        from mmlinear.models.decode_heads.context_window_uper_head import context_window_of
        from mmlinear.models.streaming.segmentation import StreamedSegmentation
        return StreamedSegmentation(model, context_window_of(model.decode_head, context_window))
    if hasattr(model, 'roi_head'):
        from mmlinear.models.streaming.detection import StreamedDetection
        return StreamedDetection(model)
    raise TypeError(f'whole-image inference takes an mmseg segmentor (with a decode_head) or '
                    f'an mmdet two-stage detector (with a roi_head), got {type(model).__name__}')


@renamed_arguments(chunk_rows='band_rows')
def plan_large_image(model: nn.Module,
                     source: Union[str, os.PathLike, Any],
                     *,
                     mem_limit_gb: Optional[float] = None,
                     band_rows: Optional[int] = None,
                     head_rows: Optional[int] = None,
                     buffer: str = 'memory',
                     return_logits: bool = False,
                     context_window: Optional[Any] = None) -> BandPlan:
    """The band heights :func:`segment_large_image` or :func:`detect_large_image` would pick
    for an image with these options, and the peak memory predicted with them, before any
    work (only the image's header is read).

    Args:
        model (nn.Module): An mmseg segmentor or an mmdet two-stage detector, as the
            whole-image APIs take it.
        source (str | PathLike | array-like): The image, as the whole-image APIs take it.
        mem_limit_gb (float, optional): Pick the tallest bands whose predicted peak fits;
            refused (ValueError, with the predicted figure) when none does.
        band_rows (int, optional): The backbone's band height (patch rows;
            deprecated spelling ``chunk_rows``).
        head_rows (int, optional): Rows of the heads' finest level per band.
        buffer (str): 'memory' or 'disk', as the APIs take it. Defaults to 'memory'.
        return_logits (bool): Segmentation: whether the logits will be returned too (they
            are held in memory with ``buffer='memory'``). Defaults to False.
        context_window (None | str | int | tuple[int, int]): Segmentation: the pyramid
            pooling's window, as :func:`segment_large_image` takes it.

    Returns:
        BandPlan: ``band_rows``, ``head_rows`` and ``memory`` (the predicted peak, with
        ``describe()``; ``predicted_peak_gb`` in GB), to pass on as ``plan``.
    """
    check_choice('buffer', buffer, BUFFERS)
    planner = band_planner(model, context_window)
    shape = NormalizedRows.batch_shape(open_image(source))
    memory_options = {}
    if planner.task == 'segmentation':
        memory_options['output_bytes'] = output_bytes(planner.num_classes, shape[2], shape[3],
                                                      return_logits, buffer)
    return planner.plan_bands(
        shape,
        band_rows=band_rows,
        head_rows=head_rows,
        mem_limit_gb=mem_limit_gb,
        buffer=buffer,
        input_in_memory=False,
        **memory_options)
