"""Whole-image instance detection over bands of rows: a streamed backbone, the neck band by
band into a pyramid, the RPN over bands of each level, RoI heads on the merged proposals."""
from typing import Any, Callable, NamedTuple, Optional, Sequence, Tuple

import torch
from mmengine.structures import InstanceData
from torch import Tensor, nn

from ..utils import check_choice
from .band_planner import BandPlan, BandPlanner, StreamOptions, streamed_parts
from .band_progress import BandProgress
from .band_resize import Span
from .mask_rle import masks_to_bitmaps, masks_to_rle, pasted_masks
from .memory_model import GB, StreamedMemory
from .roi_bands import extract_roi_bands
from .rpn_head_bands import RPNHeadBands, check_rpn_head
from .token_stream import allocate_buffer, row_bands

#: The forms of the masks :meth:`StreamedDetection.predict` gives: COCO RLE dicts, each
#: encoded from its box's region, or mmdet's whole-image (N, H, W) bool maps.
MASK_FORMATS = ('rle', 'bitmap')


class StreamedDetectionMemory(NamedTuple):
    """The predicted peak memory of a streamed detection beyond the weights, in bytes.

    The backbone runs first (its own peak, :class:`StreamedMemory`, with its output map);
    then the pyramid is built from the map band by band, and the RPN and RoI heads read it.

    Attributes:
        backbone (StreamedMemory): The backbone's streamed forward.
        pyramid_bytes (int): The pyramid's levels held in memory (0 with 'disk' buffers).
        head_band_bytes (int): The widest band of the neck or the RPN head.
        roi_bytes (int): The RoI heads: features of every proposal and detection, the head's
            activations, and the rows of a level read for a group of RoIs.
        head_rows (int): Rows of a level per band.
    """
    backbone: StreamedMemory
    pyramid_bytes: int
    head_band_bytes: int
    roi_bytes: int
    head_rows: int

    @property
    def total_bytes(self) -> int:
        """int: The larger of the backbone's phase and the heads' (with the map and the
        pyramid)."""
        return self.backbone.then_heads(self.pyramid_bytes +
                                        max(self.head_band_bytes, self.roi_bytes))

    def describe(self) -> str:
        """str: The total and its parts, in GB."""
        return (f'{self.total_bytes / GB:.2f} GB (backbone {self.backbone.describe()}; pyramid '
                f'{self.pyramid_bytes / GB:.2f}; bands of {self.head_rows} rows '
                f'{self.head_band_bytes / GB:.2f}; RoI heads {self.roi_bytes / GB:.2f})')


