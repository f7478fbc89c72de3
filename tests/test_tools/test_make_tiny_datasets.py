import hashlib
import json
import os
import os.path as osp
import subprocess
import sys

from analysis_tools_loader import load_tool
from conftest import REPO_ROOT

from mmlinear.utils.shape_scenes import demo_scene

SCRIPT = osp.join(REPO_ROOT, 'tools/misc/make_tiny_datasets.py')


def digest(root):
    h = hashlib.sha256()
    for dirpath, _, files in sorted(os.walk(root)):
        for name in sorted(files):
            path = osp.join(dirpath, name)
            h.update(osp.relpath(path, root).encode())
            with open(path, 'rb') as f:
                h.update(f.read())
    return h.hexdigest()


def test_generation_is_deterministic_and_formats_are_valid(tiny_data, tmp_path):
    again = tmp_path / 'again'
    subprocess.run([sys.executable, SCRIPT, '--out',
                    str(again), '--scale', '0.05'],
                   check=True,
                   capture_output=True)
    assert digest(tiny_data) == digest(str(again))
    assert sorted(os.listdir(osp.join(tiny_data, 'cls',
                                      'train'))) == ['circle', 'square', 'triangle']
    assert sorted(os.listdir(osp.join(tiny_data, 'relation', 'val'))) == ['different', 'same']
    with open(osp.join(tiny_data, 'coco', 'annotations', 'instances_train.json')) as f:
        coco = json.load(f)
    assert [c['name'] for c in coco['categories']] == ['circle', 'square', 'triangle']
    for ann in coco['annotations']:
        assert len(ann['segmentation'][0]) >= 6 and ann['area'] > 0
        x, y, w, h = ann['bbox']
        assert 0 <= x and 0 <= y and x + w <= 128 and y + h <= 128
    images = sorted(os.listdir(osp.join(tiny_data, 'ade', 'images', 'training')))
    labels = sorted(os.listdir(osp.join(tiny_data, 'ade', 'annotations', 'training')))
    assert [i.replace('.jpg', '.png') for i in images] == labels


def test_second_run_is_a_no_op_and_foreign_folders_are_kept(tiny_data, tmp_path):
    result = subprocess.run([sys.executable, SCRIPT, '--out', tiny_data, '--scale', '0.05'],
                            check=True,
                            capture_output=True,
                            text=True)
    assert 'is complete' in result.stdout
    foreign = tmp_path / 'mine'
    foreign.mkdir()
    (foreign / 'keep.txt').write_text('user data')
    result = subprocess.run(
        [sys.executable, SCRIPT, '--out', str(foreign)], capture_output=True, text=True)
    assert result.returncode != 0 and 'was not written by this script' in result.stderr
    assert (foreign / 'keep.txt').read_text() == 'user data'


def test_the_large_scene_is_a_georeferenced_four_channel_16_bit_geotiff(tmp_path):
    """An odd size (300: the last row and column of 128-pixel scenes are cut)."""
    import numpy as np
    import rasterio
    subprocess.run([sys.executable, SCRIPT, '--out',
                    str(tmp_path), '--large-scene', '300'],
                   check=True,
                   capture_output=True)
    with rasterio.open(tmp_path / 'scene_300.tif') as image, \
            rasterio.open(tmp_path / 'labels_300.tif') as labels:
        assert (image.count, image.dtypes[0], image.shape) == (4, 'uint16', (300, 300))
        assert image.crs.to_epsg() == 32633 and image.transform.a == 0.5
        assert image.profile['tiled'] and labels.transform == image.transform
        channels, label_map = image.read(), labels.read(1)
    assert set(np.unique(label_map)) == {0, 1, 2, 3}
    assert (channels % 257 == 0).all()  # 8-bit scenes scaled to 16 bits
    np.testing.assert_array_equal(channels[3], channels[:3].max(0))
    # The shapes are brighter than every background.
    assert channels[:3, label_map > 0].max(0).min() >= 120 * 257
    # Written under temporary names, renamed when complete: only the two finished files.
    assert sorted(p.name for p in tmp_path.iterdir()) == ['labels_300.tif', 'scene_300.tif']
    result = subprocess.run([sys.executable, SCRIPT, '--out',
                             str(tmp_path), '--large-scene', '64'],
                            capture_output=True,
                            text=True)
    assert result.returncode != 0 and '--large-scene must be at least 128' in result.stderr


