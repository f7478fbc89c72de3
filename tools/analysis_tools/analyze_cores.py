"""VECA's cores, looked at: where they move across layers, what each attends to and how large a
region at each budget, how isotropic they are per layer, the global token's cosine with the
patches and the dense features as colours (PCA and UMAP), beside a teacher's.

Writes into ``--out``:

- ``trajectories.png``: per image, every core's RoPE coordinates block by block
  (``VECA.core_coordinates``) drawn on the image, from a dot (block 0) to a cross (last);
- ``attention_grid.png``: for the first image, the attention of ``--grid-cores`` cores
  (rows, evenly spread over the budget, core 0 first) in every block (columns), from
  ``VECA.forward_attention_maps``;
- ``isotropy.png``: the cores' isotropy per block (:func:`mmlinear.visualization.core_isotropy`,
  the effective rank of their spread over its maximum; 1 is isotropic), mean and range over
  the images;
- ``budgets.png``: for the first image, at every ``--active-cores`` budget (rows) and in
  every block (columns), each patch coloured by the core it weighs most for
  (:func:`mmlinear.visualization.core_partition`), titled with the cores' half-mass area
  (:func:`mmlinear.visualization.half_mass_area`: the fewest patches that hold half of a
  core's attention over the patches, heads averaged), mean over the cores and images;
- ``global_cosine.png``: per image, the cosine between the global token (VECA's core 0
  after the final norm) and every patch token
  (:func:`mmlinear.visualization.global_patch_cosine`), beside the teacher's (its class
  token) with ``--teacher``; with ``--labels``, the mean cosine over the object and the
  background patches (:func:`mmlinear.visualization.foreground_background_cosine`);
- ``features.png``: the last block's patch features as colours, for VECA and, with
  ``--teacher``, a timm ViT (the DINOv3 teacher) on the same images, a column per
  ``--projections``: their first three principal components as RGB
  (:func:`mmlinear.visualization.pca_rgb`) beside a 3-D UMAP embedding as RGB
  (:func:`mmlinear.visualization.umap_rgb`, umap-learn, seed 0, 15 neighbours);
- ``cores.json``: the numbers behind the figures and the titles of the feature columns.

The figures of one budget (all but ``budgets.png``) use the largest of ``--active-cores``.

Example:
    python tools/analysis_tools/analyze_cores.py configs/demo/veca-demo_shapes-cls.py \\
        --checkpoint work_dirs/demo/veca-demo_shapes-cls/epoch_20.pth \\
        --images data/shapes/coco/images/val --max-images 4 --img-size 128 \\
        --active-cores 8 24 64 --out work_dirs/cores
"""
import argparse
import json
import os
import os.path as osp
from typing import List, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from mmengine.config import DictAction
from PIL import Image
from torch import Tensor

from mmlinear.apis import build_backbone, input_normalization, list_images, load_images
from mmlinear.visualization import (core_isotropy, core_partition, foreground_background_cosine,
                                    global_patch_cosine, half_mass_area, map_correlation, pca_rgb,
                                    umap_rgb, upsample_saliency)

#: The projections of the dense features to colours, by the name ``--projections`` takes.
PROJECTIONS = dict(pca=pca_rgb, umap=umap_rgb)


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('model', help='a VECA preset (veca-small, ...) or a config file')
    parser.add_argument('--checkpoint', default=None, help='the backbone or a whole model')
    parser.add_argument('--images', nargs='+', required=True, help='image files or folders')
    parser.add_argument('--max-images', type=int, default=4)
    parser.add_argument('--img-size', type=int, default=224)
    parser.add_argument(
        '--active-cores',
        type=int,
        nargs='+',
        default=None,
        help='one or more core budgets, drawn and measured side by side in budgets.png; the '
        'other figures use the largest (default: the model\'s)')
    parser.add_argument('--grid-cores', type=int, default=8)
    parser.add_argument(
        '--projections',
        nargs='+',
        choices=list(PROJECTIONS),
        default=list(PROJECTIONS),
        help='how the dense features become colours, a column each (default: both)')
    parser.add_argument(
        '--teacher', default=None, help='a timm ViT name for the dense-feature columns')
    parser.add_argument('--teacher-checkpoint', default=None)
    parser.add_argument(
        '--teacher-options',
        nargs='+',
        action=DictAction,
        default={},
        help='more timm.create_model arguments, e.g. embed_dim=64 depth=2')
    parser.add_argument(
        '--labels',
        default=None,
        help='a folder of label maps named as the images (.png), for the mean global-patch '
        'cosine over the object and the background patches')
    parser.add_argument('--background-label', type=int, default=0)
    parser.add_argument('--out', default='work_dirs/cores')
    args = parser.parse_args(argv)
    if args.img_size < 16:
        raise SystemExit(f'--img-size must be at least one patch (16), got {args.img_size}')
    if args.grid_cores < 1:
        raise SystemExit(f'--grid-cores must be >= 1, got {args.grid_cores}')
    return args


