"""Write the bundled synthetic "shapes" datasets, deterministically from a seed.

The sets under ``--out`` (default ``data/shapes``):

- ``cls/{train,val}/<class>/*.png``: 64x64 images of one upright circle, square or triangle
  with random colours, size and position (ImageNet-style class folders for mmpretrain's
  CustomDataset).
- ``cls_v2/test/{0,1,2}/*.png``: a re-collected test split of the same classes, as ImageNet-V2
  is of ImageNet's, in ImageNet-V2's layout (class folders named by the class's index in
  ``CLASSES``: 0 circle, 1 square, 2 triangle; mmlinear.ImageNetV2) and with a modest shift:
  smaller shapes (radii 10-18 px against 14-26) on twice as noisy backgrounds (+-24 grey levels
  against +-12).
- ``relation/{train,val}/{same,different}/*.png``: two discs, over a patch apart, plus small
  grey distractors; the label says whether the discs have the same colour (6 colours). Each
  disc's colour and position are distributed alike in both classes, and no sum of per-patch
  features can tell (g(c1) + g(c2) > t for all equal pairs and < t for all unequal pairs is
  impossible with 3 or more colours), so a model without token mixing stays near chance.
- ``coco/{images/{train,val},annotations/instances_{train,val}.json}``: 128x128 images with
  one to three upright shapes of random colours, sizes and positions, COCO instance
  segmentation with polygons (mmdet CocoDataset).
- ``ade/{images,annotations}/{training,validation}``: the same kind of scenes as .jpg images and
  .png label maps (0 background, 1 circle, 2 square, 3 triangle; mmseg BaseSegDataset).
- ``ade_large/{images,annotations}/training``: larger training scenes for crops of several
  sizes at the native scale (``LARGE_TRAINING_SCENE`` x ``LARGE_TRAINING_SCENE`` pixels):
  continuous scenes drawn by the large scene's rules (below: a background colour per
  128 x 128 block, shapes of the same sizes anywhere, across the blocks' borders), as .jpg
  images and .png label maps in the ``ade`` layout; the ``ade`` validation split serves them.
- ``pairs/{images,annotations}/{training,validation}``: a segmentation whose labels need the
  whole image: 3-5 discs of one size, each filled with one of 6 colours, more than a 16-pixel
  patch apart; a disc's pixels are 1 ("paired") when another disc in the image has its colour
  and 2 ("single") when none has (0 background). A disc's colour and position are distributed
  alike in both classes, so nothing within a disc or its neighbourhood tells its label: only
  the other discs, anywhere in the image, do.
- ``depth/{images,annotations}/{train,test}``: the same kind of scenes as .jpg images and their
  depth as 16-bit .png maps in millimetres (mmseg NYUDataset, read with
  ``LoadDepthAnnotation(depth_rescale_factor=1e-3)``). A ground plane seen from above its
  horizon: 6 m at the top row to 2 m at the bottom one, inverse depth linear in the row, as a
  pinhole camera sees a plane; every shape stands upright on it, at the ground's depth where
  its lowest point touches it. The ground darkens with distance (brightness times 2 m over the
  depth), the cue the image gives.

A second run with the same arguments finds the completion stamp and does nothing.

``--large-scene SIZE`` writes, instead, one large remote-sensing-like raster of the same kind
of scenes: ``<out>/scene_<SIZE>.tif`` (``--out`` defaults to ``data/shapes_large`` then), a
SIZE x SIZE 4-channel 16-bit GeoTIFF (the RGB scaled to 16 bits, and a fourth,
near-infrared-like channel: their brightness), tiled, georeferenced (WGS 84 / UTM zone 33N,
0.5 m pixels), written 128 rows at a time so that it never is in memory, and its label map
``labels_<SIZE>.tif`` (uint8, same georeference). ``--large-scene-kind`` chooses the scene
(:mod:`mmlinear.utils.large_shape_scenes`): ``mosaic`` (the default) of independent 128 x 128
scenes, or ``continuous``, one scene whose shapes lie anywhere, across the borders of any
tiles, written as ``continuous_scene_<SIZE>.tif`` and ``continuous_labels_<SIZE>.tif``. It
needs rasterio.
"""
import argparse
import json
import math
import os
import os.path as osp
import shutil
import time
from typing import Callable, Dict, List, Tuple

