"""SlideImage: a whole-slide image read by rows through OpenSlide (on a generic tiled TIFF,
the one slide format a test can write), and its refusals."""
import numpy as np
import pytest
import tifffile

from mmlinear.apis.large_image_inputs import open_image
from mmlinear.apis.whole_slide import SlideImage


def write_tiled_rgb(path, height=300, width=260, tile=64):
    rgb = np.random.default_rng(0).integers(0, 256, (height, width, 3), dtype=np.uint8)
    tifffile.imwrite(path, rgb, photometric='rgb', tile=(tile, tile))
    return str(path), rgb


def test_a_tiled_tiff_read_by_rows_at_full_resolution(tmp_path):
    path, rgb = write_tiled_rgb(tmp_path / 'slide.tif')
    with SlideImage(path) as image:
        assert image.shape == (300, 260, 3) and image.dtype == np.uint8
        assert image.georeference is None
        for start, stop in [(0, 300), (10, 77), (299, 500)]:
            np.testing.assert_array_equal(image[start:stop], rgb[start:stop])
        assert image[7:7].shape == (0, 260, 3)
        with pytest.raises(IndexError, match='slices by rows only'):
            image[0]


def test_slide_suffixes_open_through_openslide(tmp_path):
    # OpenSlide tells formats by content: a tiled TIFF named .svs is its generic TIFF.
    path, rgb = write_tiled_rgb(tmp_path / 'slide.svs')
    image = open_image(path)
    assert isinstance(image, SlideImage)
    np.testing.assert_array_equal(image[40:90], rgb[40:90])
    image.close()


def test_unreadable_slides_are_refused_naming_the_file(tmp_path):
    text = tmp_path / 'notes.svs'
    text.write_text('not a slide')
    with pytest.raises(
            ValueError,
            match=r"cannot read '.*notes.svs' as a whole-slide image: "
            r'OpenSlideUnsupportedFormatError'):
        open_image(text)
    # A striped (untiled) TIFF is not a format OpenSlide reads.
    striped = tmp_path / 'striped.ndpi'
    tifffile.imwrite(striped, np.zeros((64, 64, 3), np.uint8), photometric='rgb')
    with pytest.raises(ValueError, match='as a whole-slide image'):
        SlideImage(striped)
    path, _ = write_tiled_rgb(tmp_path / 'cut.svs')
    with open(path, 'rb') as f:
        content = f.read()
    with open(path, 'wb') as f:
        f.write(content[:len(content) // 2])
    with pytest.raises(ValueError, match=r'cut.svs'):
        with SlideImage(path) as image:
            image[0:300]
    with pytest.raises(FileNotFoundError, match='no whole-slide file'):
        SlideImage(tmp_path / 'missing.svs')
