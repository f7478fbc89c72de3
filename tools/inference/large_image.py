"""Segment or detect on one large image whole: a raster file in, a class-map GeoTIFF or
detections (COCO JSON, GeoJSON) out.

The image is read by windows of rows (GeoTIFF / BigTIFF with N channels of 8-bit, 16-bit or
float data, through rasterio; a ``.npy`` memory-mapped; other images through mmcv), and the
model sees it whole at its own resolution, its backbone streamed. With an mmseg segmentor
config (``mmlinear.apis.segment_large_image``: the decode head over bands of rows) ``OUT``
receives:

- ``class_map.tif``: the (H, W) classes as a tiled GeoTIFF with the source's georeference
  (a source without one gives a warning and an output without one);
- ``probabilities.tif`` (with ``--probabilities``): the softmax of the logits, one float32
  channel per class;
- ``summary.json``: the image, the predicted and measured peak memory, the time and the
  pixels per class.

With an mmdet two-stage detector config (Mask R-CNN; ``mmlinear.apis.detect_large_image``: the
RPN and RoI heads over bands of the pyramid, one NMS over the image) ``OUT`` receives:

- ``detections.json``: COCO JSON (one image, the categories, an annotation per detection
  with its box, score and RLE mask in whole-image coordinates);
- ``detections.geojson``: a FeatureCollection, one feature per detection, its mask outline
  and box corners in the raster's map coordinates (its CRS named) where it is
  georeferenced, else in pixel coordinates (column, row) with a warning;
- ``summary.json``: as above, with the detections per class instead of pixels.

The predicted memory is printed before any work; a ``--mem-limit-gb`` that cannot be met is
refused then. Existing outputs are refused without ``--force``; outputs are written to
temporary files and renamed when complete, so a failed run leaves nothing half-written.

Example (after ``make demo``):
    cfg=upernet_infvit-demo-linear_shapes-ade
    python tools/inference/large_image.py scene.tif configs/demo/$cfg.py \\
        $(cat work_dirs/demo/$cfg/last_checkpoint) --out work_dirs/large_image --mem-limit-gb 4
    cfg=mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco
    python tools/inference/large_image.py scene.tif configs/demo/$cfg.py \\
        $(cat work_dirs/demo/$cfg/last_checkpoint) --out work_dirs/large_image_det
"""
import argparse
import json
import os
import os.path as osp
import resource
import sys
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch
from mmengine.config import DictAction

from mmlinear.apis import (BUFFERS, BandPlan, detect_large_image, load_config, open_image,
                           plan_large_image, segment_large_image)
from mmlinear.apis.detection_files import coco_detections, geojson_detections
from mmlinear.apis.rasters import RasterImage, write_geotiff
from mmlinear.utils.atomic_checkpoint import write_file_atomic
from mmlinear.utils.atomic_write import atomic_output

#: The outputs of each task, in the order they are written (the summary last).
OUTPUTS = {
    'segmentation': ['class_map.tif', 'summary.json'],
    'detection': ['detections.json', 'detections.geojson', 'summary.json'],
}


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('image', help='the image: a GeoTIFF / BigTIFF, a .npy or an image file')
    parser.add_argument(
        'config',
        help='config of an mmseg segmentor (UPerHead) or an mmdet two-stage detector (Mask '
        'R-CNN), with an mmlinear backbone and the simple pyramid neck')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--out', required=True, help='folder of the outputs')
    parser.add_argument(
        '--mem-limit-gb',
        type=float,
        help='pick the bands so that the predicted peak fits (refused before any work if '
        'none does)')
    parser.add_argument('--force', action='store_true', help='replace existing outputs')
    parser.add_argument(
        '--probabilities',
        action='store_true',
        help='also write the class probabilities (segmentation)')
    parser.add_argument(
        '--score-thr',
        type=float,
        default=0.05,
        help='keep detections scoring at least this (detection; default 0.05)')
    parser.add_argument(
        '--buffer',
        default='memory',
        choices=BUFFERS,
        help="where the backbone's stream, the pyramid and the outputs live ('disk': mapped "
        'temporary files)')
    parser.add_argument('--device', default='cuda:0' if torch.cuda.is_available() else 'cpu')
    parser.add_argument(
        '--context-window',
        type=int,
        nargs='+',
        metavar='CELLS',
        help="segmentation: the window (rows [columns]) of UPerHead's pyramid pooling around "
        'each position, in cells of its top input level (the training crop over its stride, '
        'e.g. 8 for the demo UperNet); default: the head\'s own (the whole image for '
        "mmseg's UPerHead)")
    parser.add_argument(
        '--cfg-options', nargs='+', action=DictAction, help='override config settings')
    return parser.parse_args(argv)


