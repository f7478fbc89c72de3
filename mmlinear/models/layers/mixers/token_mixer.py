"""The interface every token mixer of :class:`InfSAAttention` implements."""
from typing import ClassVar, Optional, Tuple

import torch.nn.functional as F
from torch import Tensor, nn

from .values import Values


def zero_padded_tokens(x: Tensor, key_padding_mask: Optional[Tensor]) -> Tensor:
    """(B, H, S, n) per-token features with the padded tokens' rows set to 0.

    Args:
        x (Tensor): (B, H, S, n) keys, values or features of the S tokens.
        key_padding_mask (Tensor, optional): (B, S) bool, True on padded tokens; None leaves
            ``x`` as it is.
    """
    if key_padding_mask is None:
        return x
    return x.masked_fill(key_padding_mask[:, None, :, None], 0.)


def segment_means(x: Tensor, num_segments: int) -> Tensor:
    """The means of ``num_segments`` contiguous segments of the tokens, as
    ``adaptive_avg_pool1d`` cuts them (lengths floor or ceil of T / n): Nystromformer's
    landmarks and Agent Attention's agents.

    Args:
        x (Tensor): (B, H, T, d) per-token features.
        num_segments (int): n.

    Returns:
        Tensor: (B, H, n, d).
    """
    B, H, T, d = x.shape
    pooled = F.adaptive_avg_pool1d(x.reshape(B * H, T, d).transpose(1, 2), num_segments)
    return pooled.transpose(1, 2).reshape(B, H, num_segments, d)


def key_softmax(logits: Tensor, key_padding_mask: Optional[Tensor]) -> Tensor:
    """Softmax over the keys (the last dimension) with the padded keys left out.

    Args:
        logits (Tensor): (B, H, T, S) query-key logits.
        key_padding_mask (Tensor, optional): (B, S) bool, True on padded keys, which get
            weight 0.

    Returns:
        Tensor: (B, H, T, S) weights.
    """
    if key_padding_mask is not None:
        logits = logits.masked_fill(key_padding_mask[:, None, None, :], float('-inf'))
    return logits.softmax(-1)


class TokenMixer(nn.Module):
    """A token mixer over split heads, run by :class:`InfSAAttention` between its q / k / v
    projections and its output projection.

    :meth:`forward` is the mechanism, which every mixer overrides with this signature (its
    docstring holds what the override adds). Mixers that scale their weights by InfSA's decay
    also take it, as the keyword ``rho`` (see :attr:`takes_rho`).

    :meth:`mix` is what the layer calls: the same, with the values as :class:`Values`, so
    that a mixer whose output is one vector per sample (Linear-InfSA) can pool the layer's
    inputs and never form the per-token values. Its output is then (B, H, d), which the
    layer projects once per sample and broadcasts to the T queries.

    Args:
        head_dims (int): d, the width of a head.
    """

    #: Whether the mixer scales its weights by InfSA's learnable decay rho. The layer owns
    #: rho (its checkpoints hold it as ``rho_logit`` beside the projections) and passes it
    #: to :meth:`mix` and ``forward`` as the keyword ``rho``.
    takes_rho: ClassVar[bool] = False
    #: Whether the layer projects the queries, keys, values and output around the mixer; a
    #: mixer that ignores its inputs leaves the layer without parameters.
    projected: ClassVar[bool] = True

    def __init__(self, head_dims: int) -> None:
        super().__init__()
        self.head_dims = head_dims

    def interactions(self, num_tokens: int) -> int:
        """Query-key pairs the mechanism scores per head for ``num_tokens`` tokens."""
        raise NotImplementedError

    def mix(self,
            q: Tensor,
            k: Tensor,
            values: Values,
            key_padding_mask: Optional[Tensor] = None,
            *,
            need_weights: bool = False,
            **mixer_inputs: Tensor) -> Tuple[Tensor, Optional[Tensor]]:
        """Mix the values of a layer's tokens: :meth:`forward` with the values as
        :class:`Values`.

        Args:
            q, k, key_padding_mask, need_weights: As :meth:`forward` takes them.
            values (Values): The values of the S tokens, projected as the mixer asks.
            **mixer_inputs: ``rho``, the (H,) or (1,) decay, for mixers that take it (see
                :attr:`takes_rho`).

        Returns:
            tuple[Tensor, Tensor | None]: (B, H, T, d) outputs, or (B, H, d) when every
            query gets the same output, and the weights when asked.
        """
        return self(q, k, values.heads(), key_padding_mask, need_weights, **mixer_inputs)

    def forward(self,
                q: Tensor,
                k: Tensor,
                v: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        """The mechanism. An override inherits this docstring, or says what it adds.

        Args:
            q (Tensor): (B, H, T, d) queries, unscaled (each mechanism applies its paper's
                scaling).
            k (Tensor): (B, H, S, d) keys, unscaled.
            v (Tensor): (B, H, S, d) values.
            key_padding_mask (Tensor, optional): (B, S) bool, True on padded keys.
            need_weights (bool): Also return the mechanism's attention weights. Defaults to
                False.

        Returns:
            tuple[Tensor, Tensor | None]: (B, H, T, d) outputs and, when ``need_weights``,
            the weights (else None).
        """
        raise NotImplementedError
