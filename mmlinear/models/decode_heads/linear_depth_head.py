"""The linear depth probe: a linear head over depth bins, read out as in AdaBins."""
from typing import List

import torch
import torch.nn.functional as F
from mmseg.models.utils import resize
from mmseg.utils import SampleList
from torch import Tensor, nn

from mmlinear.registry import MODELS
from .linear_head import LinearHead


@MODELS.register_module()
class LinearDepthHead(LinearHead):
    """Monocular depth from a linear head: :class:`LinearHead` scores ``num_bins`` depth
    bins per pixel and the depth is their weighted mean.

    The linear depth evaluation of DINOv2 / DINOv3 (which the VECA paper's frozen NYUv2
    protocol follows): the features are upsampled ``upsample`` times (bilinear), the linear
    head gives bin scores s, and with bin centres spaced uniformly over [min_depth,
    max_depth] the depth is ``sum_k w_k c_k``, ``w = (relu(s) + 0.1) / sum(relu(s) + 0.1)``
    (AdaBins' 'linear' normalisation). For mmseg's ``DepthEstimator``; the loss compares the
    prediction resized to the ground truth (``gt_depth_map``) with ``loss_decode``
    (mmseg's scale-invariant log loss by default).

    Args:
        in_channels (int | list[int]): Feature channels.
        num_bins (int): Depth bins. Defaults to 256.
        min_depth (float): Centre of the first bin. Defaults to 0.001.
        max_depth (float): Centre of the last bin (metres on NYUv2). Defaults to 10.
        upsample (int): Bilinear upsampling of the features before the head. Defaults to 4.
        loss_decode (dict): Defaults to ``dict(type='SiLogLoss')``.
        **kwargs: As :class:`LinearHead` (``num_classes`` is ``num_bins``).
    """

    def __init__(self,
                 in_channels,
                 num_bins: int = 256,
                 min_depth: float = 0.001,
                 max_depth: float = 10.,
                 upsample: int = 4,
                 loss_decode: dict = dict(type='SiLogLoss'),
                 **kwargs) -> None:
        if num_bins < 2:
            raise ValueError(f'num_bins must be >= 2, got {num_bins}')
        if not 0 < min_depth < max_depth:
            raise ValueError(f'need 0 < min_depth < max_depth, got {min_depth}, {max_depth}')
        super().__init__(in_channels, num_classes=num_bins, loss_decode=loss_decode, **kwargs)
        self.min_depth = min_depth
        self.max_depth = max_depth
        self.upsample = upsample
        self.register_buffer(
            'bin_centers', torch.linspace(min_depth, max_depth, num_bins), persistent=False)

    def forward(self, inputs: List[Tensor]) -> Tensor:
        """Args:
            inputs (list[Tensor]): The backbone's (B, C_i, H', W') maps.

        Returns:
            Tensor: (B, 1, upsample H', upsample W') depth, within [min_depth, max_depth].
        """
        x = self._transform_inputs(inputs)
        if self.upsample > 1:
            x = F.interpolate(
                x, scale_factor=self.upsample, mode='bilinear', align_corners=self.align_corners)
        scores = self.cls_seg(self.bn(x)).float()
        weights = scores.relu() + 0.1
        weights = weights / weights.sum(dim=1, keepdim=True)
        return torch.einsum('bkhw,k->bhw', weights, self.bin_centers)[:, None]

    def loss_by_feat(self, depth: Tensor, batch_data_samples: SampleList) -> dict:
        """Args:
            depth (Tensor): (B, 1, h, w) from :meth:`forward`.
            batch_data_samples (list[SegDataSample]): With ``gt_depth_map`` (1, H, W).

        Returns:
            dict[str, Tensor]: One entry per loss of ``loss_decode``.
        """
        target = torch.stack([sample.gt_depth_map.data for sample in batch_data_samples])
        depth = resize(
            depth, size=target.shape[2:], mode='bilinear', align_corners=self.align_corners)
        losses = self.loss_decode if isinstance(self.loss_decode,
                                                nn.ModuleList) else [self.loss_decode]
        result = {}
        for loss in losses:
            result[loss.loss_name] = result.get(loss.loss_name, 0) + loss(depth, target)
        return result