def config_task(model_cfg: Any) -> Optional[str]:
    """'segmentation' for a segmentor's model config (a decode head), 'detection' for a
    two-stage detector's (RoI heads), else None."""
    if 'decode_head' in model_cfg:
        return 'segmentation'
    if 'roi_head' in model_cfg:
        return 'detection'
    return None


def planned_outputs(args: argparse.Namespace, task: str) -> List[str]:
    names = list(OUTPUTS[task])
    if task == 'segmentation' and args.probabilities:
        names.insert(1, 'probabilities.tif')
    return [osp.join(args.out, name) for name in names]


def write_json(path: str, data: Any) -> None:
    write_file_atomic(path, json.dumps(data).encode())


def context_window(args: argparse.Namespace) -> Optional[Tuple[int, ...]]:
    """``--context-window`` as segment_large_image takes it: one side for both, or (rows,
    columns)."""
    window = args.context_window
    return None if window is None else tuple(window) if len(window) > 1 else window[0]


def plan_image_bands(args: argparse.Namespace, model: torch.nn.Module, image: Any) -> BandPlan:
    """Pick the band heights (the tallest whose predicted peak fits ``--mem-limit-gb``),
    predict the peak memory with them and print it with the image, before any work.

    Args:
        args (argparse.Namespace): The command line (``mem_limit_gb``, ``buffer``,
            ``probabilities``, ``image``).
        model (nn.Module): The segmentor or detector.
        image (array-like): The (H, W, C) or (H, W) image, read by rows (never held whole).

    Returns:
        BandPlan: The backbone's and the heads' band heights, and the predicted memory.
    """
    window = {'context_window': context_window(args)} if args.context_window else {}
    plan = plan_large_image(
        model,
        image,
        mem_limit_gb=args.mem_limit_gb,
        buffer=args.buffer,
        return_logits=getattr(args, 'probabilities', False),
        **window)
    height, width = image.shape[:2]
    channels = image.shape[2] if len(image.shape) == 3 else 1
    print(
        f'{args.image}: {height} x {width}, {channels} channels ({image.dtype}); predicted '
        f'peak {plan.memory.describe()}',
        flush=True)
    return plan


def segment(args: argparse.Namespace, model: torch.nn.Module, image: Any, georeference: Any,
            outputs: List[str]) -> Tuple[Any, Dict[str, Any]]:
    """Segment the image and write the class map (and probabilities).

    Returns:
        tuple: The band plan (with the predicted memory) and what the summary adds.
    """
    height = image.shape[0]
    plan = plan_image_bands(args, model, image)
    result = segment_large_image(
        model,
        image,
        plan=plan,
        return_logits=args.probabilities,
        buffer=args.buffer,
        progress=True,
        context_window=context_window(args))
    class_map, logits = result if args.probabilities else (result, None)
    os.makedirs(args.out, exist_ok=True)
    with atomic_output(outputs[0]) as partial:
        write_geotiff(partial, class_map, georeference)
    if logits is not None:
        for start_row in range(0, height, 1024):  # softmax in place, a block of rows at a time
            block = logits[:, start_row:start_row + 1024]
            block.copy_(block.softmax(0))
        with atomic_output(outputs[1]) as partial:
            write_geotiff(partial, logits, georeference)
    counts = torch.bincount(class_map.flatten().long(), minlength=model.decode_head.out_channels)
    return plan, dict(
        band_rows=plan.band_rows, head_rows=plan.head_rows, pixels_per_class=counts.tolist())