import numpy as np
from PIL import Image, ImageDraw

from mmlinear.utils.atomic_write import atomic_output
from mmlinear.utils.large_shape_scenes import (LARGE_SCENE_KINDS, SCENE_SIZE, ContinuousScene,
                                               large_scene_bands)
# The shapes' classes, upright rotations, polygons and scenes, shared with the benchmark's large
# scene.
from mmlinear.utils.shape_geometry import SHAPE_CLASSES as CLASSES
from mmlinear.utils.shape_geometry import UPRIGHT, shape_polygon
from mmlinear.utils.shape_scenes import bright_colour, demo_scene, noisy_background

RELATION_CLASSES = ('same', 'different')
RELATION_PALETTE = ((230, 40, 40), (40, 200, 60), (50, 90, 240), (240, 220, 40), (220, 60, 220),
                    (40, 220, 230))
STAMP = '.complete.json'


def polygon_area(points: List[Tuple[float, float]]) -> float:
    """Shoelace area of a simple polygon."""
    xs, ys = np.array(points).T
    return float(abs(np.dot(xs, np.roll(ys, 1)) - np.dot(ys, np.roll(xs, 1))) / 2)


#: The classification images' shape radii (px) and background noise (+- grey levels).
CLS_RADIUS, CLS_NOISE = (14, 26), 12
#: The re-collected test split (``cls_v2``), a distribution shift as ImageNet-V2 is for
#: ImageNet: the same classes and generator, but smaller shapes (radii 10-18 px, of which
#: 10-14 lie below every training shape) on twice as noisy backgrounds. The shapes stay
#: brighter than every background pixel (colours 120-255, backgrounds at most 89 + 24).
CLS_V2_RADIUS, CLS_V2_NOISE = (10, 18), 24


def write_shape_images(folder: Callable[[int], str], count: int, rng: np.random.RandomState,
                       radius_range: Tuple[float, float], noise: int) -> None:
    """``count`` 64x64 images of one upright shape each, the classes in turn (``CLASSES``).

    Args:
        folder (Callable[[int], str]): The folder of a class index (made if missing).
        count (int): Number of images.
        rng (np.random.RandomState): The split's random stream.
        radius_range (tuple[float, float]): The shapes' circumradii are uniform in it (px).
        noise (int): The background's pixel noise, +- grey levels.
    """
    size = 64
    for label in range(len(CLASSES)):
        os.makedirs(folder(label), exist_ok=True)
    for i in range(count):
        label = i % len(CLASSES)
        img = noisy_background(rng, size, noise)
        radius = rng.uniform(*radius_range)
        cx, cy = rng.uniform(radius, size - radius, size=2)
        kind = CLASSES[label]
        ImageDraw.Draw(img).polygon(
            shape_polygon(kind, cx, cy, radius, UPRIGHT[kind]), fill=bright_colour(rng))
        img.save(osp.join(folder(label), f'{i:05d}.png'))


def make_classification(root: str, split: str, count: int, rng: np.random.RandomState) -> None:
    """One upright shape per 64x64 image; class folders named by the classes."""
    write_shape_images(lambda label: osp.join(root, split, CLASSES[label]), count, rng, CLS_RADIUS,
                       CLS_NOISE)


def make_classification_v2(root: str, split: str, count: int, rng: np.random.RandomState) -> None:
    """The shifted re-collection (``CLS_V2_RADIUS``, ``CLS_V2_NOISE``) in ImageNet-V2's
    layout: class folders named by the class's index in ``CLASSES`` (0, 1, 2)."""
    write_shape_images(lambda label: osp.join(root, split, str(label)), count, rng, CLS_V2_RADIUS,
                       CLS_V2_NOISE)


