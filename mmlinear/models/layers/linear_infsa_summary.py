"""Linear-InfSA's fixed-size summary of a token sequence, accumulated band by band."""
from typing import Optional, Tuple

from torch import Tensor

from mmlinear.ops import linear_infsa_key_pool, linear_infsa_query_sums
from mmlinear.ops.infsa_common import rho_per_head


class LinearInfSASummary:
    """The sums Linear-InfSA reduces a sequence to, accumulated over bands of tokens.

    Linear-InfSA meets the tokens through two sums of fixed size (see
    :func:`~mmlinear.ops.linear_infsa_key_weights` for the formulas), each a pass over the
    tokens, the second needing the first, each an op of ``mmlinear.ops`` with a kernel and
    autograd:

    1. :meth:`add_queries` (:func:`~mmlinear.ops.linear_infsa_query_sums`): the query
       energies e_i = ||q_i|| (of the scaled queries) and the energy-weighted query sum, giving
       the central query ``q_bar = sum_i e_i q_i / (sum_i e_i + eps)``;
    2. :meth:`add_keys` (:func:`~mmlinear.ops.linear_infsa_key_pool`): the key scores
       s_j = relu(q_bar . k_j) and the score-weighted sum of the attention inputs x_j, giving
       the pooled inputs ``sum_j a_j x_j = rho * sum_j s_j x_j / (sum_j s_j + eps)`` and
       ``sum_j a_j``.

    One band is the whole sequence (the layer's own forward); several are a streamed pass.
    Padded tokens take part in neither sum. Sums accumulate in float32 (float64 for float64),
    autocast off, as the whole-sequence normalisations; eps is added to the completed sums
    only.

    Args:
        eps (float): The stabiliser of both normalisations.
    """

    def __init__(self, eps: float) -> None:
        self.eps = eps
        self.energy_sum: Optional[Tensor] = None  # (B, H)
        self.weighted_queries: Optional[Tensor] = None  # (B, H, d)
        self.score_sum: Optional[Tensor] = None  # (B, H)
        self.weighted_inputs: Optional[Tensor] = None  # (B, H, C)
        self._central_query: Optional[Tensor] = None

    @staticmethod
    def _accumulate(total: Optional[Tensor], part: Tensor) -> Tensor:
        return part if total is None else total + part

    def add_queries(self, q: Tensor, key_padding_mask: Optional[Tensor] = None) -> None:
        """Add a band of queries to the first sums.

        Args:
            q (Tensor): (B, H, n, d) queries of the band, before scaling.
            key_padding_mask (Tensor, optional): (B, n) bool, True on padded tokens.
        """
        if self._central_query is not None:
            raise RuntimeError('add_queries after central_query: the first pass is over')
        weighted_queries, energy_sum = linear_infsa_query_sums(q, key_padding_mask)
        self.energy_sum = self._accumulate(self.energy_sum, energy_sum)
        self.weighted_queries = self._accumulate(self.weighted_queries, weighted_queries)

    def central_query(self) -> Tensor:
        """Tensor: (B, H, d) the energy-weighted mean of the scaled queries."""
        if self._central_query is None:
            if self.energy_sum is None:
                raise RuntimeError('central_query needs add_queries first')
            self._central_query = self.weighted_queries / (self.energy_sum[..., None] + self.eps)
        return self._central_query

    def add_keys(self, k: Tensor, x: Tensor, key_padding_mask: Optional[Tensor] = None) -> None:
        """Add a band of keys and the attention inputs they come from to the second sums.

        Args:
            k (Tensor): (B, H, n, d) keys of the band, before scaling.
            x (Tensor): (B, n, C) the attention inputs of the same tokens.
            key_padding_mask (Tensor, optional): (B, n) bool, True on padded tokens.
        """
        weighted_inputs, score_sum = linear_infsa_key_pool(self.central_query(), k, x,
                                                           key_padding_mask)
        self.score_sum = self._accumulate(self.score_sum, score_sum)
        self.weighted_inputs = self._accumulate(self.weighted_inputs, weighted_inputs)

    def pooled_inputs(self, rho: Tensor) -> Tuple[Tensor, Tensor]:
        """The key-weighted inputs, once every key was added.

        Args:
            rho (Tensor): scalar, (1,) or (H,) decay.

        Returns:
            tuple[Tensor, Tensor]: ``sum_j a_j x_j`` (B, H, C) and ``sum_j a_j`` (B, H, 1),
            in the accumulation dtype.
        """
        if self.score_sum is None:
            raise RuntimeError('pooled_inputs needs add_keys first')
        H = self.score_sum.shape[1]
        scale = rho_per_head(rho, H, self.score_sum.dtype)[..., 0] / (self.score_sum + self.eps)
        return self.weighted_inputs * scale[..., None], (self.score_sum * scale)[..., None]
