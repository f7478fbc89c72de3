"""The linear probe of frozen-backbone dense evaluations: BatchNorm then a 1 x 1 convolution."""
from typing import List, Union

from mmcv.cnn import build_norm_layer
from mmengine.registry import DefaultScope
from mmseg.models.decode_heads.decode_head import BaseDecodeHead
from torch import Tensor

from mmlinear.registry import MODELS


@MODELS.register_module()
class LinearHead(BaseDecodeHead):
    """A linear head on patch features: BatchNorm, then ``conv_seg`` (a 1 x 1 convolution).

    The head of the linear dense evaluations of DINOv2 / DINOv3 that the VECA paper follows
    (backbone frozen): at inference the BatchNorm is an affine map, so the whole head is linear
    in the features, and any quality comes from the backbone. Several levels
    (``input_transform='resize_concat'``) are resized to the first one and concatenated
    first. The logits stay at the features' stride; mmseg resizes them to the image (a
    bilinear resize commutes with a linear head at inference).

    Args:
        in_channels (int | list[int]): Feature channels (per level for 'resize_concat').
        norm_cfg (dict): The norm before the convolution. Defaults to BatchNorm
            (``dict(type='SyncBN')`` for several GPUs).
        dropout_ratio (float): Dropout before the convolution. Defaults to 0 (a linear
            probe).
        **kwargs: ``num_classes``, ``in_index``, ``input_transform``, ``loss_decode`` and
            the rest of mmseg's ``BaseDecodeHead``; ``channels`` is the concatenated input
            width and is not passed.
    """

    def __init__(self,
                 in_channels: Union[int, List[int]],
                 norm_cfg: dict = dict(type='BN'),
                 dropout_ratio: float = 0.,
                 **kwargs) -> None:
        channels = sum(in_channels) if isinstance(in_channels, (list, tuple)) else in_channels
        # mmseg builds ``loss_decode`` in the current default scope; a head built directly
        # (or under mmdet's or mmpretrain's scope) must still find mmseg's losses.
        with DefaultScope.overwrite_default_scope('mmseg'):
            super().__init__(
                in_channels, channels, norm_cfg=norm_cfg, dropout_ratio=dropout_ratio, **kwargs)
        self.bn = build_norm_layer(norm_cfg, channels)[1]

    def forward(self, inputs: List[Tensor]) -> Tensor:
        """Args:
            inputs (list[Tensor]): The backbone's (B, C_i, H', W') maps.

        Returns:
            Tensor: (B, out_channels, H', W') logits at the first selected level's size.
        """
        return self.cls_seg(self.bn(self._transform_inputs(inputs)))
