"""Core-periphery attention: K core tokens attend to everything, patches only to the cores."""
import math
from typing import Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmlinear.ops import Linear
from mmlinear.utils.precision import autocast_dtype
from ..utils import extend_padding_mask
from .rope2d import apply_rope


class CorePeripheryAttention(nn.Module):
    """Multi-head attention over ``[cores; patches]`` with the VECA core-periphery pattern.

    Queries, keys and values come from one set of (unfused) projections and are rotated by
    the 2D RoPE. Two SDPA calls share them (as the official code; paper Fig. 2(a) draws the
    pattern): the K cores attend to all K + N tokens, the N patches to the K cores only.
    This equals a single call with the mask ``allowed[i, j] = i < K or j < K`` but never
    forms the N x N block, so the cost is O(K (K + N) + N K) per head, linear in N.

    Args:
        embed_dims (int): Token width C.
        num_heads (int): Heads; C must be divisible by it.
        dropout (float): Dropout on the attention weights and the output (the reference
            uses one rate for both). Defaults to 0.
    """

    def __init__(self, embed_dims: int, num_heads: int, dropout: float = 0.) -> None:
        super().__init__()
        if embed_dims % num_heads != 0:
            raise ValueError(f'embed_dims ({embed_dims}) must be divisible by num_heads '
                             f'({num_heads})')
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        self.q_proj = Linear(embed_dims, embed_dims)
        self.k_proj = Linear(embed_dims, embed_dims)
        self.v_proj = Linear(embed_dims, embed_dims)
        self.out_proj = Linear(embed_dims, embed_dims)
        self.dropout = dropout
        self.out_drop = nn.Dropout(dropout)

    @staticmethod
    def interactions(num_patches: int, num_extra_tokens: int) -> int:
        """Query-key pairs scored per head and image: the K cores against all K + N tokens,
        the N patches against the K cores: ``2 N K + K^2`` (the paper's 2NC + C^2, its C
        being the core budget).

        Args:
            num_patches (int): N.
            num_extra_tokens (int): K, the active cores.

        Returns:
            int: The number of scores one head computes.
        """
        return 2 * num_patches * num_extra_tokens + num_extra_tokens**2

    def split_heads(self, x: Tensor) -> Tensor:
        """(B, T, C) -> (B, num_heads, T, head_dims)."""
        B, T, _ = x.shape
        return x.view(B, T, self.num_heads, self.head_dims).transpose(1, 2)

    def project_tokens(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        """Queries, keys and values of a run of tokens, the queries and keys rotated.

        Every token is projected and rotated on its own, so a band of tokens (the cores, or
        some rows of patches) gives exactly its slice of the whole sequence's q / k / v.

        Args:
            x (Tensor): (B, T, C) normalised tokens.
            cos (Tensor): (B, T, head_dims) RoPE cosines of these tokens.
            sin (Tensor): (B, T, head_dims) RoPE sines.

        Returns:
            tuple[Tensor, Tensor, Tensor]: q, k, v, each (B, num_heads, T, head_dims).
        """
        if cos.shape[-2] != x.shape[1] or sin.shape[-2] != x.shape[1]:
            raise ValueError(f'cos and sin must hold the angles of the {x.shape[1]} tokens, got '
                             f'{tuple(cos.shape)} and {tuple(sin.shape)}')
        dtype = autocast_dtype(x.device.type)
        if dtype is not None and x.dtype == torch.float32:
            # Autocast would cast x for each of the three projections: cast it once.
            x = x.to(dtype)
        q = apply_rope(self.split_heads(self.q_proj(x)), cos, sin)
        k = apply_rope(self.split_heads(self.k_proj(x)), cos, sin)
        v = self.split_heads(self.v_proj(x))
        return q, k, v

    def attend_to_cores(self, q: Tensor, k_cores: Tensor, v_cores: Tensor) -> Tensor:
        """The patches' side: patch queries attend to the cores only.

        The patches see no other patch, so any band of patch queries gives exactly its rows of
        the whole grid's result.

        Args:
            q (Tensor): (B, num_heads, n, head_dims) rotated patch queries.
            k_cores (Tensor): (B, num_heads, K, head_dims) rotated core keys.
            v_cores (Tensor): (B, num_heads, K, head_dims) core values.

        Returns:
            Tensor: (B, num_heads, n, head_dims), before the output projection.
        """
        if k_cores.shape != v_cores.shape or q.shape[:2] != k_cores.shape[:2] or \
                q.shape[3] != k_cores.shape[3]:
            raise ValueError(f'patch queries {tuple(q.shape)}, core keys {tuple(k_cores.shape)} '
                             f'and core values {tuple(v_cores.shape)} must share B, heads and '
                             f'head_dims, and the keys and values one shape')
        drop = self.dropout if self.training else 0.
        return F.scaled_dot_product_attention(q, k_cores, v_cores, dropout_p=drop)

    def project_out(self, *heads: Tensor) -> Tensor:
        """Merge the heads of attention outputs and apply the output projection.

        Args:
            *heads (Tensor): One or more (B, num_heads, T_i, head_dims) attention outputs,
                joined along the tokens in the order given.

        Returns:
            Tensor: (B, T_1 + T_2 + ..., C).
        """
        # SDPA returns (B, heads, T, d) views of (B, T, heads, d) memory: joined in that
        # layout, the tokens come out in one copy.
        out = torch.cat([h.transpose(1, 2) for h in heads], dim=1)
        out = out.reshape(*out.shape[:2], -1)
        return self.out_drop(self.out_proj(out))

    def forward(self,
                x: Tensor,
                token_padding_mask: Optional[Tensor] = None,
                *,
                active_cores: int,
                cos: Tensor,
                sin: Tensor,
                need_weights: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """Args:
            x (Tensor): (B, K + N, C) normalised tokens, the K cores first.
            token_padding_mask (Tensor, optional): (B, N) bool over the patches (the cores
                are never padding), True on padded patches, which the cores then ignore.
                Defaults to None (the reference behaviour).
            active_cores (int): K, at least 1 and below K + N.
            cos (Tensor): (B, K + N, head_dims) RoPE cosines of every token.
            sin (Tensor): (B, K + N, head_dims) RoPE sines.
            need_weights (bool): Also return the cores' attention weights (for
                visualisation). Defaults to False.

        Returns:
            Tensor | tuple[Tensor, Tensor]: (B, K + N, C), and with ``need_weights`` the
            (B, num_heads, K, K + N) softmax rows of the core queries over all tokens (the
            patches' rows only see the cores, so they carry no spatial map).
        """
        T = x.shape[1]
        if not 1 <= active_cores < T:
            raise ValueError(f'active_cores must lie in [1, {T - 1}] for {T} tokens, got '
                             f'{active_cores}')
        q, k, v = self.project_tokens(x, cos, sin)
        drop = self.dropout if self.training else 0.
        key_padding_mask = extend_padding_mask(token_padding_mask, active_cores, T)
        # SDPA's convention: True where attention is allowed.
        core_mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
        cores = F.scaled_dot_product_attention(
            q[:, :, :active_cores], k, v, attn_mask=core_mask, dropout_p=drop)
        patches = self.attend_to_cores(q[:, :, active_cores:], k[:, :, :active_cores],
                                       v[:, :, :active_cores])
        out = self.project_out(cores, patches)
        if not need_weights:
            return out
        return out, core_attention_weights(q[:, :, :active_cores], k, core_mask)


def core_attention_weights(q_cores: Tensor, k: Tensor, core_mask: Optional[Tensor]) -> Tensor:
    """The softmax rows that SDPA applies for the core queries (its default 1/sqrt(d) scale).

    Args:
        q_cores (Tensor): (B, heads, K, d) rotated core queries.
        k (Tensor): (B, heads, K + N, d) rotated keys.
        core_mask (Tensor, optional): (B, 1, 1, K + N) bool, True where allowed.

    Returns:
        Tensor: (B, heads, K, K + N), rows summing to 1, zero on masked keys.
    """
    scores = q_cores.float() @ k.float().transpose(-2, -1) / math.sqrt(q_cores.shape[-1])
    if core_mask is not None:
        scores = scores.masked_fill(~core_mask, float('-inf'))
    return scores.softmax(-1)
