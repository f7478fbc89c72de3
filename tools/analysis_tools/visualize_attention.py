"""Overlay attention maps (Pure / Linear InfSA, softmax, VECA cores) or WeightFormer's
dynamic-kernel response on input images, and save them as one PNG.

One row per image, one column per model (after the input). What is drawn is
:func:`mmlinear.visualization.attention_saliency`: the attention each patch receives at
``--layer`` (averaged over heads and queries, or the first query row with
``--query first``), or for WeightFormer the channel norm of the dynamic depthwise
convolution's output. Each map is min-max scaled per image and upsampled bilinearly.

Without ``--checkpoints`` the weights are random (the maps then show the architecture's
inductive bias only); give one checkpoint per model (``none`` for random) for trained maps.

Example:
    python tools/analysis_tools/visualize_attention.py \\
        --models configs/demo/infvit-demo-linear_shapes-cls.py infvit-demo-pure \\
        --checkpoints work_dirs/demo/infvit-demo-linear_shapes-cls/epoch_10.pth none \\
        --images data/shapes/coco/images/val --max-images 4 --img-size 128 \\
        --out work_dirs/attention.png
"""
import argparse
import io
import os
import os.path as osp
from typing import List, Optional, Sequence, Tuple

import numpy as np
from PIL import Image
from torch import Tensor

from mmlinear.apis import build_backbone, input_normalization, list_images, load_images
from mmlinear.cli import pair_checkpoints
from mmlinear.visualization import QUERY_MODES, attention_saliency, minmax, upsample_saliency


def draw(images: List[np.ndarray],
         columns: List[Tuple[str, Tensor]],
         path: str,
         alpha: float = 0.5) -> None:
    """Save a grid: input images, then one overlay column per (title, (B, H, W) map)."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    rows, cols = len(images), 1 + len(columns)
    fig, axes = plt.subplots(rows, cols, figsize=(2.2 * cols, 2.2 * rows), squeeze=False)
    for i, image in enumerate(images):
        axes[i, 0].imshow(image)
        for j, (title, maps) in enumerate(columns, 1):
            axes[i, j].imshow(image)
            axes[i, j].imshow(maps[i].numpy(), cmap='jet', alpha=alpha, vmin=0, vmax=1)
            if i == 0:
                axes[i, j].set_title(title, fontsize=7)
        if i == 0:
            axes[i, 0].set_title('input', fontsize=7)
    for ax in axes.flat:
        ax.axis('off')
    fig.tight_layout()
    os.makedirs(osp.dirname(osp.abspath(path)), exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=72)
    plt.close(fig)
    # A 256-colour palette keeps the figure small enough to commit beside the docs.
    Image.open(buffer).convert('RGB').quantize(256).save(path, optimize=True)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--models',
        nargs='+',
        required=True,
        help='presets of mmlinear.apis.BACKBONE_PRESETS or config files')
    parser.add_argument(
        '--checkpoints',
        nargs='+',
        default=None,
        help="one per model; 'none' keeps the random weights")
    parser.add_argument('--images', nargs='+', required=True, help='image files or folders')
    parser.add_argument('--max-images', type=int, default=4)
    parser.add_argument(
        '--img-size', type=int, default=224, help='resize to this square side (0 keeps the size)')
    parser.add_argument('--layer', type=int, default=-1)
    parser.add_argument('--query', default='mean', choices=QUERY_MODES)
    parser.add_argument(
        '--active-cores', type=int, default=None, help='VECA only: the core budget of the maps')
    parser.add_argument('--out', default='work_dirs/attention_maps.png')
    args = parser.parse_args(argv)
    try:
        args.checkpoints = pair_checkpoints(args.models, args.checkpoints)
    except ValueError as error:
        raise SystemExit(str(error))
    return args


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmlinear_visualize', log_level='WARNING')

    files = list_images(args.images, args.max_images)
    columns, images = [], None
    budgets_set = 0
    for model, checkpoint in zip(args.models, args.checkpoints):
        backbone = build_backbone(model, checkpoint=checkpoint)
        kind = getattr(backbone, 'attn_type', type(backbone).__name__)
        if args.active_cores is not None and hasattr(type(backbone), 'active_cores'):
            backbone.active_cores = args.active_cores  # validated by the backbone
            kind = f'{kind}, {args.active_cores} cores'
            budgets_set += 1
        x, images = load_images(files, args.img_size, *input_normalization(model))
        saliency = attention_saliency(backbone, x, args.layer, args.query)
        name = osp.splitext(osp.basename(model))[0]
        weights = 'random' if checkpoint is None else 'trained'
        columns.append((f'{name}\n{kind}, layer {args.layer}, {weights}',
                        minmax(upsample_saliency(saliency, x.shape[-2:]))))
    if args.active_cores is not None and not budgets_set:
        raise SystemExit('--active-cores applies to VECA models only, and none was given')
    draw(images, columns, args.out)
    print(f'wrote {args.out} ({len(files)} images x {len(args.models)} models)')


if __name__ == '__main__':
    main()