def make_relation(root: str, split: str, count: int, rng: np.random.RandomState) -> None:
    """Two discs apart; the label is whether they have the same colour."""
    size = 64
    for c in RELATION_CLASSES:
        os.makedirs(osp.join(root, split, c), exist_ok=True)
    for i in range(count):
        label = i % 2  # index into RELATION_CLASSES
        img = noisy_background(rng, size)
        draw = ImageDraw.Draw(img)
        for _ in range(rng.randint(0, 3)):
            r = rng.uniform(2, 4)
            gx, gy = rng.uniform(r, size - r, size=2)
            grey = int(rng.randint(110, 200))
            draw.polygon(shape_polygon('square', gx, gy, r, rng.uniform(0, 6.3)), fill=(grey, ) * 3)
        # Every disc's colour and position have the same distribution in both classes: only
        # the pair decides the label.
        first = int(rng.randint(len(RELATION_PALETTE)))
        second = first if RELATION_CLASSES[label] == 'same' else int(
            (first + rng.randint(1, len(RELATION_PALETTE))) % len(RELATION_PALETTE))
        radii = rng.uniform(3, 6, size=2)
        while True:
            centres = rng.uniform(6, size - 6, size=(2, 2))
            # More than a patch (8 px) between the edges: no patch sees both discs.
            if np.hypot(*(centres[0] - centres[1])) > radii.sum() + 10:
                break
        for (x, y), r, colour in zip(centres, radii, (first, second)):
            draw.polygon(shape_polygon('circle', x, y, r, 0.), fill=RELATION_PALETTE[colour])
        img.save(osp.join(root, split, RELATION_CLASSES[label], f'{i:05d}.png'))


def make_coco(root: str, split: str, count: int, rng: np.random.RandomState) -> None:
    """COCO instance segmentation json with polygon masks."""
    size = 128
    img_dir = osp.join(root, 'images', split)
    os.makedirs(img_dir, exist_ok=True)
    os.makedirs(osp.join(root, 'annotations'), exist_ok=True)
    images, annotations = [], []
    for i in range(count):
        img, _, instances = demo_scene(rng, size)
        file_name = f'{i:05d}.png'
        img.save(osp.join(img_dir, file_name))
        images.append(dict(id=i + 1, file_name=file_name, width=size, height=size))
        for inst in instances:
            xs, ys = np.array(inst['polygon']).T.clip(0, size)
            x0, y0 = float(xs.min()), float(ys.min())
            annotations.append(
                dict(
                    id=len(annotations) + 1,
                    image_id=i + 1,
                    category_id=inst['category'] + 1,
                    bbox=[x0, y0, float(xs.max()) - x0,
                          float(ys.max()) - y0],
                    area=polygon_area(inst['polygon']),
                    segmentation=[[round(float(v), 2) for xy in zip(xs, ys) for v in xy]],
                    iscrowd=0))
    categories = [dict(id=i + 1, name=name) for i, name in enumerate(CLASSES)]
    with open(osp.join(root, 'annotations', f'instances_{split}.json'), 'w') as f:
        json.dump(dict(images=images, annotations=annotations, categories=categories), f)


def write_seg_split(root: str, split: str, count: int,
                    draw_scene: Callable[[], Tuple[Image.Image, np.ndarray]]) -> None:
    """``count`` scenes of ``draw_scene`` in mmseg's ADE layout: images (.jpg) and label maps
    (.png) under ``root``/{images,annotations}/``split``."""
    img_dir = osp.join(root, 'images', split)
    ann_dir = osp.join(root, 'annotations', split)
    os.makedirs(img_dir, exist_ok=True)
    os.makedirs(ann_dir, exist_ok=True)
    for i in range(count):
        img, label_map = draw_scene()
        img.save(osp.join(img_dir, f'{i:05d}.jpg'), quality=95)
        Image.fromarray(label_map).save(osp.join(ann_dir, f'{i:05d}.png'))


def make_ade(root: str, split: str, count: int, rng: np.random.RandomState) -> None:
    """ADE-style images (.jpg) and label maps (.png, 0 = background)."""
    write_seg_split(root, split, count, lambda: demo_scene(rng, 128)[:2])


#: Side of the ``ade_large`` training scenes: room for crops of 128 to 256 px at many places.
LARGE_TRAINING_SCENE = 384


def continuous_training_scene(rng: np.random.RandomState,
                              size: int) -> Tuple[Image.Image, np.ndarray]:
    """One continuous scene (:class:`ContinuousScene`) of ``size`` x ``size`` pixels, whole.

    Args:
        rng (np.random.RandomState): The stream that draws the scene's seed.
        size (int): Side in pixels.

    Returns:
        tuple[Image.Image, np.ndarray]: The RGB image and its (size, size) uint8 label map.
    """
    bands = list(ContinuousScene(size, seed=int(rng.randint(2**31))))
    image = np.concatenate([band.image for band in bands])
    return Image.fromarray(image), np.concatenate([band.labels for band in bands])


