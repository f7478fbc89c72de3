"""LayerNorm over the channels of an NCHW map."""
from torch import Tensor, nn


class LayerNorm2d(nn.LayerNorm):
    """``nn.LayerNorm`` over C for (B, C, H, W) inputs, as used in ViTDet-style necks."""

    def forward(self, x: Tensor) -> Tensor:
        """x (Tensor): (B, C, H, W) -> (B, C, H, W)."""
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
