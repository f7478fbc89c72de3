"""Segment or detect on large images whole, one or a folder of them: raster files in,
class-map GeoTIFFs or detections (COCO JSON, GeoJSON) out.

Each image is read by windows of rows (GeoTIFF / BigTIFF with N channels of 8-bit, 16-bit or
float data, through rasterio; a ``.npy`` memory-mapped; other images through mmcv), and the
model sees it whole at its own resolution, its backbone streamed. With an mmseg segmentor
config (``mmlinear.apis.segment_large_image``: the decode head over bands of rows) an image's
output folder receives:

- ``class_map.tif``: the (H, W) classes as a tiled GeoTIFF with the source's georeference
  (a source without one gives a warning and an output without one);
- ``probabilities.tif`` (with ``--probabilities``): the softmax of the logits, one float32
  channel per class;
- ``summary.json``: the image, the predicted and measured peak memory, the time and the
  pixels per class.

With an mmdet two-stage detector config (Mask R-CNN; ``mmlinear.apis.detect_large_image``: the
RPN and RoI heads over bands of the pyramid, one NMS over the image) it receives:

- ``detections.json``: COCO JSON (one image, the categories, an annotation per detection
  with its box, score and RLE mask in whole-image coordinates);
- ``detections.geojson``: a FeatureCollection, one feature per detection, its mask outline
  and box corners in the raster's map coordinates (its CRS named) where it is
  georeferenced, else in pixel coordinates (column, row) with a warning;
- ``summary.json``: as above, with the detections per class instead of pixels.

The predicted memory is printed before any work; a ``--mem-limit-gb`` that cannot be met is
refused then. Outputs are written to temporary files and renamed when complete, the summary
last, so a failed or killed run leaves nothing half-written under a final name.

One image file: its outputs go into ``OUT`` itself, and existing ones are refused without
``--force``. Several images, a folder (its readable images, or the files ``--pattern``
matches) or a list file (``.txt``, one path a line) make a run (``mmlinear.apis.run_batch``):
each image gets ``OUT/<name>/`` (the file name without its suffix; where names repeat, each
takes ``-`` and 8 hex digits of the SHA-1 of its real path), ``OUT/manifest.jsonl`` records
each image (status, seconds, peak and predicted memory, outputs, error), an image that fails
(unreadable, wrong channel count, over ``--mem-limit-gb``) is recorded and the run goes on
(exit status 1, the last line naming the failures), and the same command run again skips the
images whose outputs are complete (``--force`` redoes them). Under ``torchrun`` or ``srun``
(``--launcher pytorch|slurm``) the processes share the images by pixels; SIGTERM or SIGUSR1
lets the current image finish and stops the run with exit status 75, to be run again.

Example (after ``make demo``):
    cfg=upernet_infvit-demo-linear_shapes-ade
    python tools/inference/large_image.py scene.tif configs/demo/$cfg.py \\
        $(cat work_dirs/demo/$cfg/last_checkpoint) --out work_dirs/large_image --mem-limit-gb 4
    cfg=mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco
    python tools/inference/large_image.py scene.tif configs/demo/$cfg.py \\
        $(cat work_dirs/demo/$cfg/last_checkpoint) --out work_dirs/large_image_det
    # every scene of make demo-large (not its 1-channel label rasters), one folder each
    cfg=upernet_infvit-demo-linear_shapes-ade
    python tools/inference/large_image.py data/shapes_large --pattern '*scene_*.tif' \\
        configs/demo/$cfg.py $(cat work_dirs/demo/$cfg/last_checkpoint) \\
        --out work_dirs/large_image_many
"""
import argparse
import contextlib
import json
import os
import os.path as osp
import sys
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import torch
from mmengine.config import DictAction

from mmlinear.apis import (BUFFERS, WHOLE_MAP, BandPlan, detect_large_image, load_config,
                           open_image, plan_large_image, segment_large_image)
from mmlinear.apis.batch_run import BatchResult, StopSignals, run_batch
from mmlinear.apis.detection_files import coco_detections, geojson_detections
from mmlinear.apis.image_batch import collect_inputs, is_batch
from mmlinear.apis.rasters import RasterImage, write_geotiff
from mmlinear.apis.run_manifest import MANIFEST
from mmlinear.cli import close_launcher, start_gloo_group
from mmlinear.utils.atomic_checkpoint import write_file_atomic
from mmlinear.utils.atomic_write import atomic_output
from mmlinear.utils.peak_memory import cpu_peak, reset_cpu_peak

