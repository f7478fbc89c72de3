"""The WeightFormer block, static or dynamic (He, Han and Huang, 2026)."""
from typing import Optional, Tuple

from mmcv.cnn.bricks import DropPath
from torch import Tensor, nn

from mmlinear.ops import dynamic_dwconv2d
from ..utils import tokens_to_map
from .dynamic_dwconv import DynamicDWConv
from .dynamic_linear import DynamicLinear
from .onednn_linear import OneDNNLinear


class WeightFormerBlock(nn.Module):
    """A WeightFormer block, static or dynamic (the reference ``Block``).

    Static: ``x + DWConv3x3(x)`` (no norm, no drop path), then
    ``x + DropPath(linear2(GELU(linear1(LN2(x)))))``.
    Dynamic: ``x = LN1(x)`` replaces the stream (no skip around it, as the reference code;
    the paper figure omits this norm), then the same with :class:`DynamicDWConv` as the
    token mixer and :class:`DynamicLinear` as ``linear1``; ``linear2`` stays static.

    Args:
        embed_dims (int): Token width C.
        feedforward_channels (int): Hidden width of the MLP.
        dynamic (bool): Build the dynamic block.
        drop_path_rate (float): Stochastic depth of the MLP branch. Defaults to 0.
    """

    def __init__(self,
                 embed_dims: int,
                 feedforward_channels: int,
                 dynamic: bool,
                 drop_path_rate: float = 0.) -> None:
        super().__init__()
        self.dynamic = dynamic
        if dynamic:
            self.norm1 = nn.LayerNorm(embed_dims, eps=1e-6)
            self.dwc = DynamicDWConv(embed_dims)
            self.linear1 = DynamicLinear(embed_dims, feedforward_channels)
        else:
            self.dwc = nn.Conv2d(embed_dims, embed_dims, 3, padding=1, groups=embed_dims)
            self.linear1 = OneDNNLinear(embed_dims, feedforward_channels)
        self.norm2 = nn.LayerNorm(embed_dims, eps=1e-6)
        self.act = nn.GELU()
        self.linear2 = OneDNNLinear(feedforward_channels, embed_dims)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def _static_dwconv(self, x_map: Tensor) -> Tensor:
        """The static block's depthwise convolution ``dwc`` of a (B, C, H', W') map.

        On the CPU its kernels go through the per-sample convolution's kernel, which reads the
        channels-last map of the tokens as it is (oneDNN's depthwise convolution is several
        times slower on it); elsewhere, and where no kernel runs, the same convolution.
        """
        if x_map.device.type != 'cpu':
            return self.dwc(x_map)
        kernels = self.dwc.weight.squeeze(1).expand(x_map.shape[0], -1, -1, -1)
        return dynamic_dwconv2d(x_map, kernels, self.dwc.bias)

    def forward(self,
                x: Tensor,
                token_padding_mask: Optional[Tensor] = None,
                *,
                hw_shape: Tuple[int, int]) -> Tensor:
        """Args:
            x (Tensor): (B, N, C) row-major tokens.
            token_padding_mask (Tensor, optional): (B, N) bool, True on padded tokens.
            hw_shape (tuple[int, int]): The token grid (H', W'), H' * W' = N.

        Returns:
            Tensor: (B, N, C).
        """
        if self.dynamic:
            x = self.norm1(x)
            x = x + self.dwc(x, hw_shape, token_padding_mask)
            hidden = self.linear1(self.norm2(x), hw_shape, token_padding_mask)
        else:
            mixer_in = x
            if token_padding_mask is not None:
                mixer_in = x.masked_fill(token_padding_mask[..., None], 0)
            x = x + self._static_dwconv(tokens_to_map(mixer_in, hw_shape)).flatten(2).transpose(
                1, 2)
            hidden = self.linear1(self.norm2(x))
        return x + self.drop_path(self.linear2(self.act(hidden)))
