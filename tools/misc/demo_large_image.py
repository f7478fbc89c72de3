"""The large-image demo: a generated 4-channel 16-bit GeoTIFF scene segmented by the demo UperNet
whole (streamed) and with mmseg's sliding window, side by side.

The scene (``make_tiny_datasets.py --large-scene SIZE``) is a mosaic of the bundled ADE-style
128 x 128 scenes, or with ``--large-scene-kind continuous`` one scene drawn by the same rules
whose shapes lie anywhere, across the borders of the tiles (R, G, B scaled to 16 bits and a
near-infrared-like fourth channel), with its label map. The demo UperNet was trained on those
scenes read by mmcv (8-bit BGR), so it is fed the scene's first three channels in BGR order
scaled back to 0-255 (``ChannelView``); the fourth channel is not used (the RGB weights
adapted to four channels, ``adapt_input_channels``, would give it the channels' mean weight,
which no training has seen).

Both runs get the same input and the same model. ``whole`` is
``mmlinear.apis.segment_large_image`` (the backbone streamed over the whole image, the head
over bands of rows, the input read by rows from the file); ``slide`` is mmseg's
``slide_inference`` (crops of the training size with a 2/3 overlap by default, averaged), on
the whole image normalised in memory as mmseg takes it. For each: the time, the peak memory
(the resident-set high-water mark above the resident set before the run,
``mmlinear.utils.peak_memory``), and mIoU against the label map (as mmseg's ``IoUMetric``).
Written to ``<work-dir>/<timestamp>/``: both class maps as GeoTIFFs with the scene's
georeference, ``summary.json`` and ``comparison.png`` (the input's RGB, the ground truth,
whole and slide; the whole scene above, a window at full resolution below).

``--cfg-options`` overrides the config as ``tools/test.py``'s does, for both runs: e.g.
``model.backbone.pos_extrapolation=tile`` repeats the position table at its training period
over the whole image instead of stretching it.

Example (``make demo-large`` does it for both kinds of scene, training the UperNet first if
needed):
    python tools/misc/make_tiny_datasets.py --large-scene 4096
    python tools/misc/demo_large_image.py data/shapes_large/scene_4096.tif \\
        data/shapes_large/labels_4096.tif \\
        --checkpoint $(cat work_dirs/demo/upernet_infvit-demo-linear_shapes-ade/last_checkpoint)
"""
import argparse
import json
import os
import os.path as osp
import sys
import time
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch
from mmengine.config import DictAction

from mmlinear.apis import load_config, segment_large_image
from mmlinear.apis.channel_view import ChannelView
from mmlinear.apis.class_map_iou import class_map_iou
from mmlinear.apis.rasters import RasterImage, write_geotiff
from mmlinear.cli.slide_segmentation import segment_slide
from mmlinear.models.streaming.memory_model import GB
from mmlinear.utils.peak_memory import cpu_peak, reset_cpu_peak

CONFIG = 'configs/demo/upernet_infvit-demo-linear_shapes-ade.py'
#: The scene's channels the RGB model sees, in the order it was trained on (mmcv's BGR).
BGR_CHANNELS = (2, 1, 0)
#: The runs the demo compares.
MODES = ('whole', 'slide')
#: Rows of the source read at a time when the picture is drawn.
RENDER_BLOCK_ROWS = 512


