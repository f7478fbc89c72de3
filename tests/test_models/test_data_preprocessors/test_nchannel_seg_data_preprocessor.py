"""NChannelSegDataPreprocessor: mmseg's SegDataPreProcessor bit for bit where mmseg takes the
input (3 channels), per-channel normalisation of any number of channels, and its refusals."""
import copy

import numpy as np
import pytest
import torch
from mmengine.structures import PixelData
from mmseg.models import SegDataPreProcessor
from mmseg.structures import SegDataSample

from mmlinear.models.data_preprocessors import (NChannelSegDataPreprocessor,
                                                PaddingMaskSegDataPreprocessor)

MEAN, STD = [123.675, 116.28, 103.53], [58.395, 57.12, 57.375]


def batch(channels, *shapes, dtype=torch.uint8, high=256):
    """Images of ``channels`` channels and their samples (a random label map each)."""
    generator = torch.Generator().manual_seed(channels)
    inputs, samples = [], []
    for shape in shapes:
        inputs.append(torch.randint(0, high, (channels, *shape), generator=generator).to(dtype))
        sample = SegDataSample()
        sample.gt_sem_seg = PixelData(
            data=torch.randint(0, 4, (1, *shape), generator=generator, dtype=torch.long))
        sample.set_metainfo(dict(img_shape=shape, ori_shape=shape))
        samples.append(sample)
    return dict(inputs=inputs, data_samples=samples)


def assert_same_output(ours, theirs):
    assert ours['inputs'].dtype == theirs['inputs'].dtype == torch.float32
    assert torch.equal(ours['inputs'], theirs['inputs'])
    for mine, other in zip(ours['data_samples'], theirs['data_samples']):
        assert mine.metainfo == other.metainfo
        assert torch.equal(mine.gt_sem_seg.data, other.gt_sem_seg.data)


PADDINGS = {
    'train-size': (True, dict(size=(72, 104)), ((64, 96), (70, 100))),
    'train-size_divisor': (True, dict(size_divisor=32), ((64, 96), (70, 100))),
    'test-unpadded': (False, dict(), ((70, 100), (70, 100))),
    'test-test_cfg': (False, dict(test_cfg=dict(size_divisor=32)), ((70, 100), (70, 100))),
}


@pytest.mark.parametrize('bgr_to_rgb', [False, True], ids=['bgr', 'bgr_to_rgb'])
@pytest.mark.parametrize('padding', sorted(PADDINGS))
def test_three_channels_equal_mmseg_bit_for_bit(padding, bgr_to_rgb):
    training, kwargs, shapes = PADDINGS[padding]
    args = dict(mean=MEAN, std=STD, bgr_to_rgb=bgr_to_rgb, pad_val=0, seg_pad_val=255, **kwargs)
    data = batch(3, *shapes)
    ours = NChannelSegDataPreprocessor(**args)(copy.deepcopy(data), training)
    theirs = SegDataPreProcessor(**args)(data, training)
    assert_same_output(ours, theirs)


@pytest.mark.parametrize('channels', [4, 13])
def test_n_channels_normalised_per_channel(channels):
    """16-bit multispectral images, padded to the crop when training: the valid region is
    (x - mean_c) / std_c in float32, the padding ``pad_val``; BGR to RGB leaves them alone."""
    mean = [100.0 * c + 50.0 for c in range(channels)]
    std = [10.0 * c + 7.0 for c in range(channels)]
    preprocessor = PaddingMaskSegDataPreprocessor(
        mean=mean, std=std, size=(40, 48), pad_val=0, bgr_to_rgb=True)
    data = batch(channels, (33, 48), (40, 41), dtype=torch.int32, high=4096)
    images = [image.numpy() for image in data['inputs']]
    out = preprocessor(data, training=True)['inputs']
    assert out.shape == (2, channels, 40, 48) and out.dtype == torch.float32
    column = (slice(None), None, None)
    for image, padded in zip(images, out):
        h, w = image.shape[1:]
        expected = (image.astype(np.float32) - np.float32(mean)[column]) / np.float32(std)[column]
        assert np.array_equal(padded[:, :h, :w].numpy(), expected)
        assert not padded[:, h:].any() and not padded[:, :, w:].any()
    assert out.padding_mask[0, 33:].all() and not out.padding_mask[0, :33].any()


def test_one_mean_and_std_for_all_channels():
    data = batch(5, (8, 8))
    image = data['inputs'][0].float()
    out = NChannelSegDataPreprocessor(mean=[10.0], std=[4.0])(data)['inputs'][0]
    assert torch.equal(out, (image - 10.0) / 4.0)


def test_mean_of_other_length_than_the_channels_is_refused():
    preprocessor = NChannelSegDataPreprocessor(mean=[1.0] * 4, std=[2.0] * 4)
    with pytest.raises(
            ValueError,
            match=r"mean has 4 values and its std 4, the image has 3 channels: each takes 1 "
            r'value \(all channels\) or 3 \(one per channel\)'):
        preprocessor(batch(3, (8, 8)))
    with pytest.raises(ValueError, match=r'std 3, the image has 4 channels'):
        NChannelSegDataPreprocessor(mean=[1.0], std=[2.0] * 3)(batch(4, (8, 8)))


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match='mean and std go together'):
        NChannelSegDataPreprocessor(mean=MEAN)
    with pytest.raises(ValueError, match='set one of them, not both'):
        NChannelSegDataPreprocessor(bgr_to_rgb=True, rgb_to_bgr=True)
    with pytest.raises(ValueError, match=r'std takes one number or one per channel, got \[\]'):
        NChannelSegDataPreprocessor(mean=[1.0], std=[])
    with pytest.raises(ValueError, match='mean takes one number or one per channel'):
        NChannelSegDataPreprocessor(mean=[[1.0, 2.0]], std=[1.0])
    with pytest.raises(ValueError, match=r'none of its values may be 0; got \[1.0, 0.0\]'):
        NChannelSegDataPreprocessor(mean=[0.0, 0.0], std=[1.0, 0.0])
    with pytest.raises(ValueError, match='training needs the data samples'):
        NChannelSegDataPreprocessor()(dict(inputs=batch(3, (8, 8))['inputs']), training=True)
    with pytest.raises(ValueError, match=r'one size, got \[\(8, 8\), \(8, 9\)\]'):
        NChannelSegDataPreprocessor()(batch(3, (8, 8), (8, 9)))


def test_builds_on_the_meta_device():
    """Tools build a model on the meta device to compare a checkpoint's keys and shapes."""
    with torch.device('meta'):
        preprocessor = NChannelSegDataPreprocessor(mean=MEAN, std=[58.0, 57.0, 57.5])
    assert preprocessor.std.shape == (3, 1, 1)
