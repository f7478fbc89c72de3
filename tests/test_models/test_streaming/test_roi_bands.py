"""extract_roi_bands (RoI features read from the row spans the RoIs cover) against mmdet's
SingleRoIExtractor on whole levels."""
import pytest
import torch
from mmdet.models.roi_heads.roi_extractors import SingleRoIExtractor

from mmlinear.models.streaming.roi_bands import extract_roi_bands, group_rows


def random_rois(count, height, width, seed=0):
    generator = torch.Generator().manual_seed(seed)
    corners = torch.rand(count, 2, 2, generator=generator) * torch.tensor([width, height])
    boxes = torch.cat([corners.min(1).values, corners.max(1).values], 1)
    return torch.cat([torch.zeros(count, 1), boxes], 1)


@pytest.mark.parametrize('aligned', [True, False])
@pytest.mark.parametrize('head_rows', [1, 4, 1000])
def test_equals_single_roi_extractor_on_whole_levels(aligned, head_rows):
    height, width, strides = 520, 408, [4, 8, 16, 32]
    extractor = SingleRoIExtractor(
        roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio=0, aligned=aligned),
        out_channels=6,
        featmap_strides=strides)
    torch.manual_seed(1)
    levels = [torch.randn(1, 6, -(-height // s), -(-width // s)) for s in strides]
    # Small boxes for the fine levels, large ones for the coarse, and boxes on the borders.
    rois = torch.cat([
        random_rois(40, height, width),
        torch.tensor([[0, 0, 0, 30, 20], [0, 300, 480, 408, 520], [0, 0, 0, 408, 520.]])
    ])
    expected = extractor(tuple(levels), rois)

    def read_level(level, span):
        return levels[level][:, :, span[0]:span[1]].contiguous()

    shapes = [tuple(level.shape[2:]) for level in levels]
    got = extract_roi_bands(extractor, read_level, shapes, rois, head_rows)
    assert len(set(extractor.map_roi_levels(rois, 4).tolist())) > 2
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)


def test_groups_hold_at_most_band_rows_or_one_roi():
    first = torch.tensor([0, 2, 9, 3, 20])
    stop = torch.tensor([4, 5, 12, 30, 22])
    groups = group_rows(first, stop, head_rows=6)
    members = sorted(i for indices, _ in groups for i in indices.tolist())
    assert members == [0, 1, 2, 3, 4]
    for indices, (start, end) in groups:
        assert start == int(first[indices].min()) and end == int(stop[indices].max())
        assert end - start <= max(6, int((stop - first)[indices].max()))