def make_ade_large(root: str, split: str, count: int, rng: np.random.RandomState) -> None:
    """Continuous ``LARGE_TRAINING_SCENE``-pixel scenes in the ADE layout."""
    write_seg_split(root, split, count,
                    lambda: continuous_training_scene(rng, LARGE_TRAINING_SCENE))


PAIR_CLASSES = ('background', 'paired', 'single')
# One size for every disc: a colour's share of the discs' area is then its share of the discs,
# above 1/3 when the colour repeats and at most 1/3 when it does not (3-5 discs).
PAIR_RADIUS = 11


def pairs_scene(rng: np.random.RandomState, size: int) -> Tuple[Image.Image, np.ndarray]:
    """3-5 discs of the relation palette's colours, labelled by whether their colour repeats.

    Args:
        rng (np.random.RandomState): The random stream.
        size (int): Image side in pixels.

    Returns:
        tuple[Image.Image, np.ndarray]: The RGB image and its (size, size) uint8 label map
        (indices into ``PAIR_CLASSES``).
    """
    img = noisy_background(rng, size)
    label_map = Image.new('L', (size, size), 0)
    draw, label_draw = ImageDraw.Draw(img), ImageDraw.Draw(label_map)
    centres: List[Tuple[float, float]] = []
    for _ in range(rng.randint(3, 6)):
        for _attempt in range(50):
            cx, cy = rng.uniform(PAIR_RADIUS, size - PAIR_RADIUS, size=2)
            # More than a patch (16 px) between the edges: no patch sees two discs.
            if all(math.hypot(cx - x, cy - y) > 2 * PAIR_RADIUS + 17 for x, y in centres):
                centres.append((cx, cy))
                break
    # Colours drawn independently and uniformly: the marginal of each disc's colour is the
    # same whether it is paired or single.
    colours = rng.randint(len(RELATION_PALETTE), size=len(centres))
    for (cx, cy), colour in zip(centres, colours):
        polygon = shape_polygon('circle', cx, cy, PAIR_RADIUS, 0.)
        draw.polygon(polygon, fill=RELATION_PALETTE[colour])
        label = 'paired' if (colours == colour).sum() > 1 else 'single'
        label_draw.polygon(polygon, fill=PAIR_CLASSES.index(label))
    return img, np.array(label_map)


def make_pairs(root: str, split: str, count: int, rng: np.random.RandomState) -> None:
    """ADE-style images (.jpg) and label maps (.png) of :func:`pairs_scene`."""
    write_seg_split(root, split, count, lambda: pairs_scene(rng, SCENE_SIZE))


#: The depth set's ground plane: its depth (m) at the top and at the bottom row.
GROUND_DEPTH_RANGE = (6.0, 2.0)


def ground_depth(size: int) -> np.ndarray:
    """(size,) depth of the ground plane per row, in metres: inverse depth linear in the row
    (a plane under a pinhole camera), from ``GROUND_DEPTH_RANGE[0]`` at the top row to
    ``GROUND_DEPTH_RANGE[1]`` at the bottom one."""
    far, near = GROUND_DEPTH_RANGE
    return 1. / np.linspace(1. / far, 1. / near, size)


def scene_depth(label_map: np.ndarray, instances: List[Dict]) -> np.ndarray:
    """(H, W) depth in metres of a :func:`~mmlinear.utils.shape_scenes.demo_scene`: the ground
    plane, and every shape upright at the ground's depth under its lowest point.

    Args:
        label_map (np.ndarray): (H, W) labels, 0 on the ground.
        instances (list[dict]): The scene's shapes, each with its ``polygon``.

    Returns:
        np.ndarray: (H, W) float64 depth.
    """
    size = label_map.shape[0]
    ground = ground_depth(size)
    depth = np.repeat(ground[:, None], label_map.shape[1], axis=1)
    for inst in instances:
        mask = Image.new('L', label_map.shape[::-1], 0)
        ImageDraw.Draw(mask).polygon(inst['polygon'], fill=1)
        mask = np.array(mask, bool)
        # The same rasterisation as the label map's: the shape's lowest labelled row.
        depth[mask] = ground[np.nonzero(mask.any(1))[0].max()]
    return depth