def pixel_xy(coords: Tensor, size: int) -> np.ndarray:
    """RoPE coordinates in [-1, 1] (the grid's outer edges) to pixels of a ``size`` image."""
    return ((coords.numpy() + 1) / 2 * size).clip(0, size)


def draw_trajectories(images: List[np.ndarray], coords: Tensor, path: str) -> None:
    """coords: (L, B, K, 2)."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(images), figsize=(3 * len(images), 3), squeeze=False)
    colours = plt.cm.viridis(np.linspace(0, 1, coords.shape[2]))
    for b, (ax, image) in enumerate(zip(axes[0], images)):
        ax.imshow(image)
        xy = pixel_xy(coords[:, b], image.shape[0])  # (L, K, 2)
        for k in range(xy.shape[1]):
            ax.plot(xy[:, k, 0], xy[:, k, 1], color=colours[k], linewidth=0.8)
            ax.plot(*xy[0, k], 'o', color=colours[k], markersize=2)
            ax.plot(*xy[-1, k], 'x', color=colours[k], markersize=3)
        ax.set_title(f'image {b}: {xy.shape[1]} cores, {xy.shape[0]} blocks', fontsize=7)
        ax.axis('off')
    save(fig, path)


def draw_attention_grid(image: np.ndarray, maps: List[Tensor], cores: Sequence[int],
                        path: str) -> None:
    """maps: per block (K, H', W') attention of each core over the patches."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(
        len(cores), len(maps), figsize=(1.6 * len(maps), 1.6 * len(cores)), squeeze=False)
    for row, core in enumerate(cores):
        for column, block in enumerate(maps):
            ax = axes[row, column]
            ax.imshow(image)
            ax.imshow(block[core].numpy(), cmap='magma', alpha=0.6)
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(f'block {column}', fontsize=7)
            if column == 0:
                ax.set_ylabel(f'core {core}', fontsize=7)
    save(fig, path)


def draw_isotropy(isotropy: Tensor, path: str) -> None:
    """isotropy: (L, B)."""
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(4.5, 3))
    blocks = np.arange(isotropy.shape[0])
    ax.plot(blocks, isotropy.mean(1).numpy(), marker='o')
    ax.fill_between(
        blocks, isotropy.min(1).values.numpy(), isotropy.max(1).values.numpy(), alpha=0.3)
    ax.set_xlabel('block')
    ax.set_ylabel('core isotropy (effective rank / max)')
    ax.set_ylim(0, 1.05)
    save(fig, path)


def draw_budgets(image: np.ndarray, partitions: dict, areas: dict, path: str) -> None:
    """partitions: per budget, per block (H', W') core index of each patch of the image;
    areas: per budget, the (L,) mean half-mass area per block."""
    import matplotlib.pyplot as plt
    blocks = len(next(iter(partitions.values())))
    fig, axes = plt.subplots(
        len(partitions), blocks, figsize=(1.8 * blocks, 1.8 * len(partitions)), squeeze=False)
    size = image.shape[:2]
    for row, (budget, maps) in enumerate(partitions.items()):
        for column, cores in enumerate(maps):
            ax = axes[row, column]
            ax.imshow(image)
            regions = F.interpolate(cores[None, None].float(), size=size, mode='nearest')[0, 0]
            ax.imshow(
                regions.numpy(),
                cmap='tab20',
                vmin=0,
                vmax=budget - 1,
                alpha=0.6,
                interpolation='nearest')
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f'block {column}: half-mass {areas[budget][column]:.1f}', fontsize=6)
            if column == 0:
                ax.set_ylabel(f'K = {budget}', fontsize=7)
    save(fig, path)


