"""Whole-image detection against slicing (SAHI) on a generated large scene: recall of the
objects that cross tile borders, recall overall, precision, COCO box and mask mAP, time and
peak memory.

A ``--size`` x ``--size`` scene of shapes at the demo detector's training scale is generated
(``mmlinear.cli.benchmark.shape_scene``: about two shapes per 128 x 128 block, placed
anywhere, so that many lie across the borders of any grid of tiles), and each method runs in
a fresh process on it:

- ``whole``: ``mmlinear.apis.detect_large_image`` (the backbone streamed over the whole image,
  the RPN over bands of the pyramid, one NMS over the image); the per-image caps of the
  config's test_cfg (sized for one 128 x 128 training scene) are raised to
  ``--rpn-nms-pre`` anchors per level, ``--rpn-proposals`` proposals and ``--max-detections``
  detections for the whole scene;
- ``sliced``: SAHI (the ``sahi`` package, ``get_sliced_prediction`` with its mmdet model):
  ``--tile`` x ``--tile`` slices overlapping by ``--overlap``, the config's own test_cfg per
  slice, boxes shifted to the scene and merged by SAHI's default greedy NMM (IOS 0.5).

Both keep detections scoring at least ``--score-thr``. An object is found when a detection
of its class overlaps its box by IoU >= 0.5 (one to one, best scores first, as COCO matches);
it crosses tile borders when no slice of the grid holds its box whole. The box and mask mAP
are pycocotools' (AP over IoU 0.5:0.95 and at 0.5, up to 100,000 detections counted; the
shapes' masks drawn as the scene draws them, SAHI's mask polygons rasterised by pycocotools).
``--cfg-options`` changes the config of the whole-image method only (for example
``model.backbone.context_window=16``); the slices are of the training size. Peak memory is the
resident-set high-water mark above the process's RSS once the model is built
(``mmlinear.utils.peak_memory``). Writes ``scene.npy``, ``ground_truth.json``,
``detections_<method>.json``, ``report.json`` and ``report.md`` into ``--work-dir``.

Example (after ``make demo``):
    cfg=mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco
    OMP_NUM_THREADS=1 python tools/analysis_tools/large_image_detection.py \\
        configs/demo/$cfg.py $(cat work_dirs/demo/$cfg/last_checkpoint) --size 4096
"""
import argparse
import json
import os
import os.path as osp
import subprocess
import sys
import time
import warnings
from typing import Any, Dict, Optional, Sequence

import numpy as np
from mmengine.config import DictAction

from mmlinear.cli.benchmark import cpu_peak, machine_info, reset_cpu_peak
from mmlinear.cli.benchmark.detection_map import coco_map, polygon_rle, polygons_rle
from mmlinear.cli.benchmark.detection_recall import crossing_tiles, recall_report, slice_grid
from mmlinear.cli.benchmark.shape_scene import SHAPE_CLASSES, shape_scene