def make_depth(root: str, split: str, count: int, rng: np.random.RandomState) -> None:
    """NYU-style images (.jpg) and depth maps (16-bit .png, millimetres)."""
    size = 128
    img_dir = osp.join(root, 'images', split)
    ann_dir = osp.join(root, 'annotations', split)
    os.makedirs(img_dir, exist_ok=True)
    os.makedirs(ann_dir, exist_ok=True)
    for i in range(count):
        img, label_map, instances = demo_scene(rng, size)
        depth = scene_depth(label_map, instances)
        pixels = np.asarray(img, np.float64)
        ground = label_map == 0
        pixels[ground] *= (GROUND_DEPTH_RANGE[1] / depth[ground])[:, None]
        Image.fromarray(pixels.round().astype(np.uint8)).save(
            osp.join(img_dir, f'{i:05d}.jpg'), quality=95)
        Image.fromarray(np.round(depth * 1000).astype(np.uint16)).save(
            osp.join(ann_dir, f'{i:05d}.png'))


#: The large scene's georeference: WGS 84 / UTM zone 33N, 0.5 m pixels, from this corner.
LARGE_SCENE_CRS = 'EPSG:32633'
LARGE_SCENE_ORIGIN = (500000.0, 4100000.0)
LARGE_SCENE_PIXEL_M = 0.5


def large_scene_paths(root: str, size: int, kind: str) -> Tuple[str, str]:
    """The paths of a large scene and of its labels: ``scene_<size>.tif`` and
    ``labels_<size>.tif``, prefixed by the kind but for the mosaic (the first kind, whose
    names the demo has always used)."""
    prefix = '' if kind == 'mosaic' else f'{kind}_'
    return (osp.join(root, f'{prefix}scene_{size}.tif'), osp.join(root,
                                                                  f'{prefix}labels_{size}.tif'))


def make_large_scene(root: str, size: int, kind: str, seed: int) -> Tuple[str, str]:
    """A ``size`` x ``size`` 4-channel uint16 GeoTIFF of a large scene and its label map.

    Args:
        root (str): The output folder.
        size (int): Side in pixels.
        kind (str): One of ``LARGE_SCENE_KINDS``.
        seed (int): Random seed.

    Returns:
        tuple[str, str]: The paths of the scene and of its labels.
    """
    import rasterio
    from rasterio.transform import from_origin
    os.makedirs(root, exist_ok=True)
    paths = large_scene_paths(root, size, kind)
    profile = dict(
        driver='GTiff',
        width=size,
        height=size,
        crs=LARGE_SCENE_CRS,
        transform=from_origin(*LARGE_SCENE_ORIGIN, LARGE_SCENE_PIXEL_M, LARGE_SCENE_PIXEL_M),
        tiled=True,
        blockxsize=512,
        blockysize=512,
        compress='deflate',
        BIGTIFF='IF_SAFER')
    # Written under temporary names and renamed when complete: an interrupted run leaves no
    # file that a later run would take for a finished scene.
    with atomic_output(paths[0]) as image_partial, atomic_output(paths[1]) as labels_partial, \
            rasterio.open(image_partial, 'w', count=4, dtype='uint16', **profile) as image, \
            rasterio.open(labels_partial, 'w', count=1, dtype='uint8', **profile) as labels:
        for band in large_scene_bands(kind, size, seed):
            channels = band.image.astype(np.uint16) * 257  # 8 to 16 bits
            channels = np.concatenate([channels, channels.max(2, keepdims=True)],
                                      2).transpose(2, 0, 1)
            window = rasterio.windows.Window(0, band.top, size, band.labels.shape[0])
            image.write(np.ascontiguousarray(channels), window=window)
            labels.write(band.labels[None], window=window)
    return paths


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--out', help='output folder (default: data/shapes; data/shapes_large with --large-scene)')
    parser.add_argument('--seed', type=int, default=0, help='random seed')
    parser.add_argument(
        '--scale', type=float, default=1.0, help='multiply every split size (e.g. 0.1 for tests)')
    parser.add_argument('--force', action='store_true', help='regenerate even if complete')
    parser.add_argument(
        '--large-scene',
        type=int,
        metavar='SIZE',
        help='write only the SIZE x SIZE 4-channel 16-bit GeoTIFF scene and its labels')
    parser.add_argument(
        '--large-scene-kind',
        choices=LARGE_SCENE_KINDS,
        default='mosaic',
        help='with --large-scene: a mosaic of independent 128 x 128 scenes, or one continuous '
        'scene whose shapes cross tile borders (default: mosaic)')
    return parser.parse_args()