def test_the_continuous_large_scene_is_written_as_the_library_draws_it(tmp_path):
    """``--large-scene-kind continuous``: its own file names beside the mosaic's, the bands of
    ``ContinuousScene`` for the seed, as the mosaic's GeoTIFF is."""
    import numpy as np
    import rasterio

    from mmlinear.utils.large_shape_scenes import ContinuousScene
    options = ['--large-scene', '300', '--large-scene-kind', 'continuous', '--seed', '3']
    subprocess.run(
        [sys.executable, SCRIPT, '--out', str(tmp_path), *options], check=True, capture_output=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        'continuous_labels_300.tif', 'continuous_scene_300.tif'
    ]
    with rasterio.open(tmp_path / 'continuous_scene_300.tif') as image, \
            rasterio.open(tmp_path / 'continuous_labels_300.tif') as labels:
        assert (image.count, image.dtypes[0], image.shape) == (4, 'uint16', (300, 300))
        assert image.crs.to_epsg() == 32633 and labels.transform == image.transform
        bands, label_map = image.read(), labels.read(1)
    scene = list(ContinuousScene(300, seed=3))
    np.testing.assert_array_equal(label_map, np.concatenate([band.labels for band in scene]))
    rgb = np.concatenate([band.image for band in scene]).transpose(2, 0, 1)
    np.testing.assert_array_equal(bands[:3], rgb.astype(np.uint16) * 257)
    np.testing.assert_array_equal(bands[3], bands[:3].max(0))


def test_the_large_training_scenes_are_continuous_scenes_in_the_ade_layout(tiny_data):
    """ade_large/{images,annotations}/training: the label maps of the continuous scenes that
    the split's stream seeds, at their full side, beside .jpg images of that side."""
    import numpy as np
    from PIL import Image

    from mmlinear.utils.large_shape_scenes import ContinuousScene
    generator = load_tool('make_tiny_datasets', osp.dirname(SCRIPT))
    root = osp.join(tiny_data, 'ade_large')
    names = sorted(os.listdir(osp.join(root, 'annotations', 'training')))
    assert len(names) == 6  # the fixture's --scale gives the smallest split
    rng = generator.split_rng(0, list(generator.SPLITS).index('ade_large'), 0)
    size = generator.LARGE_TRAINING_SCENE
    for name in names:
        scene = list(ContinuousScene(size, seed=int(rng.randint(2**31))))
        labels = np.asarray(Image.open(osp.join(root, 'annotations', 'training', name)))
        np.testing.assert_array_equal(labels, np.concatenate([band.labels for band in scene]))
        image = Image.open(osp.join(root, 'images', 'training', name.replace('.png', '.jpg')))
        assert image.size == (size, size) and image.mode == 'RGB'


def test_pairs_labels_say_whether_another_disc_has_the_colour(tiny_data):
    """Recomputed from each scene: the discs (connected label regions), their colours (the
    nearest palette colour to the image inside them), and from those the label each must
    have."""
    import numpy as np
    from analysis_tools_loader import load_tool
    from PIL import Image
    from scipy import ndimage
    tool = load_tool('make_tiny_datasets', osp.join(REPO_ROOT, 'tools', 'misc'))
    palette = np.array(tool.RELATION_PALETTE, float)
    paired, single = (tool.PAIR_CLASSES.index(c) for c in ('paired', 'single'))
    root = osp.join(tiny_data, 'pairs')
    counts = {paired: 0, single: 0}
    for split in ('training', 'validation'):
        names = sorted(os.listdir(osp.join(root, 'annotations', split)))
        images = sorted(os.listdir(osp.join(root, 'images', split)))
        assert names and [i.replace('.jpg', '.png') for i in images] == names
        for name in names:
            labels = np.array(Image.open(osp.join(root, 'annotations', split, name)))
            image = np.array(
                Image.open(osp.join(root, 'images', split, name.replace('.png', '.jpg'))), float)
            assert labels.shape == image.shape[:2] == (128, 128)
            assert set(np.unique(labels)) <= {0, paired, single}
            shapes, count = ndimage.label(labels > 0)
            assert 3 <= count <= 5
            colours = []
            for i in range(1, count + 1):
                inside = shapes == i
                assert len(np.unique(labels[inside])) == 1  # one label per disc
                # One size: the disc's area, give or take its rasterised outline.
                assert abs(inside.sum() / (np.pi * tool.PAIR_RADIUS**2) - 1) < 0.15
                # The interior, away from the JPEG's blurred edges.
                rgb = np.median(image[ndimage.binary_erosion(inside, iterations=2)], 0)
                distance = np.linalg.norm(palette - rgb, axis=1)
                assert distance.min() < 25
                colours.append(int(distance.argmin()))
                # More than a patch from every other disc.
                gap = ndimage.distance_transform_edt(~inside)[(shapes > 0) & ~inside]
                assert gap.size == 0 or gap.min() > 16
            for i, colour in enumerate(colours):
                expected = paired if colours.count(colour) > 1 else single
                assert labels[shapes == i + 1][0] == expected
                counts[expected] += 1
    assert min(counts.values()) > 0  # both labels occur


