"""mmseg's class-weighted cross-entropy on batches whose padding is labelled ``ignore_index``."""
from typing import Optional

import torch
from mmseg.models.losses import CrossEntropyLoss

from mmlinear.registry import MODELS


@MODELS.register_module()
class PaddedCrossEntropyLoss(CrossEntropyLoss):
    """mmseg's softmax ``CrossEntropyLoss`` whose class-weighted mean skips ignored pixels.

    Given class weights and no ``avg_factor``, mmseg 1.2.2's ``cross_entropy`` divides by the
    class weights of all labels, looked up one by one, the ignored ones included: a batch of
    crops of several sizes, padded with label 255 (``ignore_index``), raises an IndexError
    there (onedl-mmsegmentation 1.4.2 looks up the labelled pixels only, as this class does,
    and gives the same loss).
    This passes the divisor itself: the class weights of the pixels not ignored, summed. Where
    no pixel is ignored that is mmseg's divisor (a batch of one crop size trains as with
    ``CrossEntropyLoss``); otherwise the loss is the weighted mean over the labelled pixels,
    as mmseg's ``avg_non_ignore=True`` means it.

    Same arguments as mmseg's ``CrossEntropyLoss``, softmax only (``use_sigmoid`` and
    ``use_mask`` are refused).
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.use_sigmoid or self.use_mask:
            raise ValueError('PaddedCrossEntropyLoss is the softmax cross-entropy: '
                             'use_sigmoid and use_mask must be False')

    def forward(self,
                cls_score: torch.Tensor,
                label: torch.Tensor,
                weight: Optional[torch.Tensor] = None,
                avg_factor: Optional[torch.Tensor] = None,
                reduction_override: Optional[str] = None,
                ignore_index: int = -100,
                **kwargs) -> torch.Tensor:
        """The loss of mmseg's ``CrossEntropyLoss``, with the divisor of its class-weighted
        mean counting the labelled pixels only.

        Args:
            cls_score (torch.Tensor): (N, C, H, W) logits.
            label (torch.Tensor): (N, H, W) labels, ``ignore_index`` where unlabelled.
            weight (torch.Tensor, optional): Per-pixel weights. Defaults to None.
            avg_factor (torch.Tensor, optional): The mean's divisor; given, it is used as is.
                Defaults to None.
            reduction_override (str, optional): 'none', 'mean' or 'sum'. Defaults to None.
            ignore_index (int): The label of unlabelled pixels. Defaults to -100.

        Returns:
            torch.Tensor: The loss (a scalar unless the reduction is 'none').
        """
        reduction = reduction_override or self.reduction
        if self.class_weight is not None and avg_factor is None and reduction == 'mean':
            class_weight = cls_score.new_tensor(self.class_weight)
            avg_factor = class_weight[label[label != ignore_index]].sum()
        return super().forward(
            cls_score,
            label,
            weight,
            avg_factor=avg_factor,
            reduction_override=reduction_override,
            ignore_index=ignore_index,
            **kwargs)
