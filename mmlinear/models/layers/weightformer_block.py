"""The WeightFormer block, static or dynamic (He, Han and Huang, 2026)."""
from typing import Callable, Optional, Tuple, Union

from mmcv.cnn.bricks import DropPath
from torch import Tensor, nn

from mmlinear.ops import Linear, depthwise_conv2d
from ..streaming.token_stream import TokenStream
from ..utils import tokens_to_map
from .band_conv import band_conv3x3
from .dynamic_dwconv import DynamicDWConv
from .dynamic_linear import DynamicLinear


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
            self.linear1 = DynamicLinear(embed_dims, feedforward_channels, activation='gelu')
        else:
            self.dwc = nn.Conv2d(embed_dims, embed_dims, 3, padding=1, groups=embed_dims)
            self.linear1 = Linear(embed_dims, feedforward_channels, activation='gelu')
        self.norm2 = nn.LayerNorm(embed_dims, eps=1e-6)
        # linear1 applies the MLP's GELU (fused into its matmul where a CPU backend can).
        self.linear2 = Linear(feedforward_channels, embed_dims)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def interactions(self, num_patches: int, num_extra_tokens: int) -> int:
        """Query-key pairs scored per image: none. The dynamic layers predict their
        parameters from pooled sums over the tokens, and no pair of tokens is ever scored.

        Args:
            num_patches (int): N.
            num_extra_tokens (int): E (0 in WeightFormer).

        Returns:
            int: 0.
        """
        return 0

    @property
    def stream_passes(self) -> int:
        """int: Passes of :meth:`forward_streamed` over the patch rows: dynamic, the pooling,
        the convolution and the dynamic linear layer (3); static, one."""
        return 3 if self.dynamic else 1

    def _static_dwconv(self, x_map: Tensor) -> Tensor:
        """The static block's depthwise convolution ``dwc`` of a (B, C, H', W') map, through
        :func:`mmlinear.ops.depthwise_conv2d` (which reads a channels-last map as it is)."""
        return depthwise_conv2d(x_map, self.dwc.weight, self.dwc.bias)

    def forward(self,
                x: Tensor,
                token_padding_mask: Optional[Tensor] = None,
                *,
                hw_shape: Tuple[int, int],
                need_weights: bool = False) -> Union[Tensor, Tuple[Tensor, None]]:
        """Args:
            x (Tensor): (B, N, C) row-major tokens.
            token_padding_mask (Tensor, optional): (B, N) bool, True on padded tokens.
            hw_shape (tuple[int, int]): The token grid (H', W'), H' * W' = N.
            need_weights (bool): Also return the attention weights, which are None: no pair
                of tokens is scored (the :class:`PlainBlock` protocol asks every block to
                take it). Defaults to False.

        Returns:
            Tensor | tuple[Tensor, None]: (B, N, C), with None when ``need_weights``.
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
        x = x + self.drop_path(self.linear2(hidden))
        return (x, None) if need_weights else x

    def _mixer_input(self, tokens: Tensor, mask: Optional[Tensor]) -> Tensor:
        """What the 3 x 3 depthwise convolution reads: the tokens (LN1 of them in a dynamic
        block), padded ones zero-filled."""
        if self.dynamic:
            tokens = self.norm1(tokens)
        return tokens if mask is None else tokens.masked_fill(mask[..., None], 0)

    def forward_streamed(self, stream: TokenStream, *, hw_shape: Tuple[int, int]) -> None:
        """The block over a token stream, band by band, in place (inference only).

        Static: one pass, each band's convolution reading one halo row above and below. Dynamic:
        a pass pools LN1 of the stream for the predicted kernels (:class:`AdaptivePoolSums`),
        a second applies the convolution with its halo and sums the dynamic linear layer's
        pooled products (:meth:`DynamicLinear.delta_sums`), a third applies that
        layer and the rest of the MLP. The result equals :meth:`forward` on the whole grid;
        the stream's bands must start on even rows (the 2 x 2 pooling).

        Args:
            stream (TokenStream): The patch tokens and their padding mask.
            hw_shape (tuple[int, int]): The token grid (H', W').
        """
        H, W = hw_shape
        if self.dynamic:
            pool = self.dwc.pool_sums(hw_shape, stream.token_padding_mask)
            for (start, stop), tokens, mask in stream.segments():
                pool.add(tokens_to_map(self._mixer_input(tokens, mask), (stop - start, W)), start)
            conv: Callable[[Tensor], Tensor] = self.dwc.conv_with_delta(
                self.dwc.delta_from_pooled(pool.result()))
        else:
            conv = self._static_dwconv
        if self.dynamic:
            delta_sums = self.linear1.delta_sums(hw_shape)
        above = None  # the convolution input of the row above the band, before it was written
        for (start, stop), tokens, mask in stream.segments():
            mixer_in = self._mixer_input(tokens, mask)
            below = None
            if stop < H:
                below = self._mixer_input(stream.read(stop, stop + 1), stream.mask(stop, stop + 1))
            as_map = [
                None if t is None else tokens_to_map(t, (t.shape[1] // W, W))
                for t in (mixer_in, above, below)
            ]
            # The band is overwritten below: keep its last row's input for the next band.
            above = mixer_in[:, -W:].clone()
            mixed = band_conv3x3(conv, *as_map).flatten(2).transpose(1, 2)
            x = (self.norm1(tokens) if self.dynamic else tokens) + mixed
            if not self.dynamic:
                stream.write(start, stop, x + self.linear2(self.linear1(self.norm2(x))))
                continue
            stream.write(start, stop, x)
            delta_sums.add(self.norm2(x), (start, stop), mask)
        if self.dynamic:
            delta = delta_sums.result()
            for band, x, _ in stream.segments():
                hidden = self.linear1.apply_delta(self.norm2(x), delta)
                stream.put(band, x + self.linear2(hidden))
