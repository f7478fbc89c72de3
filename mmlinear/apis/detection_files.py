"""Detections of a whole image written as COCO JSON (RLE masks) and as GeoJSON (mask outlines
and box corners in map coordinates where the raster is georeferenced, else in pixels)."""
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from mmlinear.models.streaming.mask_rle import rle_to_region
from .rasters import Georeference


def _class_name(classes: Sequence[str], label: int) -> str:
    return classes[label] if label < len(classes) else str(label)


def coco_detections(instances: Any, classes: Sequence[str], file_name: str, height: int,
                    width: int) -> Dict[str, Any]:
    """The detections of one image as a COCO dataset (``images``, ``categories``,
    ``annotations``): loadable by ``pycocotools.coco.COCO`` and by ``COCO.loadRes`` through
    its ``annotations``.

    Args:
        instances (InstanceData): ``bboxes`` (N, 4) x1, y1, x2, y2 in pixels, ``scores``,
            ``labels`` and optionally ``masks`` (N COCO RLEs of the whole image).
        classes (Sequence[str]): The class names by label (category ids are labels + 1).
        file_name (str): The image's file name.
        height (int): Rows of the image.
        width (int): Columns of the image.

    Returns:
        dict: The COCO dictionary; every annotation has ``bbox`` (x, y, w, h), ``score``,
        ``category_id``, ``area`` (mask pixels, else the box's), and ``segmentation`` (its RLE)
        where there are masks.
    """
    from pycocotools import mask as mask_util
    masks = instances.masks if 'masks' in instances else None
    annotations = []
    for index, (box, score, label) in enumerate(
            zip(instances.bboxes.tolist(), instances.scores.tolist(), instances.labels.tolist())):
        x1, y1, x2, y2 = box
        annotation = dict(
            id=index + 1,
            image_id=1,
            category_id=label + 1,
            bbox=[x1, y1, x2 - x1, y2 - y1],
            score=score,
            area=(x2 - x1) * (y2 - y1),
            iscrowd=0)
        if masks is not None:
            annotation['segmentation'] = masks[index]
            annotation['area'] = int(mask_util.area(masks[index]))
        annotations.append(annotation)
    return dict(
        images=[dict(id=1, file_name=file_name, height=height, width=width)],
        categories=[dict(id=i + 1, name=name) for i, name in enumerate(classes)],
        annotations=annotations)


def mask_polygons(rle: Dict[str, Any], transform: Any) -> Optional[Dict[str, Any]]:
    """The outline of an RLE mask as a GeoJSON MultiPolygon along pixel edges, through
    ``transform`` (pixel column, row to map x, y); None for an empty mask.

    The mask is decoded only over its own extent (:func:`rle_to_region`), and traced by
    ``rasterio.features.shapes`` (GDAL's polygonize), holes included.
    """
    from rasterio.features import shapes
    from rasterio.transform import Affine
    region, top, left = rle_to_region(rle)
    if not region.any():
        return None
    polygons = [
        geometry['coordinates'] for geometry, _ in shapes(
            region.astype(np.uint8),
            mask=region,
            transform=transform @ Affine.translation(left, top))
    ]
    return dict(type='MultiPolygon', coordinates=polygons)


def geojson_detections(instances: Any, classes: Sequence[str],
                       georeference: Optional[Georeference]) -> Dict[str, Any]:
    """The detections as a GeoJSON FeatureCollection.

    Each feature's geometry is its mask's outline (a MultiPolygon along pixel edges; null for
    an empty mask) or, without masks, its box as a Polygon; its properties hold ``label``,
    ``class``, ``score``, ``box_pixels`` (x1, y1, x2, y2) and ``box_corners``, the box's four
    corners (top-left, top-right, bottom-right, bottom-left) in the output's coordinates.
    With a georeference the coordinates are the raster's map coordinates (its affine
    transform of the pixel corners) and the collection names its CRS in a ``crs`` member (as
    GeoJSON before RFC 7946 did: RFC 7946 knows WGS 84 only, and a projected scene stays in
    its own CRS); without one they are pixel coordinates (column, row).

    Args:
        instances (InstanceData): As for :func:`coco_detections`.
        classes (Sequence[str]): The class names by label.
        georeference (Georeference, optional): The raster's CRS and transform.

    Returns:
        dict: The FeatureCollection.
    """
    from rasterio.transform import Affine
    transform = georeference.transform if georeference is not None else Affine.identity()
    masks = instances.masks if 'masks' in instances else None
    features: List[Dict[str, Any]] = []
    for index, (box, score, label) in enumerate(
            zip(instances.bboxes.tolist(), instances.scores.tolist(), instances.labels.tolist())):
        x1, y1, x2, y2 = box
        corners = [list(transform @ point) for point in ((x1, y1), (x2, y1), (x2, y2), (x1, y2))]
        if masks is not None:
            geometry = mask_polygons(masks[index], transform)
        else:
            geometry = dict(type='Polygon', coordinates=[corners + corners[:1]])
        features.append(
            dict(
                type='Feature',
                geometry=geometry,
                properties=dict(
                    label=label,
                    **{'class': _class_name(classes, label)},
                    score=score,
                    box_pixels=box,
                    box_corners=corners)))
    collection: Dict[str, Any] = dict(type='FeatureCollection', features=features)
    if georeference is not None:
        collection['crs'] = dict(type='name', properties=dict(name=georeference.crs.to_string()))
    return collection