def test_depth_maps_round_trip_through_mmseg_nyu_loader(tiny_data):
    """mmseg's NYUDataset and LoadDepthAnnotation (millimetres to metres, as for NYUv2) read
    back the depth the generator computes for each scene, to the millimetre: the ground from
    6 m (top row) to 2 m (bottom row), every shape nearer than the ground behind it."""
    import numpy as np
    from mmcv.transforms import LoadImageFromFile
    from mmseg.datasets import NYUDataset
    from mmseg.datasets.transforms import LoadDepthAnnotation
    generator = load_tool('make_tiny_datasets', osp.dirname(SCRIPT))
    ground_depth = generator.ground_depth(128)
    assert tuple(ground_depth[[0, -1]]) == (6., 2.)
    set_index = list(generator.SPLITS).index('depth')
    for split_index, (split, count) in enumerate(generator.SPLITS['depth'][1].items()):
        dataset = NYUDataset(
            data_root=osp.join(tiny_data, 'depth'),
            data_prefix=dict(img_path=f'images/{split}', depth_map_path=f'annotations/{split}'),
            pipeline=[LoadImageFromFile(),
                      LoadDepthAnnotation(depth_rescale_factor=1e-3)])
        assert len(dataset) == max(6, round(count * 0.05))  # the fixture's --scale
        # The generator's own stream for this split gives the same scenes again.
        rng = generator.split_rng(0, set_index, split_index)
        for sample in dataset:
            _, label_map, instances = demo_scene(rng, 128)
            loaded = sample['gt_depth_map']
            assert loaded.dtype == np.float32 and sample['img'].shape == (128, 128, 3)
            np.testing.assert_allclose(
                loaded, generator.scene_depth(label_map, instances), rtol=0, atol=5.01e-4)
            rows = np.indices(label_map.shape)[0]
            ground = label_map == 0
            np.testing.assert_allclose(loaded[ground], ground_depth[rows[ground]], atol=5.01e-4)
            shapes = ~ground
            assert shapes.any() and (loaded[shapes] <= ground_depth[rows[shapes]] + 1e-3).all()


def shape_pixels(image):
    """The shape's pixels of a classification image: every channel at least 117, which every
    shape colour (120-255) reaches and no background pixel (at most 89 + 24) does."""
    import numpy as np
    return np.asarray(image).min(2) >= 117


def shape_kind(mask):
    """The class of an upright shape from the share of its bounding box it fills: 1 for a
    square, pi / 4 for a circle, 1 / 2 for a triangle."""
    import numpy as np
    rows, cols = np.nonzero(mask)
    fill = mask.sum() / ((np.ptp(rows) + 1) * (np.ptp(cols) + 1))
    return 'square' if fill > 0.9 else 'triangle' if fill < 0.64 else 'circle'


def test_the_v2_split_is_in_imagenet_v2_layout_each_folder_its_class_shifted(tiny_data):
    """cls_v2/test holds folders 0, 1, 2; the shape drawn in each image is the class of its
    folder's index in CLASSES (read from the pixels), and the documented shift holds against
    the val split: smaller shapes, noisier backgrounds."""
    import numpy as np
    from PIL import Image
    generator = load_tool('make_tiny_datasets', osp.dirname(SCRIPT))
    # Added last: the other sets keep their streams.
    assert list(generator.SPLITS)[-2:] == ['cls_v2', 'ade_large']
    v2_root = osp.join(tiny_data, 'cls_v2', 'test')
    assert sorted(os.listdir(v2_root)) == ['0', '1', '2']
    areas, noise = {'v2': [], 'val': []}, {'v2': [], 'val': []}
    folders = [(v2_root, str(label), 'v2') for label in range(3)]
    folders += [(osp.join(tiny_data, 'cls', 'val'), name, 'val') for name in generator.CLASSES]
    for root, folder, split in folders:
        names = sorted(os.listdir(osp.join(root, folder)))
        assert names
        for name in names:
            image = np.asarray(Image.open(osp.join(root, folder, name)).convert('RGB'), float)
            mask = shape_pixels(image)
            kind = shape_kind(mask)
            assert kind == (generator.CLASSES[int(folder)] if split == 'v2' else folder), \
                (split, folder, name)
            areas[split].append(mask.sum())
            # The background's noise: its pixels' spread around their image's mean colour.
            noise[split].append(image[~mask].std(0).mean())
    assert sum(len(a) for a in areas.values()) == 2 * max(6, round(300 * 0.05))
    # Radii 10-18 against 14-26: median areas in about the ratio (14 / 20)^2 = 0.49.
    assert np.median(areas['v2']) < 0.6 * np.median(areas['val'])
    # +-24 grey levels against +-12: twice the standard deviation (uniform noise).
    assert 1.8 < np.mean(noise['v2']) / np.mean(noise['val']) < 2.2
