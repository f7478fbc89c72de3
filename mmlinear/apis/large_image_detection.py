"""Instance detection on a whole image of any size with an mmdet two-stage detector, seeing
the whole image at once (no slicing into tiles), with memory bounded by bands of rows."""
import os
from typing import Any, Optional, Union

from torch import nn

from mmlinear.models.streaming import BUFFERS
from mmlinear.models.streaming.band_planner import BandPlan, StreamOptions
from mmlinear.models.streaming.detection import StreamedDetection
from mmlinear.models.utils import check_choice
from mmlinear.utils.deprecation import renamed_arguments
from .large_image_inputs import open_image, whole_image_rows


@renamed_arguments(chunk_rows='band_rows')
def detect_large_image(model: nn.Module,
                       source: Union[str, os.PathLike, Any],
                       *,
                       plan: Optional[BandPlan] = None,
                       mem_limit_gb: Optional[float] = None,
                       score_thr: float = 0.0,
                       band_rows: Optional[int] = None,
                       head_rows: Optional[int] = None,
                       buffer: str = 'memory',
                       buffer_dir: Optional[str] = None,
                       progress: Optional[bool] = None) -> Any:
    """Detect the instances of one image of any size whole, as mmdet's ``inference_detector``
    would at the image's own resolution.

    The backbone streams over the image, the simple pyramid is built band by band, the RPN
    runs over bands of each level with its proposals merged over the image (one NMS), and the
    RoI heads read their features from the rows of the pyramid the RoIs cover (see
    docs/design.md, "Whole-image detection"). Masks come as COCO RLE in whole-image
    coordinates (never as whole-image binary masks).

    The image is detected at its own resolution: a resizing transform in the config's test
    pipeline is skipped, with a warning, and so is the data preprocessor's padding to a
    multiple (mmlinear backbones take any size).

    Args:
        model (nn.Module): An mmdet two-stage detector (e.g. from ``mmdet.apis.init_detector``)
            with an mmlinear backbone, the ``SimpleFeaturePyramid`` neck, an ``RPNHead`` and a
            ``StandardRoIHead`` (Mask R-CNN or Faster R-CNN).
        source (str | PathLike | array-like): An image file, or an (H, W, C) / (H, W) array
            taken as ``inference_detector`` takes an array (BGR for mmcv-read images); a numpy
            memmap (or a ``.npy`` path, mapped) or a raster file is read by rows.
        plan (BandPlan, optional): The band heights, from :func:`plan_large_image` with this
            model, image and options (it has the predicted peak memory); None (the default)
            plans them from ``mem_limit_gb``, ``band_rows`` and ``head_rows``.
        mem_limit_gb (float, optional): Pick the tallest bands whose predicted peak fits;
            refused before any work, with the predicted figure, when none does.
        score_thr (float): Keep detections scoring at least this (the model's own
            ``score_thr`` applies first). Defaults to 0.
        band_rows (int, optional): The backbone's band height (patch rows;
            deprecated spelling ``chunk_rows``).
        head_rows (int, optional): Rows of a pyramid level per band (neck, RPN, RoI reads).
        buffer (str): 'memory', or 'disk': the backbone's stream and map and the pyramid in
            memory-mapped temporary files (removed with them). Defaults to 'memory'.
        buffer_dir (str, optional): The folder of 'disk' buffers.
        progress (bool, optional): Show progress bars; None shows them once a run takes a
            few seconds.

    Returns:
        DetDataSample: ``pred_instances`` with ``bboxes`` (N, 4) (x1, y1, x2, y2 in image
        pixels), ``scores`` (N,), ``labels`` (N,), best first, and for a mask head ``masks``:
        N COCO RLE dicts (``size`` [H, W], ``counts`` text), which mmdet's ``CocoMetric``
        takes as they are; ``metainfo`` holds ``img_shape`` and ``ori_shape``.
    """
    from mmdet.structures import DetDataSample
    check_choice('buffer', buffer, BUFFERS)
    streamed = StreamedDetection(model)
    if not isinstance(score_thr, (int, float)) or not 0 <= score_thr <= 1:
        raise ValueError(f'score_thr must be a number in [0, 1], got {score_thr!r}')
    image = open_image(source)
    preprocessor = model.data_preprocessor
    skipped_padding = None
    if getattr(preprocessor, 'pad_size_divisor', 1) > 1:
        skipped_padding = (f'detect_large_image does not pad: the data preprocessor\'s '
                           f'pad_size_divisor={preprocessor.pad_size_divisor} is skipped')
    rows, height, width = whole_image_rows(model, image, streamed.in_channels,
                                           'detect_large_image detects', skipped_padding)
    results = streamed.predict(
        rows, plan, StreamOptions(band_rows, head_rows, mem_limit_gb, buffer, buffer_dir, progress))
    if score_thr > 0:
        results = results[results.scores >= score_thr]
    sample = DetDataSample(metainfo=dict(img_shape=(height, width), ori_shape=(height, width)))
    sample.pred_instances = results
    return sample