SPLITS = {
    # set: (writer, {split: count})
    'cls': (make_classification, {
        'train': 1800,
        'val': 300
    }),
    'relation': (make_relation, {
        'train': 3000,
        'val': 600
    }),
    'coco': (make_coco, {
        'train': 240,
        'val': 60
    }),
    'ade': (make_ade, {
        'training': 240,
        'validation': 60
    }),
    'depth': (make_depth, {
        'train': 240,
        'test': 60
    }),
    'pairs': (make_pairs, {
        'training': 2400,
        'validation': 120
    }),
    # Added last, in this order: a set's streams follow its position, so every set above
    # keeps its bytes.
    'cls_v2': (make_classification_v2, {
        'test': 300
    }),
    'ade_large': (make_ade_large, {
        'training': 80
    }),
}


def split_rng(seed: int, set_index: int, split_index: int) -> np.random.RandomState:
    """The random stream of one split of one set (their positions in ``SPLITS``): one stream
    per (set, split), so that changing one size leaves the other sets unchanged.

    Args:
        seed (int): ``--seed``.
        set_index (int): The set's position in ``SPLITS``.
        split_index (int): The split's position in its set's splits.

    Returns:
        np.random.RandomState: The stream the split's writer draws from.
    """
    return np.random.RandomState(seed * 1000 + set_index * 10 + split_index)


def main() -> None:
    args = parse_args()
    if args.scale <= 0:
        raise SystemExit(f'--scale must be positive, got {args.scale}')
    if args.large_scene is not None:
        if args.large_scene < SCENE_SIZE:
            raise SystemExit(f'--large-scene must be at least {SCENE_SIZE}, got {args.large_scene}')
        root = args.out or 'data/shapes_large'
        existing = large_scene_paths(root, args.large_scene, args.large_scene_kind)
        if not args.force and all(osp.exists(path) for path in existing):
            print(f'{existing[0]} exists (use --force to rewrite it)')
            return
        start = time.time()
        paths = make_large_scene(root, args.large_scene, args.large_scene_kind, args.seed)
        print(f'[{time.time() - start:5.1f}s] wrote {paths[0]} and {paths[1]}')
        return
    args.out = args.out or 'data/shapes'
    settings = dict(seed=args.seed, scale=args.scale, version=11)
    stamp = osp.join(args.out, STAMP)
    if not args.force and osp.exists(stamp):
        with open(stamp) as f:
            if json.load(f) == settings:
                print(f'{args.out} is complete (seed {args.seed}, scale {args.scale})')
                return
    # Generated data only: never delete a folder this script did not make.
    if osp.isdir(args.out) and os.listdir(args.out):
        if not osp.exists(stamp) and not osp.exists(osp.join(args.out, '.partial')):
            raise SystemExit(f'{args.out} exists and was not written by this script; '
                             'choose another --out')
        shutil.rmtree(args.out)
    os.makedirs(args.out, exist_ok=True)
    open(osp.join(args.out, '.partial'), 'w').close()
    start = time.time()
    for offset, (name, (writer, splits)) in enumerate(SPLITS.items()):
        for split_offset, (split, count) in enumerate(splits.items()):
            rng = split_rng(args.seed, offset, split_offset)
            writer(osp.join(args.out, name), split, max(6, int(round(count * args.scale))), rng)
        print(f'[{time.time() - start:5.1f}s] wrote {name}: ' +
              ', '.join(f'{s} {max(6, int(round(c * args.scale)))}' for s, c in splits.items()))
    os.remove(osp.join(args.out, '.partial'))
    with open(stamp, 'w') as f:
        json.dump(settings, f)


if __name__ == '__main__':
    main()