def draw_global_cosine(images: List[np.ndarray], columns: List[tuple], path: str) -> None:
    """columns: (model, (B, H, W) cosine maps upsampled to the images)."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(
        len(images),
        1 + len(columns),
        figsize=(2.2 * (1 + len(columns)) + 0.8, 2.2 * len(images)),
        squeeze=False,
        constrained_layout=True)
    for b, image in enumerate(images):
        axes[b, 0].imshow(image)
        for c, (model, maps) in enumerate(columns, start=1):
            shown = axes[b, c].imshow(maps[b].numpy(), cmap='coolwarm', vmin=-1, vmax=1)
            if b == 0:
                axes[b, c].set_title(f'{model}\ncos(global, patch)', fontsize=6)
    fig.colorbar(shown, ax=axes.ravel().tolist(), shrink=0.5)
    for ax in axes.flat:
        ax.axis('off')
    fig.savefig(path, dpi=80, bbox_inches='tight')
    plt.close(fig)


def draw_features(images: List[np.ndarray], columns: List[tuple], path: str) -> None:
    """columns: (model, projection, (B, 3, H, W) colours upsampled to the images)."""
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(
        len(images),
        1 + len(columns),
        figsize=(2.2 * (1 + len(columns)), 2.2 * len(images)),
        squeeze=False)
    for b, image in enumerate(images):
        axes[b, 0].imshow(image)
        for c, (model, projection, colours) in enumerate(columns, start=1):
            axes[b, c].imshow(colours[b].permute(1, 2, 0).numpy())
            if b == 0:
                axes[b, c].set_title(f'{model}\n{projection.upper()}', fontsize=7)
    for ax in axes.flat:
        ax.axis('off')
    save(fig, path)


def save(fig, path: str) -> None:
    import matplotlib.pyplot as plt
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def spread_cores(budget: int, count: int) -> List[int]:
    """``count`` core indices evenly spread over ``budget``, core 0 (the global one) first."""
    return sorted({round(i * (budget - 1) / max(count - 1, 1)) for i in range(min(count, budget))})


def teacher_features(args: argparse.Namespace, x: Tensor) -> Tuple[Tensor, Tensor]:
    """The teacher's last-block (B, C) class token and (B, C, H', W') patch map."""
    from mmlinear.models import TimmViTFeatures
    teacher = TimmViTFeatures(
        args.teacher,
        checkpoint_path=args.teacher_checkpoint,
        model_kwargs=dict(args.teacher_options, dynamic_img_pad=True)).eval()
    with torch.no_grad():
        patches = teacher(x)[-1]
        teacher.out_type = 'cls_token'
        return teacher(x)[-1], patches


def load_labels(folder: str, files: Sequence[str], size: int) -> Tensor:
    """(B, size, size) label maps named as the image files, resized by nearest neighbour."""
    labels = []
    for file in files:
        path = osp.join(folder, osp.splitext(osp.basename(file))[0] + '.png')
        if not osp.isfile(path):
            raise SystemExit(f'--labels {folder}: no label map {path} for {file}')
        with Image.open(path) as opened:
            labels.append(np.asarray(opened.resize((size, size), Image.NEAREST)))
    return torch.from_numpy(np.stack(labels).astype(np.int64))


def region_sizes(backbone: torch.nn.Module, x: Tensor, budgets: Sequence[int], hw: Tuple[int, int],
                 computed: dict) -> Tuple[dict, dict]:
    """Per budget, the (L,) half-mass area per block (mean over images and cores) and, per
    block, the (H', W') core partition of image 0's patches; ``computed`` holds attention
    maps already computed, by budget, which are not computed again."""
    areas, partitions = {}, {}
    for budget in budgets:
        attention = computed.get(budget)
        if attention is None:
            with torch.no_grad():
                attention = backbone.forward_attention_maps(x, active_cores=budget)
        # (B, K, N): every core's attention over the patches, averaged over the heads.
        on_patches = [a.mean(1)[:, :, budget:] for a in attention]
        areas[budget] = [float(half_mass_area(a).mean()) for a in on_patches]
        partitions[budget] = [core_partition(a[0]).reshape(hw) for a in on_patches]
    return areas, partitions


