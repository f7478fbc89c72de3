"""Linear-InfSA's fixed-size summary of a token sequence: two sums, each accumulated band by
band."""
from typing import Optional, Tuple

from torch import Tensor

from mmlinear.ops import linear_infsa_key_pool, linear_infsa_query_sums
from mmlinear.ops.infsa_common import rho_per_head


def _accumulate(total: Optional[Tensor], part: Tensor) -> Tensor:
    return part if total is None else total + part


class LinearInfSAQuerySums:
    """Linear-InfSA's first sum, accumulated over bands of tokens: the central query.

    Linear-InfSA meets the tokens through two sums of fixed size (see
    :func:`~mmlinear.ops.linear_infsa_key_weights` for the formulas), each a pass over the
    tokens, the second needing the first, each an op of ``mmlinear.ops`` with a kernel and
    autograd. This is the first (:func:`~mmlinear.ops.linear_infsa_query_sums`): the query
    energies e_i = ||q_i|| (of the scaled queries) and the energy-weighted query sum, giving
    the central query ``q_bar = sum_i e_i q_i / (sum_i e_i + eps)``; the second is
    :class:`LinearInfSAKeyPool`.

    One band is the whole sequence (the layer's own forward); several are a streamed pass.
    Padded tokens take no part. Sums accumulate in float32 (float64 for float64), autocast
    off, as the whole-sequence normalisations; eps is added to the completed sums only.

    Args:
        eps (float): The stabiliser of the normalisation.
    """

    def __init__(self, eps: float) -> None:
        self.eps = eps
        self.energy_sum: Optional[Tensor] = None  # (B, H)
        self.weighted_queries: Optional[Tensor] = None  # (B, H, d)

    def add(self, q: Tensor, key_padding_mask: Optional[Tensor] = None) -> None:
        """Add a band of queries.

        Args:
            q (Tensor): (B, H, n, d) queries of the band, before scaling.
            key_padding_mask (Tensor, optional): (B, n) bool, True on padded tokens.
        """
        weighted_queries, energy_sum = linear_infsa_query_sums(q, key_padding_mask)
        self.energy_sum = _accumulate(self.energy_sum, energy_sum)
        self.weighted_queries = _accumulate(self.weighted_queries, weighted_queries)

    def result(self) -> Tensor:
        """The central query, once every query was added.

        Returns:
            Tensor: (B, H, d) the energy-weighted mean of the scaled queries, in the
            accumulation dtype.
        """
        if self.energy_sum is None:
            raise RuntimeError('no queries have been added: call add() with at least one band '
                               'first')
        return self.weighted_queries / (self.energy_sum[..., None] + self.eps)


class LinearInfSAKeyPool:
    """Linear-InfSA's second sum, accumulated over bands of tokens: the key-weighted inputs.

    The key scores s_j = relu(q_bar . k_j) against the central query of
    :class:`LinearInfSAQuerySums` and the score-weighted sum of the attention inputs x_j
    (:func:`~mmlinear.ops.linear_infsa_key_pool`), giving the pooled inputs
    ``sum_j a_j x_j = rho * sum_j s_j x_j / (sum_j s_j + eps)`` and ``sum_j a_j``. Bands,
    padding and precision as :class:`LinearInfSAQuerySums`.

    Args:
        central_query (Tensor): (B, H, d), the result of :class:`LinearInfSAQuerySums`.
        rho (Tensor): scalar, (1,) or (H,) decay.
        eps (float): The stabiliser of the normalisation.
    """

    def __init__(self, central_query: Tensor, rho: Tensor, eps: float) -> None:
        self.central_query = central_query
        self.rho = rho
        self.eps = eps
        self.score_sum: Optional[Tensor] = None  # (B, H)
        self.weighted_inputs: Optional[Tensor] = None  # (B, H, C)

    def add(self, k: Tensor, x: Tensor, key_padding_mask: Optional[Tensor] = None) -> None:
        """Add a band of keys and the attention inputs they come from.

        Args:
            k (Tensor): (B, H, n, d) keys of the band, before scaling.
            x (Tensor): (B, n, C) the attention inputs of the same tokens.
            key_padding_mask (Tensor, optional): (B, n) bool, True on padded tokens.
        """
        weighted_inputs, score_sum = linear_infsa_key_pool(self.central_query, k, x,
                                                           key_padding_mask)
        self.score_sum = _accumulate(self.score_sum, score_sum)
        self.weighted_inputs = _accumulate(self.weighted_inputs, weighted_inputs)

    def result(self) -> Tuple[Tensor, Tensor]:
        """The key-weighted inputs, once every key was added.

        Returns:
            tuple[Tensor, Tensor]: ``sum_j a_j x_j`` (B, H, C) and ``sum_j a_j`` (B, H, 1),
            in the accumulation dtype.
        """
        if self.score_sum is None:
            raise RuntimeError('no keys have been added: call add() with at least one band '
                               'first')
        H = self.score_sum.shape[1]
        scale = rho_per_head(self.rho, H, self.score_sum.dtype)[..., 0] / (
            self.score_sum + self.eps)
        return self.weighted_inputs * scale[..., None], (self.score_sum * scale)[..., None]