METHODS = ('whole', 'sliced')


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('config', help='config of the demo Mask R-CNN (mmlinear backbone)')
    parser.add_argument('checkpoint', help='its checkpoint')
    parser.add_argument('--size', type=int, default=4096, help='side of the scene (px)')
    parser.add_argument('--seed', type=int, default=0, help='seed of the scene')
    parser.add_argument('--tile', type=int, default=128, help='side of a slice (px)')
    parser.add_argument('--overlap', type=float, default=0.2, help="slices' overlap ratio")
    parser.add_argument('--score-thr', type=float, default=0.3, help='detections kept')
    parser.add_argument('--methods', nargs='+', choices=METHODS, default=list(METHODS))
    parser.add_argument('--rpn-nms-pre', type=int, default=20000)
    parser.add_argument('--rpn-proposals', type=int, default=20000)
    parser.add_argument('--max-detections', type=int, default=5000)
    parser.add_argument(
        '--work-dir', default='work_dirs/bench/large_image_detection', help='output folder')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config of the whole-image method')
    parser.add_argument('--force', action='store_true', help='replace existing outputs')
    parser.add_argument('--run-method', choices=METHODS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.size < args.tile or args.tile < 1:
        parser.error(f'--size ({args.size}) must be at least --tile ({args.tile}) >= 1')
    if not 0 <= args.overlap < 1:
        parser.error(f'--overlap must be in [0, 1), got {args.overlap}')
    return args


def detect_whole(args: argparse.Namespace, image: np.ndarray) -> Dict[str, Any]:
    from mmdet.apis import init_detector

    from mmlinear.apis import detect_large_image, load_config
    cfg = load_config(args.config, args.cfg_options)
    cfg.model.test_cfg.rpn.update(nms_pre=args.rpn_nms_pre, max_per_img=args.rpn_proposals)
    cfg.model.test_cfg.rcnn.max_per_img = args.max_detections
    model = init_detector(cfg, args.checkpoint, device='cpu')
    baseline, method = reset_cpu_peak()
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # the skipped Resize and padding
        # The scene is RGB; mmdet takes arrays in the order mmcv reads files (BGR).
        found = detect_large_image(
            model, np.ascontiguousarray(image[..., ::-1]), score_thr=args.score_thr).pred_instances
    seconds = time.perf_counter() - start
    return dict(
        boxes=found.bboxes.tolist(),
        scores=found.scores.tolist(),
        labels=found.labels.tolist(),
        masks=list(found.masks) if 'masks' in found else None,  # COCO RLEs, counts as text
        seconds=seconds,
        peak_bytes=cpu_peak(method) - baseline,
        memory_method=method)


def detect_sliced(args: argparse.Namespace, image: np.ndarray) -> Dict[str, Any]:
    try:
        from sahi.models.mmdet import MmdetDetectionModel
        from sahi.predict import get_sliced_prediction
    except ImportError as error:
        raise SystemExit(f'the sliced method needs SAHI: pip install sahi ({error})')
    model = MmdetDetectionModel(
        model_path=args.checkpoint,
        config_path=args.config,
        device='cpu',
        confidence_threshold=args.score_thr)
    baseline, method = reset_cpu_peak()
    start = time.perf_counter()
    result = get_sliced_prediction(
        image,
        model,
        slice_height=args.tile,
        slice_width=args.tile,
        overlap_height_ratio=args.overlap,
        overlap_width_ratio=args.overlap,
        perform_standard_pred=False,
        verbose=0)
    seconds = time.perf_counter() - start
    found = result.object_prediction_list
    height, width = image.shape[:2]

    def scene_mask(prediction) -> dict:
        mask = prediction.mask
        if mask.shift_x or mask.shift_y:
            mask = mask.get_shifted_mask()
        return polygons_rle(mask.segmentation, height, width)

    with_masks = all(p.mask is not None for p in found)
    return dict(
        boxes=[p.bbox.to_xyxy() for p in found],
        scores=[p.score.value for p in found],
        labels=[p.category.id for p in found],
        masks=[scene_mask(p) for p in found] if with_masks else None,
        seconds=seconds,
        peak_bytes=cpu_peak(method) - baseline,
        memory_method=method)


def run_method(args: argparse.Namespace) -> None:
    """The worker: one method on the saved scene, its detections and measures to JSON."""
    image = np.load(osp.join(args.work_dir, 'scene.npy'))
    run = detect_whole if args.run_method == 'whole' else detect_sliced
    result = run(args, image)
    with open(osp.join(args.work_dir, f'detections_{args.run_method}.json'), 'w') as f:
        json.dump(result, f)


def report_markdown(rows: Dict[str, Dict[str, Any]], header: Dict[str, Any]) -> str:
    lines = [
        f"Scene {header['size']} x {header['size']}, {header['objects']} shapes, "
        f"{header['crossing_objects']} crossing the borders of the {header['tile']} px slices "
        f"(overlap {header['overlap']}); score >= {header['score_thr']}; "
        f"{header['machine']['cpu']}, {header['threads']} thread(s), load average "
        f"{', '.join(f'{x:.2f}' for x in header['machine']['load_average'])} at the end.",
        '',
        '| method | recall (crossing) | recall (all) | precision | bbox mAP / AP50 | '
        'segm mAP / AP50 | detections | time (s) | peak memory (GB) |',
        '|---|---|---|---|---|---|---|---|---|',
    ]

    def average_precision(row: Dict[str, Any], kind: str) -> str:
        if f'{kind}_mAP' not in row:
            return '-'
        return f"{100 * row[f'{kind}_mAP']:.1f} / {100 * row[f'{kind}_mAP_50']:.1f}"

    for name, row in rows.items():
        lines.append(f"| {name} | {row['recall_crossing']:.3f} ({row['found_crossing']}/"
                     f"{row['crossing_objects']}) | {row['recall']:.3f} ({row['found']}/"
                     f"{row['objects']}) | {row['precision']:.3f} | "
                     f"{average_precision(row, 'bbox')} | {average_precision(row, 'segm')} | "
                     f"{row['detections']} | {row['seconds']:.1f} | "
                     f"{row['peak_bytes'] / 2**30:.2f} |")
    return '\n'.join(lines) + '\n'


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    if args.run_method:
        run_method(args)
        return
    report_path = osp.join(args.work_dir, 'report.json')
    if osp.exists(report_path) and not args.force:
        sys.exit(f'outputs exist: {report_path}; use --force to replace them')
    if 'sliced' in args.methods:
        try:
            import sahi  # noqa: F401
        except ImportError:
            sys.exit('the sliced method needs SAHI: pip install sahi')
    os.makedirs(args.work_dir, exist_ok=True)
    scene = shape_scene(args.size, args.seed)
    np.save(osp.join(args.work_dir, 'scene.npy'), scene.image)
    with open(osp.join(args.work_dir, 'ground_truth.json'), 'w') as f:
        json.dump(
            dict(boxes=scene.boxes.tolist(), labels=scene.labels.tolist(), classes=SHAPE_CLASSES),
            f)
    crossing = crossing_tiles(scene.boxes, slice_grid(args.size, args.size, args.tile,
                                                      args.overlap))
    forwarded = [
        args.config, args.checkpoint, '--size',
        str(args.size), '--tile',
        str(args.tile), '--overlap',
        str(args.overlap), '--score-thr',
        str(args.score_thr), '--rpn-nms-pre',
        str(args.rpn_nms_pre), '--rpn-proposals',
        str(args.rpn_proposals), '--max-detections',
        str(args.max_detections), '--work-dir', args.work_dir
    ] + (['--cfg-options', *[f'{key}={value}' for key, value in args.cfg_options.items()]]
         if args.cfg_options else [])
    gt_masks = [polygon_rle(polygon, args.size, args.size) for polygon in scene.polygons]
    rows = {}
    for name in args.methods:
        print(f'{name}: detecting on the {args.size} x {args.size} scene', flush=True)
        subprocess.run([sys.executable,
                        osp.abspath(__file__), *forwarded, '--run-method', name],
                       check=True)
        with open(osp.join(args.work_dir, f'detections_{name}.json')) as f:
            found = json.load(f)
        detections = (np.array(found['boxes'], dtype=np.float64).reshape(-1, 4),
                      np.array(found['scores']), np.array(found['labels'], dtype=np.int64))
        rows[name] = dict(
            recall_report(scene.boxes, scene.labels, crossing, *detections),
            **coco_map(scene.boxes, scene.labels, gt_masks, *detections, found.get('masks'),
                       (args.size, args.size), len(SHAPE_CLASSES)),
            seconds=found['seconds'],
            peak_bytes=found['peak_bytes'],
            memory_method=found['memory_method'])
    header = dict(
        size=args.size,
        tile=args.tile,
        overlap=args.overlap,
        score_thr=args.score_thr,
        objects=int(len(scene.boxes)),
        crossing_objects=int(crossing.sum()),
        machine=machine_info('cpu'),
        threads=os.environ.get('OMP_NUM_THREADS', 'all'),
        config=args.config,
        checkpoint=args.checkpoint,
        cfg_options=args.cfg_options)
    with open(report_path, 'w') as f:
        json.dump(dict(header, methods=rows), f, indent=2)
    table = report_markdown(rows, header)
    with open(osp.join(args.work_dir, 'report.md'), 'w') as f:
        f.write(table)
    print(table)


if __name__ == '__main__':
    main()
