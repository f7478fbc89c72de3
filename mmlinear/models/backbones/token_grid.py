"""What the whole forward's block loop carries: the embedded token grid and each block's step."""
from typing import Any, Dict, NamedTuple, Optional, Tuple

from torch import Tensor


class TokenGrid(NamedTuple):
    """The embedded input that the blocks run on (what :meth:`_embed` returns).

    Attributes:
        tokens (Tensor): (B, E + N, C), the E extra tokens (CLS, cores) first, then the N
            patch tokens in row-major order.
        hw_shape (tuple[int, int]): The patch grid (H', W'), H' * W' = N.
        num_extra_tokens (int): E.
        token_padding_mask (Tensor | None): (B, N) bool, True on padded patches; None
            without a padding mask.
        block_state (dict): The backbone-specific state the block loop starts from (VECA:
            the cores' coordinates and the patches' RoPE angles); :meth:`_block_inputs`
            derives each block's arguments and the next state from it, never changing it.
    """
    tokens: Tensor
    hw_shape: Tuple[int, int]
    num_extra_tokens: int
    token_padding_mask: Optional[Tensor]
    block_state: Dict[str, Any]


class BlockStep(NamedTuple):
    """What :meth:`BasePlainBackbone._run_blocks` yields after each block.

    Attributes:
        index (int): The block index.
        tokens (Tensor): (B, E + N, C), the block's output (before any final norm).
        grid (TokenGrid): The embedded input (grid shape, masks, extra-token count).
        state (dict): The block state this block ran with (see :meth:`_block_inputs`).
        weights (Tensor | None): The block's attention weights, when asked for.
    """
    index: int
    tokens: Tensor
    grid: TokenGrid
    state: Dict[str, Any]
    weights: Optional[Tensor]
