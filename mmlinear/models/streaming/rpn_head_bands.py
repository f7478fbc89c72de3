"""mmdet's RPN head over bands of rows of each pyramid level, its proposals merged over the
whole image with one NMS."""
from typing import Callable, List, Sequence, Tuple

import torch
from mmengine.structures import InstanceData
from torch import Tensor, nn

from .band_resize import Span, crop_band, expand_span
from .token_stream import row_bands


class RPNHeadBands:
    """Proposals of an mmdet ``RPNHead`` for the whole image, its convolutions run over bands
    of rows of each pyramid level.

    The head's 3 x 3 convolution reads one row of halo on each side of a band (cropped after
    it), its 1 x 1 convolutions none, so each band's scores and box deltas are exactly the
    whole level's rows. ``RPNHead._predict_by_feat_single`` keeps the ``nms_pre`` best anchors
    of each level before decoding; the best ``nms_pre`` of the whole level are among the best
    ``nms_pre`` of each band, so a band keeps only those (with their flat anchor indices) and
    the level's are picked from the union, in the same order. Their anchors come from
    ``prior_generator.sparse_priors`` (equal to the whole grid's rows), the boxes are decoded
    by the head's coder, and the head's own ``_bbox_post_process`` filters small boxes and runs
    the one NMS over all levels (levels apart, as mmdet does).

    Args:
        rpn_head (nn.Module): An mmdet ``RPNHead``.
        read_level (Callable[[int, Span], Tensor]): Returns rows ``span`` of pyramid level
            ``level`` as a (1, C, rows, W_level) tensor.
        level_shapes (Sequence[tuple[int, int]]): (H, W) of every level the head reads.
    """

    def __init__(self, rpn_head: nn.Module, read_level: Callable[[int, Span], Tensor],
                 level_shapes: Sequence[Tuple[int, int]]) -> None:
        check_rpn_head(rpn_head)
        self.head, self.read_level = rpn_head, read_level
        self.level_shapes = list(level_shapes)[:rpn_head.prior_generator.num_levels]

    def band_outputs(self, level: int, span: Span) -> Tuple[Tensor, Tensor]:
        """Scores and box deltas of rows ``span`` of ``level``, flattened in mmdet's order.

        Returns:
            tuple[Tensor, Tensor]: (rows * W * A,) scores and (rows * W * A, 4) deltas.
        """
        wide = expand_span(span, 1, self.level_shapes[level][0])  # the 3 x 3 conv's halo
        cls_score, bbox_pred = self.head.forward_single(self.read_level(level, wide))
        cls_score = crop_band(cls_score, wide[0], span)
        bbox_pred = crop_band(bbox_pred, wide[0], span)
        reg_dim = self.head.bbox_coder.encode_size
        bbox_pred = bbox_pred[0].permute(1, 2, 0).reshape(-1, reg_dim)
        cls_score = cls_score[0].permute(1, 2, 0).reshape(-1, self.head.cls_out_channels)
        if self.head.use_sigmoid_cls:
            scores = cls_score.sigmoid()[:, 0]
        else:  # mmdet's foreground is label 0, the background the last column
            scores = cls_score.softmax(-1)[:, 0]
        return scores, bbox_pred

    def level_candidates(self, level: int, rows: int, nms_pre: int) -> Tuple[Tensor, ...]:
        """The anchors of ``level`` that mmdet keeps before NMS, band by band.

        Args:
            level (int): The pyramid level.
            rows (int): Rows per band.
            nms_pre (int): The best anchors kept per level (<= 0: all).

        Returns:
            tuple[Tensor, Tensor, Tensor]: Scores (K,), flat anchor indices (K,) and box
            deltas (K, 4), in the order ``_predict_by_feat_single`` leaves them.
        """
        height, width = self.level_shapes[level]
        per_row = width * self.head.prior_generator.num_base_anchors[level]
        scores: List[Tensor] = []
        indices: List[Tensor] = []
        deltas: List[Tensor] = []
        for span in row_bands(height, rows):
            band_scores, band_deltas = self.band_outputs(level, span)
            band_indices = torch.arange(
                span[0] * per_row, span[1] * per_row, device=band_scores.device)
            if 0 < nms_pre < band_scores.numel():
                band_scores, order = band_scores.sort(descending=True)
                band_scores, order = band_scores[:nms_pre], order[:nms_pre]
                band_indices, band_deltas = band_indices[order], band_deltas[order]
            scores.append(band_scores)
            indices.append(band_indices)
            deltas.append(band_deltas)
        scores, indices, deltas = torch.cat(scores), torch.cat(indices), torch.cat(deltas)
        if 0 < nms_pre < height * per_row:
            scores, order = scores.sort(descending=True)
            order = order[:nms_pre]
            scores, indices, deltas = scores[:nms_pre], indices[order], deltas[order]
        else:  # mmdet keeps the level whole, in its flat order
            order = indices.argsort()
            scores, indices, deltas = scores[order], indices[order], deltas[order]
        return scores, indices, deltas

    def proposals(self, rows: int, img_meta: dict) -> InstanceData:
        """The RPN's proposals for the whole image (``rpn_head.predict`` with
        ``rescale=False``).

        Args:
            rows (int): Rows per band of each level.
            img_meta (dict): The image's meta information (``img_shape``).

        Returns:
            InstanceData: ``bboxes`` (K, 4), ``scores`` (K,) and ``labels`` (K,), as mmdet's
            RPN head returns them.
        """
        cfg = self.head.test_cfg
        nms_pre = cfg.get('nms_pre', -1)
        generator = self.head.prior_generator
        mlvl_scores, mlvl_priors, mlvl_deltas, level_ids = [], [], [], []
        for level, shape in enumerate(self.level_shapes):
            scores, indices, deltas = self.level_candidates(level, rows, nms_pre)
            mlvl_priors.append(
                generator.sparse_priors(indices, shape, level, deltas.dtype, deltas.device))
            mlvl_scores.append(scores)
            mlvl_deltas.append(deltas)
            level_ids.append(torch.full_like(indices, level))
        results = InstanceData()
        results.bboxes = self.head.bbox_coder.decode(
            torch.cat(mlvl_priors), torch.cat(mlvl_deltas), max_shape=img_meta['img_shape'])
        results.scores = torch.cat(mlvl_scores)
        results.level_ids = torch.cat(level_ids)
        return self.head._bbox_post_process(
            results=results, cfg=cfg, rescale=False, img_meta=img_meta)


def check_rpn_head(rpn_head: nn.Module) -> None:
    """Raise a TypeError unless ``rpn_head`` is mmdet's ``RPNHead`` (whose bands this plans)."""
    from mmdet.models.dense_heads import RPNHead
    if type(rpn_head) is not RPNHead:
        raise TypeError(f'banded proposals need mmdet\'s RPNHead (one 3 x 3 convolution, then '
                        f'1 x 1 scores and deltas), got {type(rpn_head).__name__}')
