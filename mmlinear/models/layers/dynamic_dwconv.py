"""Dynamic depthwise convolution with Spatially Adaptive Prediction (WeightFormer)."""
import functools
from typing import Callable, Optional, Tuple

import torch
import torch.nn.functional as F
from mmengine.model.weight_init import trunc_normal_
from torch import Tensor, nn

from mmlinear.ops import dynamic_dwconv2d
from ..utils import AdaptivePoolSums, check_tokens, tokens_to_map, valid_extents
from .dynamic_layer import DynamicLayer


class DynamicDWConv(DynamicLayer):
    """A k x k depthwise convolution whose kernels are predicted per sample.

    The official ``DynCnn`` ("Spatially Adaptive Prediction"). The map is average-pooled to
    k x k (``adaptive_avg_pool2d``: the bins overlap when a side is not a multiple of k, e.g.
    rows [0, 5), [4, 10), [9, 14) for 14); two 1 x 1 convolutions (C -> C with bias, GELU,
    C -> C without bias) then mix the channels at each pooled position separately, so the
    kernel tap (u, v) of a channel is predicted from the pooled region (u, v)::

        dK = wfm(pool_k(X))                  # (B, C, k, k)
        dK_hat = dK / (||dK||_F + 1)         # per (sample, channel): norm < 1
        Y = dwconv(X, W0 + dK_hat, b, padding=k // 2)

    The convolution costs k^2 N C MACs (as a static one) plus 2 k^2 C^2 for the predictor,
    whatever N. Parameter names are those of the released checkpoints: ``w`` (C, 1, k, k),
    ``b`` (C, ), ``wfm.0`` and ``wfm.2`` (no bias).

    With a ``token_padding_mask`` (off by default: the reference behaviour) the kernels are
    predicted from the valid region only, taken as the top-left rectangle that holds the
    valid tokens (mmdet / mmseg pad at the bottom and right), and the padded tokens enter
    the convolution as zeros, so the valid outputs are those of the unpadded image.

    Streamed over bands of token rows, the accumulator of :meth:`pool_sums` takes the
    pooling band by band and :meth:`delta_from_pooled` maps its result to dK_hat, as
    :meth:`predict_delta` maps the pooling of the whole map; the convolution then runs band by
    band with a one-row halo (:func:`~mmlinear.models.layers.band_conv3x3`).

    Args:
        embed_dims (int): Channels C.
        kernel_size (int): Odd kernel side k, also the pooled size. Defaults to 3.
    """

    def __init__(self, embed_dims: int, kernel_size: int = 3) -> None:
        super().__init__()
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ValueError(f'kernel_size must be a positive odd integer, got {kernel_size}')
        self.embed_dims = embed_dims
        self.kernel_size = kernel_size
        self.w = nn.Parameter(torch.empty(embed_dims, 1, kernel_size, kernel_size))
        self.b = nn.Parameter(torch.empty(embed_dims))
        self.wfm = nn.Sequential(
            nn.Conv2d(embed_dims, embed_dims, kernel_size=1), nn.GELU(),
            nn.Conv2d(embed_dims, embed_dims, kernel_size=1, bias=False))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The reference initialisation: ``w`` and ``b`` truncated normal (std 0.02); the
        predictor's convolutions keep the PyTorch default."""
        trunc_normal_(self.w, std=.02)
        trunc_normal_(self.b, std=.02)
        for module in self.wfm:
            if isinstance(module, nn.Conv2d):
                module.reset_parameters()

    def _pool(self, x_map: Tensor, token_padding_mask: Optional[Tensor]) -> Tensor:
        k = self.kernel_size
        if token_padding_mask is None:
            return F.adaptive_avg_pool2d(x_map, k)
        extents = valid_extents(token_padding_mask, tuple(x_map.shape[2:])).tolist()
        return torch.stack(
            [F.adaptive_avg_pool2d(sample[:, :h, :w], k) for sample, (h, w) in zip(x_map, extents)])

    def pool_sums(self,
                  hw_shape: Tuple[int, int],
                  token_padding_mask: Optional[Tensor] = None) -> AdaptivePoolSums:
        """An empty accumulator of the pooling that :meth:`predict_delta` applies, for a map
        streamed in bands of rows (:meth:`AdaptivePoolSums.add` each band, then
        :meth:`delta_from_pooled` of its :meth:`~AdaptivePoolSums.result`).

        Args:
            hw_shape (tuple[int, int]): The token grid (H, W).
            token_padding_mask (Tensor, optional): (B, H * W) bool, True on padded tokens.

        Returns:
            AdaptivePoolSums: k x k, over each image's valid region with a mask.
        """
        extents = None
        if token_padding_mask is not None:
            extents = valid_extents(token_padding_mask, hw_shape)
        return AdaptivePoolSums(hw_shape, self.kernel_size, extents)

    def delta_from_pooled(self, pooled: Tensor) -> Tensor:
        """The normalised kernel change dK_hat from the k x k pooled map.

        Args:
            pooled (Tensor): (B, C, k, k).

        Returns:
            Tensor: (B, C, k, k), every (sample, channel) kernel of Frobenius norm < 1.
        """
        B, C, k, _ = pooled.shape
        # The 1 x 1 convolutions of ``wfm`` as linear layers over the k * k pooled positions:
        # the same products, without a convolution's set-up on a 3 x 3 map.
        first, act, second = self.wfm
        # A float32 accumulator's result meets the weights' dtype (autocast casts either way).
        tokens = pooled.flatten(2).transpose(1, 2).to(first.weight.dtype)
        hidden = act(F.linear(tokens, first.weight.flatten(1), first.bias))
        delta = F.linear(hidden, second.weight.flatten(1)).transpose(1, 2)  # (B, C, k * k)
        norm = delta.norm(dim=-1, keepdim=True)
        return (delta / (norm + 1.)).reshape(B, C, k, k)

    def predict_delta(self,
                      x: Tensor,
                      hw_shape: Tuple[int, int],
                      token_padding_mask: Optional[Tensor] = None) -> Tensor:
        """(B, C, k, k): the kernel change dK_hat."""
        check_tokens(x, hw_shape, token_padding_mask)
        return self.delta_from_pooled(self._pool(tokens_to_map(x, hw_shape), token_padding_mask))

    def forward(self,
                x: Tensor,
                hw_shape: Tuple[int, int],
                token_padding_mask: Optional[Tensor] = None) -> Tensor:
        if token_padding_mask is not None:
            check_tokens(x, hw_shape, token_padding_mask)
            x = x.masked_fill(token_padding_mask[..., None], 0)
        conv = self.conv_with_delta(self.predict_delta(x, hw_shape, token_padding_mask))
        return conv(tokens_to_map(x, hw_shape)).flatten(2).transpose(1, 2)

    def conv_with_delta(self, delta: Tensor) -> Callable[[Tensor], Tensor]:
        """The depthwise convolution with the kernels ``W0 + dK_hat``, as a function of a map.

        Args:
            delta (Tensor): (B, C, k, k), dK_hat of the whole map.

        Returns:
            callable: (B, C, h, W) map (the whole map or a band with its halo, see
            :func:`band_conv3x3`) -> (B, C, h, W).
        """
        return functools.partial(dynamic_dwconv2d, weight=delta + self.w.squeeze(1), bias=self.b)

    def extra_repr(self) -> str:
        return f'embed_dims={self.embed_dims}, kernel_size={self.kernel_size}'
