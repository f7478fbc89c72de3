"""The interface of WeightFormer's dynamic layers: weights changed per sample by what the
tokens of the whole grid predict."""
from typing import Optional, Tuple

from torch import Tensor, nn


class DynamicLayer(nn.Module):
    """A layer whose weights change per sample (:class:`DynamicLinear`,
    :class:`DynamicDWConv`): :meth:`predict_delta` predicts the normalised change from the
    tokens of the whole grid, and :meth:`forward` runs the layer with it. The layers' own
    docstrings say what they add.
    """

    def predict_delta(self,
                      x: Tensor,
                      hw_shape: Tuple[int, int],
                      token_padding_mask: Optional[Tensor] = None) -> Tensor:
        """The normalised per-sample change of the weights.

        Args:
            x (Tensor): (B, N, C) row-major tokens, C the layer's input width.
            hw_shape (tuple[int, int]): The token grid (H, W), H * W = N.
            token_padding_mask (Tensor, optional): (B, N) bool, True on padded tokens.

        Returns:
            Tensor: The change of each sample's weights.
        """
        raise NotImplementedError

    def forward(self,
                x: Tensor,
                hw_shape: Tuple[int, int],
                token_padding_mask: Optional[Tensor] = None) -> Tensor:
        """The layer with the weights changed by :meth:`predict_delta` of ``x``.

        Args:
            x, hw_shape, token_padding_mask: As :meth:`predict_delta` takes them.

        Returns:
            Tensor: (B, N, C_out).
        """
        raise NotImplementedError
