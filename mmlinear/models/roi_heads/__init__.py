"""mmdet's RoI heads' inputs and outputs for whole images: RoI features from row spans of the
pyramid, masks as RLE in whole-image coordinates (mmdet, mmcv and pycocotools are needed only
when they are called)."""
from .mask_rle import masks_to_rle, region_to_rle, rle_counts, rle_to_region
from .roi_bands import extract_roi_bands, group_rows, roi_row_spans

__all__ = [
    'extract_roi_bands', 'group_rows', 'masks_to_rle', 'region_to_rle', 'rle_counts',
    'rle_to_region', 'roi_row_spans'
]
