"""NormalizedRows reads a huge image by rows as the model's own data preprocessor would."""
import numpy as np
import pytest
import torch
from mmdet.models.data_preprocessors import DetDataPreprocessor

from mmlinear.models.data_preprocessors import NChannelSegDataPreprocessor, NormalizedRows

MEAN = [10.0, 20.0, 30.0, 40.0]
STD = [2.0, 3.0, 4.0, 5.0]


def image(channels: int) -> np.ndarray:
    rng = np.random.default_rng(channels)
    return rng.integers(0, 255, (6, 5, channels), dtype=np.uint8)


def preprocessed(preprocessor, array: np.ndarray) -> torch.Tensor:
    """The preprocessor's own (1, C, H, W) input of the image, unpadded."""
    packed = torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1)))
    return preprocessor(dict(inputs=[packed], data_samples=None))['inputs']


@pytest.mark.parametrize('channels', [3, 4])
@pytest.mark.parametrize('bgr_to_rgb', [False, True])
def test_rows_equal_the_segmentation_preprocessor_which_reverses_three_channels_only(
        channels, bgr_to_rgb):
    preprocessor = NChannelSegDataPreprocessor(
        mean=MEAN[:channels], std=STD[:channels], bgr_to_rgb=bgr_to_rgb)
    array = image(channels)
    rows = NormalizedRows(array, preprocessor)
    assert rows.channel_conversion == (bgr_to_rgb and channels == 3)
    torch.testing.assert_close(
        rows[:, :, 2:5], preprocessed(preprocessor, array)[:, :, 2:5], rtol=0, atol=0)


def test_rows_equal_mmdets_preprocessor_on_three_channels():
    preprocessor = DetDataPreprocessor(mean=MEAN[:3], std=STD[:3], bgr_to_rgb=True)
    array = image(3)
    torch.testing.assert_close(
        NormalizedRows(array, preprocessor)[:, :, 0:6],
        preprocessed(preprocessor, array),
        rtol=0,
        atol=0)


def test_mmdets_conversion_of_four_channels_is_refused():
    """mmengine's preprocessor takes channels [2, 1, 0] of any image, which would drop the
    fourth: a clear error instead of a silently different input."""
    preprocessor = DetDataPreprocessor(mean=MEAN[:1], std=STD[:1], bgr_to_rgb=True)
    with pytest.raises(ValueError, match=r'needs 3 channels; the image has 4 \(set bgr_to_rgb'):
        NormalizedRows(image(4), preprocessor)
