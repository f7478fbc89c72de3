"""Run a trained classifier, detector or segmentor on one image and save the drawn result.

The config's model decides the task (an mmpretrain classifier, an mmdet detector or an mmseg
segmentor); the toolbox's own inferencer runs it and draws the prediction. A one-line
summary is printed.

Example (after ``make demo``):
    cfg=mask-rcnn_infvit-demo-linear_simple-pyramid_shapes-coco
    python demo/image_demo.py data/shapes/coco/images/val/00000.png configs/demo/$cfg.py \\
        $(cat work_dirs/demo/$cfg/last_checkpoint) --out-file work_dirs/image_demo/det.png
"""
import argparse
import os.path as osp
from typing import List, Optional

import mmcv
import torch
from mmengine.config import DictAction

# Importing mmlinear applies its shims: safe checkpoint loading and mmlinear:: configs.
from mmlinear.apis import infer_image


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('img', help='image file')
    parser.add_argument('config', help='config of a classifier, detector or segmentor')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--out-file',
        help='where to save the drawn result (default: '
        'work_dirs/image_demo/<config name>/<image name>.png)')
    parser.add_argument(
        '--device',
        default='cuda:0' if torch.cuda.is_available() else 'cpu',
        help='device to run on (default: cuda:0 if available, else cpu)')
    parser.add_argument(
        '--score-thr', type=float, default=0.3, help='detection: lowest score drawn')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override config settings, e.g. model.test_cfg.rcnn.max_per_img=5')
    return parser.parse_args(argv)


def main(argv: Optional[List[str]] = None) -> None:
    args = parse_args(argv)
    result = infer_image(
        args.img,
        args.config,
        args.checkpoint,
        device=args.device,
        score_thr=args.score_thr,
        cfg_options=args.cfg_options)
    out_file = args.out_file or osp.join('work_dirs', 'image_demo',
                                         osp.splitext(osp.basename(args.config))[0],
                                         osp.splitext(osp.basename(args.img))[0] + '.png')
    # The inferencers draw in RGB; mmcv writes BGR (and creates the folder).
    mmcv.imwrite(result.visualization[..., ::-1], out_file)
    print(result.summary)
    print(f'drawn result saved to {out_file}')


if __name__ == '__main__':
    main()