def positive_int(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be a positive integer, got {value}')
    return value


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('scene', help='the scene: an integer-valued GeoTIFF, R, G, B first')
    parser.add_argument('labels', help='its label map (one channel, the same size)')
    parser.add_argument('--checkpoint', required=True, help='the demo UperNet checkpoint')
    parser.add_argument('--config', default=CONFIG, help='its config')
    parser.add_argument('--work-dir', default='work_dirs/demo_large')
    parser.add_argument(
        '--crop-size', type=positive_int, nargs=2, default=(128, 128), help="slide mode's crop")
    parser.add_argument(
        '--stride',
        type=positive_int,
        nargs=2,
        default=(85, 85),
        help="slide mode's step (2/3 crop)")
    parser.add_argument(
        '--zoom',
        type=positive_int,
        default=512,
        help='side of the full-resolution window in the picture (at the scene\'s centre)')
    parser.add_argument(
        '--modes',
        nargs='+',
        choices=MODES,
        default=list(MODES),
        help='the runs to make (default: both); e.g. whole alone to compare config options')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override config settings, e.g. model.backbone.pos_extrapolation=tile')
    return parser.parse_args(argv)


def measure(run: Callable[[], torch.Tensor]) -> Tuple[torch.Tensor, float, int]:
    """``run()``'s result, its seconds and its peak resident memory above the start (bytes)."""
    baseline, method = reset_cpu_peak()
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    return result, seconds, cpu_peak(method) - baseline


def integer_scale(dtype: np.dtype) -> float:
    """The factor that maps an integer dtype's range onto 0-255 (the 8-bit images the demo
    model was trained on); a ValueError for other dtypes."""
    if not np.issubdtype(dtype, np.integer):
        raise ValueError(f'the demo scene must hold integer values (uint8 or uint16), got '
                         f'{dtype}')
    return 255.0 / np.iinfo(dtype).max


def colourise(class_map: np.ndarray, palette: np.ndarray) -> np.ndarray:
    """(h, w) classes as (h, w, 3) uint8 colours of ``palette``."""
    return palette[np.asarray(class_map).astype(np.int64)]


def render_rows(image: RasterImage, rows: slice, step: int, scale: float) -> np.ndarray:
    """Rows ``rows`` of the scene's first three channels as 8-bit RGB, every ``step``-th pixel."""
    parts = []
    start, stop, _ = rows.indices(image.shape[0])
    for block in range(start, stop, RENDER_BLOCK_ROWS):
        data = image[block:min(block + RENDER_BLOCK_ROWS, stop)][::step, ::step, :3]
        parts.append(np.clip(data * scale, 0, 255).astype(np.uint8))
    return np.concatenate(parts)


def picture_titles(runs: Dict[str, Dict],
                   height: int,
                   width: int,
                   crop_size: Sequence[int],
                   stride: Sequence[int],
                   context_window: Optional[Sequence[int]] = None) -> Dict[str, str]:
    """The picture's column titles: the input, the ground truth, and each run with its mIoU,
    time and peak memory (whole: with the pyramid pooling's window, when it has one)."""
    window = f', window {context_window[0]}x{context_window[1]}' if context_window else ''
    modes = dict(
        whole=f'whole (streamed{window})',
        slide=f'slide {crop_size[0]}x{crop_size[1]}, stride {stride[0]}x{stride[1]}')
    titles = {'input': f'input (channels 1-3)\n{height} x {width}', 'labels': 'ground truth\n'}
    for name, r in runs.items():
        titles[name] = (f'{modes[name]}\nmIoU {r["mIoU"]:.1f}, {r["seconds"]:.0f} s, '
                        f'{r["peak_memory_gb"]:.2f} GB')
    return titles


def draw_comparison(path: str, image: RasterImage, maps: Dict[str, np.ndarray], palette: np.ndarray,
                    titles: Dict[str, str], zoom: int) -> None:
    """The picture: the RGB render and each class map, the whole scene (sub-sampled) above
    and a ``zoom`` x ``zoom`` window of the centre at full resolution below."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    height, width = image.shape[:2]
    step = max(1, max(height, width) // 1024)
    zoom = min(zoom, height, width)
    top, left = (height - zoom) // 2, (width - zoom) // 2
    window = (slice(top, top + zoom), slice(left, left + zoom))
    scale = integer_scale(image.dtype)
    overview = {'input': render_rows(image, slice(0, height), step, scale)}
    detail = {'input': render_rows(image, window[0], 1, scale)[:, window[1]]}
    for name, class_map in maps.items():
        overview[name] = colourise(class_map[::step, ::step], palette)
        detail[name] = colourise(class_map[window], palette)
    fig, axes = plt.subplots(2, len(overview), figsize=(3.2 * len(overview), 6.9))
    for column, name in enumerate(overview):
        axes[0, column].imshow(overview[name], interpolation='nearest')
        axes[0, column].set_title(titles[name], fontsize=9)
        axes[1, column].imshow(detail[name], interpolation='nearest')
        axes[1, column].set_title(
            f'rows {top}-{top + zoom}, columns {left}-{left + zoom}', fontsize=8)
        for row in range(2):
            axes[row, column].set_axis_off()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_table(runs: Dict[str, Dict], classes: List[str]) -> str:
    """The runs as a Markdown table: time, peak memory, mIoU, aAcc and each class's IoU."""
    header = ['mode', 'time (s)', 'peak memory (GB)', 'mIoU', 'aAcc']
    header += [f'IoU {c}' for c in classes]
    lines = ['| ' + ' | '.join(header) + ' |', '|' + '---|' * len(header)]
    for name, r in runs.items():
        figures = [r['seconds'], r['peak_memory_gb'], r['mIoU'], r['aAcc']] + r['IoU']
        cells = [name, f'{figures[0]:.1f}'] + [f'{v:.2f}' for v in figures[1:]]
        lines.append('| ' + ' | '.join(cells) + ' |')
    return '\n'.join(lines)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    from mmseg.apis import init_model
    try:
        image, labels = RasterImage(args.scene), RasterImage(args.labels)
    except (FileNotFoundError, ValueError) as error:
        sys.exit(str(error))
    if image.shape[:2] != labels.shape[:2] or labels.shape[2] != 1:
        sys.exit(f'the label map {args.labels} must be one channel of the scene\'s size '
                 f'{image.shape[0]} x {image.shape[1]}; it is {labels.shape}')
    try:
        view = ChannelView(image, BGR_CHANNELS, integer_scale(image.dtype))
    except ValueError as error:
        sys.exit(f'{args.scene}: {error}')
    cfg = load_config(args.config, args.cfg_options)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # mmseg's deprecation and init messages
        model = init_model(cfg, args.checkpoint, device='cpu')
    num_classes = len(cfg.classes)
    out = osp.join(args.work_dir, time.strftime('%Y%m%d_%H%M%S'))
    os.makedirs(out)
    height, width = image.shape[:2]
    print(
        f'{args.scene}: {height} x {width}, {image.shape[2]} channels ({image.dtype}); the model '
        f'sees channels {BGR_CHANNELS} (B, G, R) times {integer_scale(image.dtype):.6g}',
        flush=True)
    runs: Dict[str, Dict] = {}
    maps: Dict[str, np.ndarray] = {}
    runners = dict(
        whole=lambda: segment_large_image(model, view, progress=True),
        slide=lambda: segment_slide(model, view, args.crop_size, args.stride)[0])
    for name in sorted(set(args.modes), key=MODES.index):
        run = runners[name]
        print(f'{name}: segmenting ...', flush=True)
        class_map, seconds, peak = measure(run)
        maps[name] = class_map.to(torch.uint8).numpy()
        runs[name] = dict(
            seconds=round(seconds, 1),
            peak_memory_gb=round(peak / GB, 3),
            **class_map_iou(maps[name], labels, num_classes))
        write_geotiff(osp.join(out, f'class_map_{name}.tif'), maps[name], image.georeference)
        print(
            f'{name}: {seconds:.1f} s, peak memory {peak / GB:.2f} GB, '
            f'mIoU {runs[name]["mIoU"]:.2f}',
            flush=True)
    labels_map = labels[0:height][..., 0]
    # The head's pyramid pooling window (cells of its top level), None for the whole map.
    context_window = getattr(model.decode_head, 'context_window', None)
    titles = picture_titles(runs, height, width, args.crop_size, args.stride, context_window)
    picture = osp.join(out, 'comparison.png')
    draw_comparison(picture, image, dict(labels=labels_map, **maps),
                    np.asarray(cfg.palette, np.uint8), titles, args.zoom)
    summary = dict(
        scene=args.scene,
        shape=list(image.shape),
        dtype=str(image.dtype),
        georeferenced=image.georeference is not None,
        model_channels=list(BGR_CHANNELS),
        config=args.config,
        cfg_options=args.cfg_options or {},
        context_window=list(context_window) if context_window else None,
        checkpoint=args.checkpoint,
        classes=list(cfg.classes),
        crop_size=list(args.crop_size),
        stride=list(args.stride),
        torch_threads=torch.get_num_threads(),
        runs=runs)
    with open(osp.join(out, 'summary.json'), 'w') as f:
        json.dump(summary, f, indent=2)
    written = [f'class_map_{name}.tif' for name in runs] + ['summary.json', 'comparison.png']
    print(f'wrote {out}/: {", ".join(written)}')
    print(format_table(runs, list(cfg.classes)))


if __name__ == '__main__':
    main()
