"""Agent Attention (Han et al., 2024)."""
from typing import Optional, Tuple

from torch import Tensor

from .efficient_attention import EfficientAttention
from .token_mixer import key_softmax, segment_means, zero_padded_tokens


class AgentAttention(EfficientAttention):
    """Softmax attention routed through n agent tokens (Han et al., 2024, "Agent Attention:
    On the Integration of Softmax and Linear Attention", arXiv:2312.08874, the agent attention
    itself):
    ``O = softmax(Q A^T / sqrt(d)) softmax(A K^T / sqrt(d)) V``. The agents ``A`` first
    gather the values (agent aggregation, ``V_A = softmax(A K^T / sqrt(d)) V``, n x d) and
    then hand them to the queries (agent broadcast, ``O = softmax(Q A^T / sqrt(d)) V_A``),
    so no T x S matrix is formed: the cost is linear in the number of tokens.

    The agents are the means of n contiguous segments of the queries, the sequence form of
    the paper's pooling of the query map to n agents (7 x 7 = 49 by default). When n does
    not divide the length the segments are those of ``adaptive_avg_pool1d`` (lengths floor
    or ceil of T / n; when n exceeds T, segments of one or two tokens, some repeated).
    Padding follows :class:`NystromAttention`: padded queries are zeroed before the segment
    means and padded keys are left out of the aggregation softmax, so padded tokens never
    reach the valid ones, but the agents (means over positions) still depend on where the
    padding lies.

    The paper's agent bias (position biases added to both softmaxes) and its diversity
    restoration module (a depthwise convolution of V added to the output) are
    not part of this module: a mixer sees a sequence of tokens, not the image grid they
    came from, as :class:`NystromAttention` leaves out its optional convolution.

    Args:
        head_dims (int): d, the width of a head.
        num_agents (int): n. Defaults to 49 (the paper's 7 x 7 agents).
    """

    def __init__(self, head_dims: int, num_agents: int = 49) -> None:
        super().__init__(head_dims)
        if num_agents < 1:
            raise ValueError(f'num_agents must be >= 1, got {num_agents}')
        self.num_agents = num_agents

    def interactions(self, num_tokens: int) -> int:
        """Query-key pairs scored per head: the T x n (broadcast) and n x T (aggregation)
        kernels."""
        return 2 * num_tokens * self.num_agents

    def agents(self, q: Tensor) -> Tensor:
        """(B, H, T, d) -> (B, H, n, d): the means of n contiguous segments of the queries.

        Args:
            q (Tensor): (B, H, T, d) queries, padded ones zeroed.

        Returns:
            Tensor: (B, H, n, d) agents.
        """
        return segment_means(q, self.num_agents)

    def forward(self,
                q: Tensor,
                k: Tensor,
                v: Tensor,
                key_padding_mask: Optional[Tensor] = None,
                need_weights: bool = False) -> Tuple[Tensor, Optional[Tensor]]:
        """The weights, when asked, are the (B, H, T, S) product
        ``softmax(Q A^T / sqrt(d)) softmax(A K^T / sqrt(d))`` that the output equals when
        multiplied with V (rows sum to 1, padded keys' columns are 0)."""
        scale = self.head_dims**-0.5
        agents = self.agents(zero_padded_tokens(q, key_padding_mask))
        # (B, H, n, S): each agent attends the valid keys only.
        aggregation = key_softmax(agents @ k.transpose(-2, -1) * scale, key_padding_mask)
        # (B, H, T, n): over every agent. One pooled from padding alone is 0, but what it
        # broadcasts came from valid keys only, so it needs no mask.
        broadcast = (q @ agents.transpose(-2, -1) * scale).softmax(-1)
        out = broadcast @ (aggregation @ v)
        return out, (broadcast @ aggregation) if need_weights else None