class StreamedDetection(BandPlanner):
    """An mmdet two-stage detector (Mask R-CNN, Faster R-CNN) run over an image in bands of
    rows, seeing the whole image as mmdet's ``predict`` does.

    The backbone streams (:meth:`BasePlainBackbone.forward_streamed`) and leaves its map; the
    simple pyramid's levels are made from it band by band
    (:meth:`SimpleFeaturePyramid.forward_rows`, with the halo of its convolutions) into whole
    levels, in memory or in mapped files; the RPN runs over bands of each level and its
    proposals are merged over the image with one NMS (:class:`RPNHeadBands`); the RoI heads
    take their features from the row spans of the levels the RoIs cover
    (:func:`extract_roi_bands`) and mmdet's own box head post-processing (one multi-class NMS
    over the image); masks are pasted into their boxes and written as RLE in whole-image
    coordinates (:func:`masks_to_rle`), or as mmdet's bool maps (:func:`masks_to_bitmaps`).

    Args:
        detector (nn.Module): An mmdet ``TwoStageDetector`` with an mmlinear plain backbone
            (``out_type='featmap'``), a ``SimpleFeaturePyramid`` neck with ``out_channels``,
            an ``RPNHead`` and a ``StandardRoIHead`` (its mask head optional).
    """

    task = 'detection'
    batch_of_one = True

    def __init__(self, detector: nn.Module) -> None:
        from mmdet.models.roi_heads import FCNMaskHead, SingleRoIExtractor, StandardRoIHead
        self.backbone, self.neck = streamed_parts(detector, self.task)
        rpn_head = getattr(detector, 'rpn_head', None)
        roi_head = getattr(detector, 'roi_head', None)
        # Exact types: a subclass (PointRend's RoI head, another mask head) predicts otherwise.
        if rpn_head is None or type(roi_head) is not StandardRoIHead:
            raise TypeError(f'streamed detection needs a two-stage detector with an RPNHead and '
                            f'a StandardRoIHead (Mask R-CNN, Faster R-CNN), got '
                            f'{type(detector).__name__} with {type(roi_head).__name__}')
        check_rpn_head(rpn_head)
        if not self.neck.out_convs:
            raise TypeError('streamed detection needs a SimpleFeaturePyramid with '
                            'out_channels (every level as wide as the heads read)')
        if roi_head.with_shared_head:
            raise TypeError('streamed detection does not run RoI heads with a shared head')
        extractors = [roi_head.bbox_roi_extractor]
        if roi_head.with_mask:
            extractors.append(roi_head.mask_roi_extractor)
            if type(roi_head.mask_head) is not FCNMaskHead:
                raise TypeError(f'streamed detection pastes masks of an FCNMaskHead, got '
                                f'{type(roi_head.mask_head).__name__}')
        for extractor in extractors:
            if type(extractor) is not SingleRoIExtractor:
                raise TypeError(f'streamed detection reads RoI features as a '
                                f'SingleRoIExtractor, got {type(extractor).__name__}')
        self.model = detector
        self.rpn_head, self.roi_head = rpn_head, roi_head

    def level_shapes(self, image_shape: Sequence[int]) -> list:
        """(H, W) of every pyramid level for (B, C, H, W) images."""
        return self.neck.level_shapes(self.backbone.grid_shape(image_shape))

    def finest_rows(self, image_shape: Sequence[int]) -> int:
        """Rows of the pyramid's finest level for (B, C, H, W) images."""
        return self.level_shapes(image_shape)[0][0]

    def predict_memory(self,
                       image_shape: Sequence[int],
                       *,
                       band_rows: int,
                       head_rows: int,
                       buffer: str = 'memory',
                       input_in_memory: bool = True) -> StreamedDetectionMemory:
        """The peak memory of :meth:`predict` beyond the weights, before any work (an
        estimate of the largest tensors alive at once; the backbone's part is its own model).

        Args:
            image_shape (Sequence[int]): (1, C, H, W).
            band_rows (int): The backbone's band height (patch rows).
            head_rows (int): Rows of a pyramid level per band (neck, RPN, RoI reads).
            buffer (str): Where the backbone's stream and map and the pyramid live.
            input_in_memory (bool): Whether the normalised image is one tensor in memory.

        Returns:
            StreamedDetectionMemory: The parts and the total.
        """
        backbone = self.backbone.predict_streamed_memory(
            image_shape, band_rows=band_rows, buffer=buffer, input_in_memory=input_in_memory)
        itemsize = self.backbone.patch_embed.projection.weight.element_size()
        map_shape = self.backbone.grid_shape(image_shape)
        map_channels = self.backbone.embed_dims
        out_channels = self.neck.out_convs[0][0].out_channels
        shapes = self.level_shapes(image_shape)
        pyramid = sum(h * w for h, w in shapes) * out_channels * itemsize
        anchors = max(self.rpn_head.prior_generator.num_base_anchors)
        feat_channels = self.rpn_head.rpn_conv.out_channels
        widest = 0
        for level, (_, width) in enumerate(shapes):
            scale = self.neck.scale_factors[min(level, len(self.neck.scale_factors) - 1)]
            rows = head_rows + 2
            map_rows = min(map_shape[0], int(rows / scale) + 2)
            neck = map_channels * map_rows * map_shape[1] + \
                width * rows * (map_channels * 2 + out_channels * 4)
            rpn = width * rows * (out_channels + 2 * feat_channels) + \
                2 * width * head_rows * anchors * (self.rpn_head.cls_out_channels + 4)
            widest = max(widest, neck + rpn)
        roi_bytes = self._roi_values(shapes, head_rows, out_channels) * itemsize
        return StreamedDetectionMemory(backbone, pyramid if buffer == 'memory' else 0,
                                       widest * itemsize, roi_bytes, head_rows)

    def _roi_values(self, shapes: Sequence[Tuple[int, int]], head_rows: int, channels: int) -> int:
        """Values the RoI heads hold at their widest: the proposals' pooled features and the
        box head's layers, the detections' mask features, and a group's rows of a level."""
        proposals = self.rpn_head.test_cfg.get('max_per_img', 1000)
        detections = self.roi_head.test_cfg.get('max_per_img', 100)
        box_size = self.roi_head.bbox_roi_extractor.roi_layers[0].output_size
        pooled = proposals * channels * box_size[0] * box_size[1]
        head = self.roi_head.bbox_head
        values = 2 * pooled + proposals * 2 * getattr(head, 'fc_out_channels', channels)
        if self.roi_head.with_mask:
            mask_size = self.roi_head.mask_roi_extractor.roi_layers[0].output_size
            mask_head = self.roi_head.mask_head
            mask_values = channels + 2 * mask_head.conv_out_channels + 4 * (
                mask_head.conv_out_channels + mask_head.num_classes)
            values = max(values, detections * mask_size[0] * mask_size[1] * mask_values)
        return values + head_rows * max(w for _, w in shapes) * channels

    def predict(self,
                image: Any,
                plan: Optional[BandPlan] = None,
                options: StreamOptions = StreamOptions(),
                *,
                img_meta: Optional[dict] = None,
                rescale: bool = False,
                mask_format: str = 'rle') -> InstanceData:
        """Detect the instances of one whole image (inference).

        Args:
            image (Tensor | array-like): (1, C, H, W), normalised as the data preprocessor
                normalises it (a tensor, or an array read by rows; see
                :meth:`BasePlainBackbone.forward_streamed`).
            plan (BandPlan, optional): The band heights, planned beforehand by
                :meth:`plan_bands` for this image and these options; None (the default)
                plans them from ``options``.
            options (StreamOptions): Band heights (``head_rows``: rows of a pyramid level),
                memory limit (checked against :meth:`predict_memory`), buffers (the
                backbone's stream and map, and the pyramid) and progress bars. Defaults to
                picking them.
            img_meta (dict, optional): The image's meta information as a data sample of
                mmdet holds it: ``img_shape`` (the image's rows and columns inside a padded
                batch, to which boxes are clipped), ``ori_shape`` and ``scale_factor`` (w, h)
                of the test pipeline's resize. None (the default): the input is the image,
                not resized.
            rescale (bool): Whether to give boxes and masks in the original image's
                coordinates (``ori_shape``), as mmdet's ``predict(rescale=True)`` does; else
                in the input's. Defaults to False.
            mask_format (str): The masks' form, one of :data:`MASK_FORMATS`: 'rle' (the
                default), each mask encoded from its box's region, never a whole-image
                array; or 'bitmap', mmdet's (N, H, W) bool tensor on the model's device
                (N x H x W bytes, beside the predicted peak).

        Returns:
            InstanceData: ``bboxes`` (N, 4) in pixels, ``scores`` (N,), ``labels`` (N,) as
            mmdet's ``predict`` gives them (best first), and with a mask head ``masks``: N
            COCO RLEs (dicts with ``size`` and ``counts``) of the whole image, or its
            (N, H, W) bool maps; both of the original image with ``rescale``, else of the
            input (resized, unpadded).

        Raises:
            ValueError: An unknown ``mask_format``, before any work (with the checks of
                :meth:`plan_bands`).
        """
        check_choice('mask_format', mask_format, MASK_FORMATS)
        shape, plan = self.start(image, plan, options)
        head_rows = plan.head_rows
        if img_meta is None:
            img_meta = dict(img_shape=shape[2:], ori_shape=shape[2:], scale_factor=(1.0, 1.0))
        with torch.no_grad():
            pyramid = self._pyramid(image, plan, options)
            weight = self.backbone.patch_embed.projection.weight
            shapes = [tuple(level.shape[2:]) for level in pyramid]

            def read_level(level: int, span: Span) -> Tensor:
                rows = pyramid[level][:, :, span[0]:span[1]]
                # mmcv's RoIAlign reads raw NCHW memory: a contiguous copy of the rows.
                return rows.to(weight.device, weight.dtype).contiguous()

            with BandProgress(3, options.progress, label='heads') as bar:
                bar.describe('RPN')
                proposals = RPNHeadBands(self.rpn_head, read_level,
                                         shapes).proposals(head_rows, img_meta)
                bar.advance()
                bar.describe('boxes')
                # As StandardRoIHead.predict: with a mask head, the boxes are rescaled with
                # the masks, after the mask head has read the features inside them.
                with_mask = self.roi_head.with_mask
                box_rescale = rescale and not with_mask
                results = self._boxes(proposals, read_level, shapes, head_rows, img_meta,
                                      box_rescale)
                bar.advance()
                if with_mask:
                    bar.describe('masks')
                    results = self._masks(results, read_level, shapes, head_rows, img_meta, rescale,
                                          mask_format)
                bar.advance()
        return results

    def _pyramid(self, image: Any, plan: BandPlan, options: StreamOptions) -> list:
        """The neck's levels for the whole image, made band by band from the streamed map."""
        feature_map, read_map = self.stream_feature_map(image, plan.band_rows, options)
        map_shape = tuple(feature_map.shape[2:])
        shapes = self.neck.level_shapes(map_shape)
        channels = self.neck.out_convs[0][0].out_channels
        dtype = self.backbone.patch_embed.projection.weight.dtype
        levels = [
            allocate_buffer((1, channels) + tuple(level), dtype, options.buffer, options.buffer_dir)
            for level in shapes
        ]
        bands = [(level, span) for level, (height, _) in enumerate(shapes)
                 for span in row_bands(height, plan.head_rows)]
        with BandProgress(len(bands), options.progress, label='neck') as bar:
            for level, span in bands:
                levels[level][:, :, span[0]:span[1]] = self.neck.forward_rows(
                    read_map, map_shape, level, span).cpu()
                bar.advance()
        return levels

    def _boxes(self, proposals: InstanceData, read_level: Callable[[int, Span], Tensor],
               shapes: Sequence[Tuple[int, int]], head_rows: int, img_meta: dict,
               rescale: bool) -> InstanceData:
        """``roi_head.predict_bbox`` on the merged proposals, features read by row spans."""
        from mmdet.models.utils import empty_instances
        from mmdet.structures.bbox import bbox2roi
        rois = bbox2roi([proposals.bboxes])
        head = self.roi_head.bbox_head
        if not len(rois):
            return empty_instances([img_meta],
                                   rois.device,
                                   task_type='bbox',
                                   box_type=head.predict_box_type,
                                   num_classes=head.num_classes)[0]
        features = extract_roi_bands(self.roi_head.bbox_roi_extractor, read_level, shapes, rois,
                                     head_rows)
        cls_score, bbox_pred = head(features)
        return head.predict_by_feat(
            rois=(rois, ),
            cls_scores=(cls_score, ),
            bbox_preds=(bbox_pred, ),
            batch_img_metas=[img_meta],
            rcnn_test_cfg=self.roi_head.test_cfg,
            rescale=rescale)[0]

    def _masks(self, results: InstanceData, read_level: Callable[[int, Span], Tensor],
               shapes: Sequence[Tuple[int, int]], head_rows: int, img_meta: dict, rescale: bool,
               mask_format: str) -> InstanceData:
        """The detections with their masks as RLE or bool maps (``roi_head.predict_mask``,
        pasted box by box into the image ``FCNMaskHead.predict_by_feat`` pastes them into)."""
        from mmdet.structures.bbox import bbox2roi
        scale_factor = results.bboxes.new_tensor(img_meta['scale_factor'])
        height, width = img_meta['ori_shape'][:2]
        if rescale:
            bboxes = results.bboxes / scale_factor.repeat(2)
        else:  # the original image's shape, resized as the test pipeline resized it
            bboxes = results.bboxes
            height = round(height * scale_factor[1].item())
            width = round(width * scale_factor[0].item())
        mask_preds = bboxes.new_empty((0, 1, 1, 1))  # no detection: no mask, (0, H, W)
        if len(results):
            features = extract_roi_bands(self.roi_head.mask_roi_extractor, read_level, shapes,
                                         bbox2roi([results.bboxes]), head_rows)
            mask_preds = self.roi_head.mask_head(features)
        regions = pasted_masks(self.roi_head.mask_head, mask_preds, bboxes, results.labels,
                               (height, width), self.roi_head.test_cfg.mask_thr_binary)
        if mask_format == 'rle':
            masks = masks_to_rle(regions, (height, width))
        else:
            masks = masks_to_bitmaps(regions, len(bboxes), (height, width), bboxes.device)
        results.bboxes = bboxes
        results.masks = masks
        return results