#: The outputs of each task, in the order they are written (the summary last).
OUTPUTS = {
    'segmentation': ['class_map.tif', 'summary.json'],
    'detection': ['detections.json', 'detections.geojson', 'summary.json'],
}


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    # The description is the docstring's first paragraph, whole.
    parser = argparse.ArgumentParser(description=' '.join(__doc__.split('\n\n')[0].split()))
    parser.add_argument(
        'images',
        nargs='+',
        metavar='IMAGE',
        help='an image (a GeoTIFF / BigTIFF, an OME-TIFF, a whole-slide image, a .npy or an '
        'image file), a folder of them or a list file (.txt, one path a line); several may be '
        'given')
    parser.add_argument(
        'config',
        help='config of an mmseg segmentor (UPerHead) or an mmdet two-stage detector (Mask '
        'R-CNN), with an mmlinear backbone and the simple pyramid neck')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--out',
        required=True,
        help='folder of the outputs (of a run of several images: one folder per image in it, '
        'and manifest.jsonl)')
    parser.add_argument(
        '--pattern',
        help="the files of a folder to run, a glob relative to it ('*.tif', '**/*.ome.tif'); "
        'default: the files of the folder itself that have a reader')
    parser.add_argument(
        '--mem-limit-gb',
        type=float,
        help='pick the bands so that the predicted peak fits (refused before any work if '
        'none does)')
    parser.add_argument(
        '--force',
        action='store_true',
        help='replace existing outputs (a run of several images: redo the complete ones too)')
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
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm'],
        default='none',
        help='share the images between the processes of a torchrun (pytorch) or srun (slurm) '
        'launch')
    parser.add_argument(
        '--device', help='default: cuda:<LOCAL_RANK> where CUDA is available, else cpu')
    parser.add_argument(
        '--context-window',
        nargs='+',
        metavar='CELLS',
        help="segmentation: the window (rows [columns]) of UPerHead's pyramid pooling around "
        'each position, in cells of its top input level (the training crop over its stride, '
        "e.g. 8 for the demo UperNet), or 'whole' for the whole image (exact global "
        "context); default: the head's own (8 in the demo InfViT UperNet's config, the whole "
        "image for mmseg's UPerHead)")
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


def planned_outputs(args: argparse.Namespace, task: str, folder: str) -> List[str]:
    """The files an image's run writes into ``folder``, in order (the summary last)."""
    names = list(OUTPUTS[task])
    if task == 'segmentation' and args.probabilities:
        names.insert(1, 'probabilities.tif')
    return [osp.join(folder, name) for name in names]


def write_json(path: str, data: Any) -> None:
    write_file_atomic(path, json.dumps(data).encode())


def context_window(args: argparse.Namespace) -> Union[None, str, int, Tuple[int, ...]]:
    """``--context-window`` as segment_large_image takes it: 'whole', one side for both, or
    (rows, columns); None when not given (the head's own)."""
    window = args.context_window
    if window is None:
        return None
    if window == [WHOLE_MAP]:
        return WHOLE_MAP
    sides = tuple(int(side) if side.isdigit() else side for side in window)
    return sides if len(sides) > 1 else sides[0]


