"""The values a token mixer is handed: projected per token, or from pooled inputs."""
import torch
from torch import Tensor, nn


def split_heads(x: Tensor, num_heads: int) -> Tensor:
    """(B, T, C) tokens -> (B, H, T, d) heads, d = C / H (a view where the input allows)."""
    B, T, C = x.shape
    return x.reshape(B, T, num_heads, C // num_heads).transpose(1, 2)


def merge_heads(mixed: Tensor) -> Tensor:
    """(B, H, T, d) -> (B, T, H d), or (B, H, d) -> (B, H d): the heads concatenated per token
    or per sample."""
    return mixed.movedim(1, -2).flatten(-2)


def project_pooled_inputs(projection: nn.Linear, num_heads: int, pooled_inputs: Tensor,
                          weight_sum: Tensor) -> Tensor:
    """The value projection of key-weighted inputs: ``W_h (sum_j a_hj x_j) + b_h sum_j a_hj``
    per head h (W_h, b_h: head h's rows of the projection), which by linearity equals
    ``sum_j a_hj v_hj``.

    H vectors per sample cost nothing, so they are projected in the accumulation dtype,
    autocast off.

    Args:
        projection (nn.Linear): The (C -> C) value projection.
        num_heads (int): H.
        pooled_inputs (Tensor): (B, H, C) ``sum_j a_hj x_j``, in the accumulation dtype
            (float32, float64 for float64).
        weight_sum (Tensor): (B, H, 1) ``sum_j a_hj``, the factor of the bias.

    Returns:
        Tensor: (B, H, d) pooled values, in the accumulation dtype.
    """
    acc = pooled_inputs.dtype
    C = projection.weight.shape[1]
    with torch.autocast(device_type=pooled_inputs.device.type, enabled=False):
        weight = projection.weight.to(acc).reshape(num_heads, C // num_heads, C)
        pooled = torch.einsum('bhc,hdc->bhd', pooled_inputs, weight)
        if projection.bias is not None:
            pooled = pooled + weight_sum * projection.bias.to(acc).reshape(num_heads, -1)
    return pooled


class Values:
    """The values of an attention layer, projected only as a mixer asks for them.

    Most mixers weight every value, so they take the per-token values (:meth:`heads`). A
    mixer whose weights do not depend on the query (Linear-InfSA) pools the layer's inputs
    first and projects the H pooled vectors of a sample instead (:meth:`from_pooled_inputs`),
    so the (B, S, C) values are never formed.

    Args:
        inputs (Tensor): (B, S, C) the tokens the values come from.
        projection (nn.Module): The value projection, (..., C) -> (..., C); an ``nn.Linear``
            for :meth:`from_pooled_inputs`.
        num_heads (int): H.
    """

    def __init__(self, inputs: Tensor, projection: nn.Module, num_heads: int) -> None:
        self.inputs = inputs
        self.projection = projection
        self.num_heads = num_heads

    def heads(self) -> Tensor:
        """Tensor: (B, H, S, d) the values of every token."""
        return split_heads(self.projection(self.inputs), self.num_heads)

    def from_pooled_inputs(self, pooled_inputs: Tensor, weight_sum: Tensor) -> Tensor:
        """The pooled values ``sum_j a_hj v_hj`` from ``sum_j a_hj x_j`` and ``sum_j a_hj``
        (see :func:`project_pooled_inputs`).

        Returns:
            Tensor: (B, H, d), in the dtype of ``pooled_inputs``.
        """
        return project_pooled_inputs(self.projection, self.num_heads, pooled_inputs, weight_sum)
