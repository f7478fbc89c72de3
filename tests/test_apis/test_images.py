import numpy as np
import pytest
import torch
from PIL import Image

from mmlinear.apis import list_images, load_images


def write_image(path, value, size=(6, 4)):
    Image.fromarray(np.full((size[1], size[0], 3), value, np.uint8)).save(path)


def test_folders_expand_sorted_and_files_stay_in_order(tmp_path):
    write_image(tmp_path / 'b.png', 0)
    write_image(tmp_path / 'a.png', 0)
    (tmp_path / 'notes.txt').touch()  # not an image: left out
    single = tmp_path / 'single.jpg'
    write_image(single, 0)
    files = list_images([str(single), str(tmp_path)])
    assert [f.rsplit('/', 1)[1] for f in files] == ['single.jpg', 'a.png', 'b.png', 'single.jpg']
    assert len(list_images([str(tmp_path)], max_images=1)) == 1
    with pytest.raises(FileNotFoundError, match='no image or folder at'):
        list_images([str(tmp_path / 'missing')])
    (tmp_path / 'empty').mkdir()
    with pytest.raises(FileNotFoundError, match=r'no images \(.png'):
        list_images([str(tmp_path / 'empty')])


def test_class_subfolders_are_searched_and_interleaved(tmp_path):
    # mmpretrain's CustomDataset layout: split/<class>/<image>, unequal class sizes.
    for cls, names in {'circle': ['c0.png', 'c1.png', 'c2.png'], 'square': ['s0.png']}.items():
        (tmp_path / cls).mkdir()
        for name in names:
            write_image(tmp_path / cls / name, 0)
    (tmp_path / 'top.png').touch()
    files = [f.split(str(tmp_path) + '/', 1)[1] for f in list_images([str(tmp_path)])]
    assert files == ['top.png', 'circle/c0.png', 'square/s0.png', 'circle/c1.png', 'circle/c2.png']
    two = list_images([str(tmp_path / 'circle'), str(tmp_path / 'square')], max_images=4)
    assert [f.rsplit('/', 1)[1] for f in two] == ['c0.png', 'c1.png', 'c2.png', 's0.png']
    (tmp_path / 'only_dirs' / 'empty_class').mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match='or their subfolders'):
        list_images([str(tmp_path / 'only_dirs')])


def test_images_are_resized_and_normalised(tmp_path):
    write_image(tmp_path / 'grey.png', 100)
    write_image(tmp_path / 'white.png', 255, size=(8, 8))
    x, shown = load_images(
        [str(tmp_path / 'grey.png'), str(tmp_path / 'white.png')],
        5,
        mean=(100., 100., 100.),
        std=(155., 155., 155.))
    assert x.shape == (2, 3, 5, 5) and x.dtype == torch.float32
    torch.testing.assert_close(x[0], torch.zeros(3, 5, 5))
    torch.testing.assert_close(x[1], torch.ones(3, 5, 5))
    assert shown[0].shape == (5, 5, 3) and shown[0].dtype == np.uint8
    with pytest.raises(ValueError, match='images differ in size; give --img-size'):
        load_images(
            [str(tmp_path / 'grey.png'), str(tmp_path / 'white.png')], None, (0., 0., 0.),
            (1., 1., 1.))