def plan_image_bands(args: argparse.Namespace, model: torch.nn.Module, image: Any,
                     image_path: str) -> BandPlan:
    """Pick the band heights (the tallest whose predicted peak fits ``--mem-limit-gb``),
    predict the peak memory with them and print it with the image, before any work.

    Args:
        args (argparse.Namespace): The command line (``mem_limit_gb``, ``buffer``,
            ``probabilities``).
        model (nn.Module): The segmentor or detector.
        image (array-like): The (H, W, C) or (H, W) image, read by rows (never held whole).
        image_path (str): Its file, for the line printed.

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
        f'{image_path}: {height} x {width}, {channels} channels ({image.dtype}); predicted '
        f'peak {plan.memory.describe()}',
        flush=True)
    return plan


def segment(args: argparse.Namespace, model: torch.nn.Module, image: Any, image_path: str,
            georeference: Any, outputs: List[str]) -> Tuple[Any, Dict[str, Any]]:
    """Segment the image and write the class map (and probabilities).

    Returns:
        tuple: The band plan (with the predicted memory) and what the summary adds.
    """
    height = image.shape[0]
    plan = plan_image_bands(args, model, image, image_path)
    result = segment_large_image(
        model,
        image,
        plan=plan,
        return_logits=args.probabilities,
        buffer=args.buffer,
        progress=True,
        context_window=context_window(args))
    class_map, logits = result if args.probabilities else (result, None)
    os.makedirs(osp.dirname(outputs[0]), exist_ok=True)
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


def detect(args: argparse.Namespace, model: torch.nn.Module, image: Any, image_path: str,
           georeference: Any, outputs: List[str]) -> Tuple[Any, Dict[str, Any]]:
    """Detect on the image and write the detections as COCO JSON and GeoJSON.

    Returns:
        tuple: The band plan (with the predicted memory) and what the summary adds.
    """
    height, width = image.shape[:2]
    plan = plan_image_bands(args, model, image, image_path)
    instances = detect_large_image(
        model, image, plan=plan, score_thr=args.score_thr, buffer=args.buffer,
        progress=True).pred_instances.cpu()
    classes = list(model.dataset_meta.get('classes', ())) if model.dataset_meta else []
    os.makedirs(osp.dirname(outputs[0]), exist_ok=True)
    write_json(outputs[0],
               coco_detections(instances, classes, osp.basename(image_path), height, width))
    write_json(outputs[1], geojson_detections(instances, classes, georeference))
    counts = torch.bincount(instances.labels, minlength=len(classes))
    return plan, dict(
        band_rows=plan.band_rows,
        head_rows=plan.head_rows,
        score_thr=args.score_thr,
        detections_per_class=counts.tolist())


def run_image(args: argparse.Namespace, task: str, model: torch.nn.Module, image_path: str,
              folder: str) -> Dict[str, Any]:
    """Segment or detect on one image and write its outputs into ``folder``, the summary last.

    Returns:
        dict: The summary (also in ``summary.json``).

    Raises:
        FileNotFoundError: No such image.
        ValueError: An image that cannot be read or run (its reader's error, a channel count
            the model was not built for, a ``--mem-limit-gb`` that cannot be met).
    """
    outputs = planned_outputs(args, task, folder)
    image = open_image(image_path)
    georeference = image.georeference if isinstance(image, RasterImage) else None
    if georeference is None:
        coordinates = ' (detections in pixel coordinates)' if task == 'detection' else ''
        warnings.warn(f'{image_path} has no georeference: the outputs are written without '
                      f'one{coordinates}')
    on_gpu = next(model.parameters()).is_cuda
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
        gpu_baseline = torch.cuda.memory_allocated()
    baseline, method = reset_cpu_peak()  # so that each image of a run has its own peak
    run = segment if task == 'segmentation' else detect
    start = time.perf_counter()
    plan, results = run(args, model, image, image_path, georeference, outputs)
    seconds = time.perf_counter() - start
    rss_peak = cpu_peak(method)
    # What the image took beyond what the process held before it (the weights, the
    # interpreter): what the memory model predicts.
    image_peak = torch.cuda.max_memory_allocated() - gpu_baseline if on_gpu else rss_peak - baseline
    summary = dict(
        image=image_path,
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
        # The process's resident set at its peak, everything included.
        peak_rss_gb=round(rss_peak / 2**30, 3),
        # The image's peak on the device the model ran on (GPU allocations, or the resident
        # set) above what the process held before the image.
        peak_memory_gb=round(max(image_peak, 0) / 2**30, 3),
        **results,
        outputs=outputs)
    write_file_atomic(outputs[-1], json.dumps(summary, indent=2).encode())
    return summary


def run_one_image(args: argparse.Namespace, task: str, model: torch.nn.Module) -> None:
    """One image, its outputs in ``--out`` itself (existing ones refused without --force);
    exits with its error if it fails."""
    image_path = args.images[0]
    outputs = planned_outputs(args, task, args.out)
    existing = [path for path in outputs if osp.exists(path)]
    if existing and not args.force:
        sys.exit(f'outputs exist: {", ".join(existing)}; use --force to replace them')
    try:
        summary = run_image(args, task, model, image_path, args.out)
    except (FileNotFoundError, ValueError) as error:
        sys.exit(str(error))
    verb = 'segmented' if task == 'segmentation' else 'detected'
    print(f'{verb} in {summary["seconds"]:.1f} s; wrote {", ".join(outputs)}')


def report(result: BatchResult, out: str) -> Optional[str]:
    """The last line of a run of several images (on stderr where it did not succeed)."""
    done = sum(r['status'] == 'done' for r in result.records)
    skipped = sum(r['status'] == 'skipped' for r in result.records)
    manifest = osp.join(out, MANIFEST)
    if result.stopped_by:
        pending = sum(r['status'] == 'pending' for r in result.records)
        return (f'stopped by {result.stopped_by} after the images in progress: {pending} of '
                f'{result.total} inputs left to do (exit status {result.exit_code}); run the '
                f'same command again to go on; manifest: {manifest}')
    if result.failed:
        failures = '; '.join(f'{r["input"]} ({r["error"]})' for r in result.failures)
        return f'{result.failed} of {result.total} inputs failed: {failures}; manifest: {manifest}'
    print(f'all {result.total} inputs complete ({done} done now, {skipped} skipped as complete '
          f'from an earlier run); manifest: {manifest}')
    return None


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    batch = is_batch(args.images)
    # A run of several images stops on SIGTERM / SIGUSR1 with the requeue status from here on:
    # one that comes while the model loads (or the processes meet) leaves every image pending
    # instead of killing the process with a status the job scripts do not requeue.
    with StopSignals() if batch else contextlib.nullcontext() as stop_signals:
        run(args, batch, stop_signals)


def run(args: argparse.Namespace, batch: bool, stop_signals: Optional[StopSignals]) -> None:
    """The command: ``main`` without the argument parsing, stop signals held for a batch."""
    cfg = load_config(args.config, args.cfg_options)
    task = config_task(cfg.model)
    if task is None:
        sys.exit(f'{args.config} is neither a segmentor config (its model has no decode_head) '
                 f'nor a two-stage detector config (no roi_head); large images are segmented '
                 f'with an mmseg UperNet or detected with an mmdet Mask R-CNN')
    if args.context_window and (task != 'segmentation' or len(args.context_window) > 2):
        sys.exit(f'--context-window takes one or two sizes (rows [columns]) or {WHOLE_MAP!r}, '
                 f'and a segmentor config; got {args.context_window} with a {task} config')
    if not batch and args.launcher != 'none':
        sys.exit(f'--launcher {args.launcher} shares the images of a run of several between '
                 f'processes; it was given one image')
    if args.pattern and not any(osp.isdir(source) for source in args.images):
        sys.exit(f'--pattern {args.pattern!r} selects the files of a folder, and no folder was '
                 f'given: {args.images}')
    try:
        inputs = collect_inputs(args.images, args.pattern, exclude=args.out) if batch else None
    except FileNotFoundError as error:
        sys.exit(str(error))
    if args.launcher != 'none':
        start_gloo_group(args.launcher)
    device = args.device or (f'cuda:{os.environ.get("LOCAL_RANK", 0)}'
                             if torch.cuda.is_available() else 'cpu')
    if task == 'segmentation':
        from mmseg.apis import init_model
    else:
        from mmdet.apis import init_detector as init_model
    model = init_model(cfg, args.checkpoint, device=device)
    if not batch:
        run_one_image(args, task, model)
        return
    result = run_batch(
        inputs,
        args.out,
        process=lambda path, folder: run_image(args, task, model, path, folder),
        planned_outputs=lambda folder: planned_outputs(args, task, folder),
        force=args.force,
        stop_signals=stop_signals)
    last_line = report(result, args.out) if not torch.distributed.is_initialized() or \
        torch.distributed.get_rank() == 0 else None
    close_launcher()
    if last_line is not None:
        print(last_line, file=sys.stderr, flush=True)
    if result.exit_code:
        sys.exit(result.exit_code)


if __name__ == '__main__':
    main()