def detect(args: argparse.Namespace, model: torch.nn.Module, image: Any, georeference: Any,
           outputs: List[str]) -> Tuple[Any, Dict[str, Any]]:
    """Detect on the image and write the detections as COCO JSON and GeoJSON.

    Returns:
        tuple: The band plan (with the predicted memory) and what the summary adds.
    """
    height, width = image.shape[:2]
    plan = plan_image_bands(args, model, image)
    instances = detect_large_image(
        model, image, plan=plan, score_thr=args.score_thr, buffer=args.buffer,
        progress=True).pred_instances.cpu()
    classes = list(model.dataset_meta.get('classes', ())) if model.dataset_meta else []
    os.makedirs(args.out, exist_ok=True)
    write_json(outputs[0],
               coco_detections(instances, classes, osp.basename(args.image), height, width))
    write_json(outputs[1], geojson_detections(instances, classes, georeference))
    counts = torch.bincount(instances.labels, minlength=len(classes))
    return plan, dict(
        band_rows=plan.band_rows,
        head_rows=plan.head_rows,
        score_thr=args.score_thr,
        detections_per_class=counts.tolist())


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options)
    task = config_task(cfg.model)
    if task is None:
        sys.exit(f'{args.config} is neither a segmentor config (its model has no decode_head) '
                 f'nor a two-stage detector config (no roi_head); large images are segmented '
                 f'with an mmseg UperNet or detected with an mmdet Mask R-CNN')
    if args.context_window and (task != 'segmentation' or len(args.context_window) > 2):
        sys.exit(f'--context-window takes one or two sizes (rows [columns]) and a segmentor '
                 f'config; got {args.context_window} with a {task} config')
    outputs = planned_outputs(args, task)
    existing = [path for path in outputs if osp.exists(path)]
    if existing and not args.force:
        sys.exit(f'outputs exist: {", ".join(existing)}; use --force to replace them')
    try:
        image = open_image(args.image)
    except (FileNotFoundError, ValueError) as error:
        sys.exit(str(error))
    georeference = image.georeference if isinstance(image, RasterImage) else None
    if georeference is None:
        coordinates = ' (detections in pixel coordinates)' if task == 'detection' else ''
        warnings.warn(f'{args.image} has no georeference: the outputs are written without '
                      f'one{coordinates}')
    if task == 'segmentation':
        from mmseg.apis import init_model
    else:
        from mmdet.apis import init_detector as init_model
    model = init_model(cfg, args.checkpoint, device=args.device)
    run = segment if task == 'segmentation' else detect
    start = time.perf_counter()
    try:
        plan, results = run(args, model, image, georeference, outputs)
    except ValueError as error:
        sys.exit(str(error))
    seconds = time.perf_counter() - start
    summary = dict(
        image=args.image,
        shape=[
            int(image.shape[0]),
            int(image.shape[1]),
            int(image.shape[2]) if len(image.shape) == 3 else 1
        ],
        dtype=str(image.dtype),
        georeferenced=georeference is not None,
        config=args.config,
        checkpoint=args.checkpoint,
        task=task,
        seconds=round(seconds, 2),
        predicted_peak_gb=round(plan.predicted_peak_gb, 3),
        peak_rss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 2**30, 3),
        **results,
        outputs=outputs)
    write_file_atomic(outputs[-1], json.dumps(summary, indent=2).encode())
    verb = 'segmented' if task == 'segmentation' else 'detected'
    print(f'{verb} in {seconds:.1f} s; wrote {", ".join(outputs)}')


if __name__ == '__main__':
    main()
