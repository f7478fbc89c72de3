"""Segment one large image whole with an mmseg model: a raster file in, a class-map GeoTIFF out.

The image is read by windows of rows (GeoTIFF / BigTIFF with N bands of 8-bit, 16-bit or
float data, through rasterio; a ``.npy`` memory-mapped; other images through mmcv), the model
sees it whole at its own resolution (``mmlinear.apis.segment_large_image``: the backbone
streamed, the decode head over bands of rows), and ``OUT`` receives:

- ``class_map.tif``: the (H, W) classes as a tiled GeoTIFF with the source's georeference
  (a source without one gives a warning and an output without one);
- ``probabilities.tif`` (with ``--probabilities``): the softmax of the logits, one float32
  band per class;
- ``summary.json``: the image, the predicted and measured peak memory, the time and the
  pixels per class.

The predicted memory is printed before any work; a ``--mem-limit-gb`` that cannot be met is
refused then. Existing outputs are refused without ``--force``; outputs are written to
temporary files and renamed when complete, so a failed run leaves nothing half-written.

Example (after ``make demo``):
    cfg=upernet_infvit-demo-linear_shapes-ade
    python tools/inference/large_image.py scene.tif configs/demo/$cfg.py \\
        $(cat work_dirs/demo/$cfg/last_checkpoint) --out work_dirs/large_image --mem-limit-gb 4
"""
import argparse
import json
import os
import os.path as osp
import resource
import sys
import time
import warnings
from typing import List, Optional, Sequence

import torch
from mmengine.config import DictAction

from mmlinear.apis import load_config, segment_large_image
from mmlinear.apis.large_image_segmentation import open_image, output_bytes
from mmlinear.apis.rasters import RasterImage, write_geotiff
from mmlinear.models.segmentors import StreamedSegmentation
from mmlinear.models.utils.stream_memory import GB
from mmlinear.models.utils.token_stream import BUFFERS
from mmlinear.utils.atomic_checkpoint import write_file_atomic


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('image', help='the image: a GeoTIFF / BigTIFF, a .npy or an image file')
    parser.add_argument('config', help='config of an mmseg segmentor (UPerHead, mmlinear backbone)')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--out', required=True, help='folder of the outputs')
    parser.add_argument(
        '--mem-limit-gb',
        type=float,
        help='pick the bands so that the predicted peak fits (refused before any work if '
        'none does)')
    parser.add_argument('--force', action='store_true', help='replace existing outputs')
    parser.add_argument(
        '--probabilities', action='store_true', help='also write the class probabilities')
    parser.add_argument(
        '--buffer',
        default='memory',
        choices=BUFFERS,
        help="where the backbone's stream and the outputs live ('disk': mapped temporary files)")
    parser.add_argument('--device', default='cuda:0' if torch.cuda.is_available() else 'cpu')
    parser.add_argument(
        '--cfg-options', nargs='+', action=DictAction, help='override config settings')
    return parser.parse_args(argv)


def planned_outputs(args: argparse.Namespace) -> List[str]:
    names = ['class_map.tif', 'summary.json']
    if args.probabilities:
        names.insert(1, 'probabilities.tif')
    return [osp.join(args.out, name) for name in names]


def write_atomically(path: str, write) -> None:
    """``write(temporary_path)``, then rename over ``path``: never a half-written output."""
    base, extension = osp.splitext(path)
    partial = f'{base}.partial{extension}'
    try:
        write(partial)
        os.replace(partial, path)
    finally:
        if osp.exists(partial):
            os.remove(partial)


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    outputs = planned_outputs(args)
    existing = [path for path in outputs if osp.exists(path)]
    if existing and not args.force:
        sys.exit(f'outputs exist: {", ".join(existing)}; use --force to replace them')
    from mmseg.apis import init_model
    try:
        image = open_image(args.image)
    except (FileNotFoundError, ValueError) as error:
        sys.exit(str(error))
    georeference = image.georeference if isinstance(image, RasterImage) else None
    if georeference is None:
        warnings.warn(f'{args.image} has no georeference: the outputs are written without one')
    cfg = load_config(args.config, args.cfg_options)
    if 'decode_head' not in cfg.model:
        sys.exit(f'{args.config} is not a segmentor config (its model has no decode_head); '
                 f'large images are segmented with an mmseg UperNet')
    model = init_model(cfg, args.checkpoint, device=args.device)
    streamed = StreamedSegmentation(model)
    height, width = image.shape[:2]
    shape = (1, image.shape[2] if len(image.shape) == 3 else 1, height, width)
    on_heap = output_bytes(streamed.num_classes, height, width,
                           args.probabilities) if args.buffer == 'memory' else 0
    try:
        chunk_rows, head_rows = streamed.pick_rows(
            shape,
            mem_limit_gb=args.mem_limit_gb,
            buffer=args.buffer,
            input_in_memory=False,
            output_bytes=on_heap)
    except ValueError as error:
        sys.exit(str(error))
    predicted = streamed.predict_memory(
        shape,
        chunk_rows=chunk_rows,
        head_rows=head_rows,
        buffer=args.buffer,
        input_in_memory=False,
        output_bytes=on_heap)
    print(
        f'{args.image}: {height} x {width}, {shape[1]} bands ({image.dtype}); predicted peak '
        f'{predicted.describe()}',
        flush=True)
    start = time.perf_counter()
    try:
        result = segment_large_image(
            model,
            image,
            return_logits=args.probabilities,
            chunk_rows=chunk_rows,
            head_rows=head_rows,
            buffer=args.buffer,
            progress=True)
    except ValueError as error:
        sys.exit(str(error))
    seconds = time.perf_counter() - start
    class_map, logits = result if args.probabilities else (result, None)
    os.makedirs(args.out, exist_ok=True)
    write_atomically(outputs[0], lambda path: write_geotiff(path, class_map, georeference))
    if logits is not None:
        for start_row in range(0, height, 1024):  # softmax in place, a block of rows at a time
            block = logits[:, start_row:start_row + 1024]
            block.copy_(block.softmax(0))
        write_atomically(outputs[1], lambda path: write_geotiff(path, logits, georeference))
    counts = torch.bincount(class_map.flatten().long(), minlength=streamed.num_classes)
    summary = dict(
        image=args.image,
        shape=[height, width, shape[1]],
        dtype=str(image.dtype),
        georeferenced=georeference is not None,
        config=args.config,
        checkpoint=args.checkpoint,
        seconds=round(seconds, 2),
        predicted_peak_gb=round(predicted.total_bytes / GB, 3),
        peak_rss_gb=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GB, 3),
        chunk_rows=chunk_rows,
        head_rows=head_rows,
        pixels_per_class=counts.tolist(),
        outputs=outputs)

    write_file_atomic(outputs[-1], json.dumps(summary, indent=2).encode())
    print(f'segmented in {seconds:.1f} s; wrote {", ".join(outputs)}')


if __name__ == '__main__':
    main()