def mean_ignoring_nan(values: Tensor) -> float:
    return float(values[~values.isnan()].mean())


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmlinear_analyze_cores', log_level='WARNING')
    try:
        backbone = build_backbone(args.model, dict(out_type='featmap'), args.checkpoint)
    except (RuntimeError, ValueError) as error:  # a checkpoint of another model, a bad name
        raise SystemExit(f'cannot load {args.model} with {args.checkpoint}: '
                         f'{str(error).strip().splitlines()[0]}')
    if not hasattr(backbone, 'core_coordinates'):
        raise SystemExit(f'{args.model} builds a {type(backbone).__name__}, not VECA: the core '
                         f'analyses need VECA\'s cores')
    backbone.eval()
    budgets = args.active_cores or [backbone.active_cores]
    for value in budgets:
        try:
            backbone.active_cores = value  # checked by the backbone
        except ValueError as error:
            raise SystemExit(str(error))
    budget = max(budgets)
    files = list_images(args.images, args.max_images)
    x, images = load_images(files, args.img_size, *input_normalization(args.model))
    # Read before the model runs, so a missing label map is refused at once.
    labels = load_labels(args.labels, files, x.shape[-1]) if args.labels else None
    with torch.no_grad():
        coords = backbone.core_coordinates(x, active_cores=budget)  # (L, B, K, 2)
        cores = backbone.core_tokens(x, active_cores=budget)  # (L, B, K, C)
        attention = backbone.forward_attention_maps(x, active_cores=budget)
        features = backbone(x, active_cores=budget)[-1]
        global_token = backbone.forward_tokens(x, active_cores=budget)['global']
    hw = features.shape[-2:]
    grid = spread_cores(budget, args.grid_cores)
    # Per block, every core's attention over the patches of image 0, averaged over heads.
    maps = [
        upsample_saliency(a[0].mean(0)[:, budget:].reshape(budget, *hw), x.shape[-2:])
        for a in attention
    ]
    areas, partitions = region_sizes(backbone, x, budgets, hw, {budget: attention})
    isotropy = core_isotropy(cores)  # (L, B)
    name = f'{osp.splitext(osp.basename(args.model))[0]} (K = {budget})'
    # features are forward_tokens' patches as maps (the same final norm and projection).
    models = [(name, features, global_patch_cosine(global_token, features))]
    if args.teacher:
        teacher_global, teacher_patches = teacher_features(args, x)
        models.append(
            (args.teacher, teacher_patches, global_patch_cosine(teacher_global, teacher_patches)))
    try:
        columns = [(title, projection,
                    F.interpolate(PROJECTIONS[projection](f), size=x.shape[-2:], mode='nearest'))
                   for title, f, _ in models for projection in args.projections]
    except ValueError as error:  # too few patches for UMAP's neighbourhood
        raise SystemExit(f'--projections {" ".join(args.projections)}: {error}')
    cosine = {
        title: dict(mean=float(c.mean()), per_image=c.flatten(1).mean(1).tolist())
        for title, _, c in models
    }
    if labels is not None:
        for title, _, c in models:
            objects, background = foreground_background_cosine(c, labels, args.background_label)
            cosine[title].update(
                objects=mean_ignoring_nan(objects),
                background=mean_ignoring_nan(background),
                objects_per_image=objects.tolist(),
                background_per_image=background.tolist())
    if args.teacher:
        correlation = map_correlation(models[0][2], models[1][2])
        cosine['correlation_with_teacher'] = dict(
            mean=mean_ignoring_nan(correlation), per_image=correlation.tolist())

    os.makedirs(args.out, exist_ok=True)
    draw_trajectories(images, coords, osp.join(args.out, 'trajectories.png'))
    draw_attention_grid(images[0], maps, grid, osp.join(args.out, 'attention_grid.png'))
    draw_isotropy(isotropy, osp.join(args.out, 'isotropy.png'))
    draw_budgets(images[0], partitions, areas, osp.join(args.out, 'budgets.png'))
    draw_global_cosine(images,
                       [(title, upsample_saliency(c, x.shape[-2:])) for title, _, c in models],
                       osp.join(args.out, 'global_cosine.png'))
    draw_features(images, columns, osp.join(args.out, 'features.png'))
    displacement = (coords[-1] - coords[0]).norm(dim=-1)  # (B, K), in coordinate units
    result = dict(
        settings=vars(args),
        images=files,
        active_cores=budget,
        grid_cores=grid,
        isotropy_per_block=isotropy.mean(1).tolist(),
        isotropy_per_block_and_image=isotropy.tolist(),
        mean_core_displacement=float(displacement.mean()),
        num_patches=hw[0] * hw[1],
        half_mass_area_per_block={
            str(k): v
            for k, v in areas.items()
        },
        global_patch_cosine=cosine,
        feature_columns=[f'{title}, {projection.upper()}' for title, projection, _ in columns],
        core_coordinates=coords.tolist())
    with open(osp.join(args.out, 'cores.json'), 'w') as f:
        json.dump(result, f)
    print('isotropy per block: ' + ', '.join(f'{v:.3f}' for v in result['isotropy_per_block']))
    for value, per_block in areas.items():
        print(f'half-mass area per block at K = {value} (of {hw[0] * hw[1]} patches): ' +
              ', '.join(f'{v:.2f}' for v in per_block))
    for title, numbers in cosine.items():
        print(f'global-patch cosine, {title}: ' +
              ', '.join(f'{key} {value:.3f}'
                        for key, value in numbers.items() if not key.endswith('per_image')))
    print(f'wrote trajectories.png, attention_grid.png, isotropy.png, budgets.png, '
          f'global_cosine.png, features.png and cores.json to {args.out}')


if __name__ == '__main__':
    main()
