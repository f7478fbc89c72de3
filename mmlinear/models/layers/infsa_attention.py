"""Multi-head attention with a choice of token mixer: softmax, Pure InfSA, Linear-InfSA or one of
the efficient-attention baselines."""
import math
from typing import Any, Dict, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from mmlinear.ops import linear_infsa_key_weights, pure_infsa, pure_infsa_scores
from ..utils import autocast_disabled, check_choice, extend_padding_mask
from .efficient_attention import EFFICIENT_ATTENTIONS, build_efficient_attention
from .linear_infsa_summary import LinearInfSASummary

ATTN_TYPES = ('softmax', 'pure', 'linear', 'none') + tuple(EFFICIENT_ATTENTIONS)
RHO_MODES = ('per_head', 'per_layer', 'fixed')


class InfSAAttention(nn.Module):
    """Multi-head self-attention whose token mixer is picked by ``attn_type``.

    - ``'softmax'``: scaled dot-product attention, the matched baseline.
    - ``'pure'``: Pure InfSA, ``rho * relu(QK^T) / ||relu(QK^T)||_F`` applied to V.
    - ``'linear'``: Linear-InfSA, a rank-1 pooled value broadcast to every query, O(N).
      Its output is one vector per sample, so outside the explicit path (``need_weights``,
      attention dropout) V and the output projection run once per (sample, head) on the
      pooled inputs instead of once per token (see :meth:`_factorised_linear_infsa`).
    - ``'none'``: no token mixing (the attention branch outputs zeros); an ablation control.
    - The efficient-attention baselines of the InfSA paper's comparison, in the same body:
      ``'elu_linear'`` (Katharopoulos et al., 2020), ``'performer'`` (FAVOR+),
      ``'linformer'`` and ``'nystromformer'``; see
      :mod:`mmlinear.models.layers.efficient_attention`. They run in float32 (float64 for
      float64) under autocast, and take no attention dropout.

    Separate q/k/v/out projections keep timm / torchvision / mmpretrain ViT weights loadable
    (the official converter splits a packed in-projection the same way). rho exists for the
    InfSA types only; it is learnable and receives gradients (the released module's
    ``.item()`` bug is not reproduced).

    Args:
        embed_dims (int): Token width C.
        num_heads (int): Number of heads H; C must be divisible by H.
        attn_type (str): One of ``ATTN_TYPES``. Defaults to 'linear'.
        rho_init (float): Initial decay rho in (0, 1), stored as a sigmoid logit.
            Defaults to 0.95.
        rho_mode (str): 'per_head' (one learnable rho per head), 'per_layer' (one learnable
            rho) or 'fixed' (a constant). Defaults to 'per_head'.
        qkv_bias (bool): Bias in the q/k/v projections. Defaults to True.
        attn_drop (float): Dropout on the attention scores. Defaults to 0.
        proj_drop (float): Dropout after the output projection. Defaults to 0.
        tie_qk (bool): Use the query projection for the keys too (one C x C projection fewer;
            a guess at how the paper's Linear-InfViT has fewer parameters). Defaults to False.
        eps (float): Stabiliser of the InfSA normalisations. Defaults to 1e-6.
        mixer_cfg (dict, optional): Options of an efficient-attention baseline, e.g.
            ``dict(num_features=64)`` for 'performer', ``dict(max_tokens=197, proj_len=64)``
            for 'linformer' (``max_tokens`` is required there), ``dict(num_landmarks=32)``
            for 'nystromformer'. Only those types take it. Defaults to None.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 attn_type: str = 'linear',
                 rho_init: float = 0.95,
                 rho_mode: str = 'per_head',
                 qkv_bias: bool = True,
                 attn_drop: float = 0.,
                 proj_drop: float = 0.,
                 tie_qk: bool = False,
                 eps: float = 1e-6,
                 mixer_cfg: Optional[Dict[str, Any]] = None) -> None:
        super().__init__()
        check_choice('attn_type', attn_type, ATTN_TYPES)
        check_choice('rho_mode', rho_mode, RHO_MODES)
        if attn_type in EFFICIENT_ATTENTIONS:
            if attn_drop > 0:
                raise ValueError(f'{attn_type!r} attention takes no attention dropout, got '
                                 f'attn_drop={attn_drop}; attention dropout is supported by '
                                 f"'softmax', 'pure' and 'linear'")
        elif mixer_cfg:
            raise ValueError(f'mixer_cfg configures an efficient-attention baseline '
                             f'({", ".join(map(repr, EFFICIENT_ATTENTIONS))}), not '
                             f'{attn_type!r} attention')
        if embed_dims % num_heads != 0:
            raise ValueError(f'embed_dims ({embed_dims}) must be divisible by num_heads '
                             f'({num_heads})')
        if not 0. < rho_init < 1.:
            raise ValueError(f'rho_init must lie in (0, 1), got {rho_init}')
        self.embed_dims = embed_dims
        self.num_heads = num_heads
        self.head_dims = embed_dims // num_heads
        self.attn_type = attn_type
        self.rho_mode = rho_mode
        self.tie_qk = tie_qk
        self.eps = eps

        self.attn_drop = attn_drop
        if attn_type == 'none':
            # The control mixes nothing, so it holds no (unused, DDP-breaking) parameters.
            return
        self.q_proj = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.k_proj = None if tie_qk else nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.v_proj = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
        self.out_proj = nn.Linear(embed_dims, embed_dims)
        self.proj_drop = nn.Dropout(proj_drop)
        if attn_type in EFFICIENT_ATTENTIONS:
            self.mixer = build_efficient_attention(attn_type, self.head_dims, **(mixer_cfg or {}))
            return
        if attn_type == 'softmax':
            return
        logit = torch.full((num_heads if rho_mode == 'per_head' else 1, ),
                           math.log(rho_init / (1. - rho_init)))
        if rho_mode == 'fixed':
            self.register_buffer('rho_logit', logit)
        else:
            self.rho_logit = nn.Parameter(logit)

    @property
    def rho(self) -> Tensor:
        """Tensor: the InfSA decay, (H,) for 'per_head', else (1,)."""
        if self.attn_type not in ('pure', 'linear'):
            raise ValueError(f'{self.attn_type!r} attention has no rho; only pure and linear do')
        return torch.sigmoid(self.rho_logit)

    def interactions(self, num_patches: int, num_extra_tokens: int) -> int:
        """Query-key pairs scored per head and image (what the papers call interactions).

        Softmax and Pure InfSA score every pair of the T = E + N tokens (T^2). Linear-InfSA
        scores each key once, against the one energy-pooled query (T); the energies are
        per token and score no pair. 'none' scores nothing. The baselines count their own
        (e.g. T k for Linformer, none for the feature-map attentions).

        Args:
            num_patches (int): N.
            num_extra_tokens (int): E (InfViT's CLS token).

        Returns:
            int: The number of scores one head computes.
        """
        num_tokens = num_patches + num_extra_tokens
        if self.attn_type in EFFICIENT_ATTENTIONS:
            return self.mixer.interactions(num_tokens)
        return {
            'softmax': num_tokens**2,
            'pure': num_tokens**2,
            'linear': num_tokens,
            'none': 0
        }[self.attn_type]

    def _split_heads(self, x: Tensor) -> Tensor:
        B, N, _ = x.shape
        return x.reshape(B, N, self.num_heads, self.head_dims).transpose(1, 2)

    def forward(self,
                x: Tensor,
                token_padding_mask: Optional[Tensor] = None,
                *,
                num_extra_tokens: int = 0,
                need_weights: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """Mix the tokens of ``x``.

        Args:
            x (Tensor): (B, E + N, C) tokens, the E extra tokens (InfViT's CLS) first.
            token_padding_mask (Tensor, optional): (B, N) bool over the N patch tokens, True
                on padded patches, which are then excluded from every normalisation and from
                the keys. The extra tokens are never padding. Defaults to None.
            num_extra_tokens (int): E. Defaults to 0.
            need_weights (bool): Also return the attention weights. Defaults to False.

        Returns:
            Tensor | tuple[Tensor, Tensor]: (B, T, C) output, T = E + N; with
            ``need_weights`` also the weights over the T tokens: (B, H, T, T) for 'softmax'
            and 'pure' (rows of rho * A_hat for 'pure'), (B, H, T) key weights ``a`` for
            'linear', (B, H, T, T) for the baselines (the matrix their approximation
            multiplies V with), and None for 'none'. For 'linear'
            without ``need_weights`` and attention dropout, and without output dropout, the
            output is an expanded view of one (B, C) vector (stride 0 along T): copy it
            before writing to it in place.
        """
        B, T, C = x.shape
        key_padding_mask = extend_padding_mask(token_padding_mask, num_extra_tokens, T)
        if self.attn_type == 'none':
            out = x.new_zeros(B, T, C)
            return (out, None) if need_weights else out
        q = self.queries(x)
        k = q if self.k_proj is None else self.keys(x)
        attn_drop = self.attn_drop if self.training else 0.
        if self.attn_type == 'linear' and not need_weights and attn_drop == 0:
            out = self._factorised_linear_infsa(x, q, k, key_padding_mask)
            # Dropout acts on the broadcast (B, T, C) tokens, as it does on the per-token
            # output of the explicit path (same mask for the same seed); in eval or with p = 0
            # it returns the expanded view itself, so nothing of size N is materialised.
            return self.proj_drop(out[:, None, :].expand(B, T, C))
        v = self._split_heads(self.v_proj(x))
        weights = None
        if self.attn_type in EFFICIENT_ATTENTIONS:
            out, weights = self._efficient_attention(q, k, v, key_padding_mask, need_weights)
        elif self.attn_type == 'softmax':
            out, weights = self._softmax(q, k, v, key_padding_mask, attn_drop, need_weights)
        elif need_weights or attn_drop > 0:
            # Explicit path: the scores are needed (maps) or dropped out (training).
            out, weights = self._explicit_infsa(q, k, v, key_padding_mask, attn_drop)
        else:
            out = pure_infsa(q, k, v, self.rho, key_padding_mask, self.eps)
        out = out.transpose(1, 2).reshape(B, T, C)
        out = self.proj_drop(self.out_proj(out))
        return (out, weights) if need_weights else out

    def _factorised_linear_infsa(self, x: Tensor, q: Tensor, k: Tensor,
                                 key_padding_mask: Optional[Tensor]) -> Tensor:
        """Linear-InfSA's output projection of the pooled value, once per sample.

        The pooled value of head h is ``u_h = sum_j a_hj v_hj`` with ``v_hj = W_h x_j + b_h``
        (W_h, b_h: head h's rows of the value projection), so by linearity
        ``u_h = W_h (sum_j a_hj x_j) + b_h sum_j a_hj``: the tokens' inputs are pooled per head
        (H x C multiply-adds per token instead of the C x C of V), and V and the output
        projection then run on one vector per (sample, head) and per sample. ``sum_j a_hj`` is
        rho_h, or 0 when every score is <= 0 (the bias term vanishes with the pooled value).
        The sums run as the two passes of :class:`LinearInfSASummary`.

        Args:
            x (Tensor): (B, S, C) tokens the keys and values are projected from.
            q (Tensor): (B, H, N, d) queries.
            k (Tensor): (B, H, S, d) keys.
            key_padding_mask (Tensor, optional): (B, S) bool, True on padded tokens.

        Returns:
            Tensor: (B, C), the output projection of the pooled value (heads concatenated as
            in the per-token path), before the output dropout and the broadcast to N tokens.
        """
        # The whole sequence is one band of the summary the streamed blocks accumulate band
        # by band: its two passes are the ops with kernels.
        summary = LinearInfSASummary(self.eps)
        summary.add_queries(q, key_padding_mask)
        summary.add_keys(k, x, key_padding_mask)
        return self.project_pooled_inputs(*summary.pooled_inputs(self.rho), q.dtype)

    def project_pooled_inputs(self, pooled_x: Tensor, weight_sum: Tensor,
                              dtype: torch.dtype) -> Tensor:
        """Linear-InfSA's output from its key-weighted inputs (see
        :meth:`_factorised_linear_infsa`): the value projection of H vectors per sample, then
        the output projection.

        Args:
            pooled_x (Tensor): (B, H, C) ``sum_j a_hj x_j`` per head, in the accumulation
                dtype (float32, float64 for float64).
            weight_sum (Tensor): (B, H, 1) ``sum_j a_hj``, the factor of the value bias.
            dtype (torch.dtype): The queries' dtype (the autocast one under autocast).

        Returns:
            Tensor: (B, C), before the output dropout and the broadcast to the tokens.
        """
        acc = pooled_x.dtype
        H, d = self.num_heads, self.head_dims
        with torch.autocast(device_type=pooled_x.device.type, enabled=False):
            # H vectors per sample cost nothing: the value projection stays in acc too.
            weight = self.v_proj.weight.to(acc).reshape(H, d, self.embed_dims)
            pooled = torch.einsum('bhc,hdc->bhd', pooled_x, weight)
            if self.v_proj.bias is not None:
                pooled = pooled + weight_sum * self.v_proj.bias.to(acc).reshape(H, d)
        # Cast as the per-token path casts its pooled value (to q's dtype, the autocast one),
        # then the output projection under the caller's autocast state.
        return self.out_proj(pooled.reshape(pooled_x.shape[0], self.embed_dims).to(dtype))

    def queries(self, x: Tensor) -> Tensor:
        """(B, T, C) attention inputs -> (B, H, T, d) queries, before scaling."""
        return self._split_heads(self.q_proj(x))

    def keys(self, x: Tensor) -> Tensor:
        """(B, T, C) attention inputs -> (B, H, T, d) keys (the queries with ``tie_qk``)."""
        return self._split_heads((self.q_proj if self.k_proj is None else self.k_proj)(x))

    def _efficient_attention(self, q: Tensor, k: Tensor, v: Tensor,
                             key_padding_mask: Optional[Tensor],
                             need_weights: bool) -> Tuple[Tensor, Optional[Tensor]]:
        # Exponentials, feature sums and the pseudo-inverse iteration run outside autocast,
        # in float32 (float64 for float64: they overflow or drift in half precision), and the
        # output returns to q's dtype.
        acc = torch.promote_types(q.dtype, torch.float32)
        with autocast_disabled(q.device.type):
            out, weights = self.mixer(
                q.to(acc), k.to(acc), v.to(acc), key_padding_mask, need_weights)
        return out.to(q.dtype), weights

    def _softmax(self, q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Optional[Tensor],
                 attn_drop: float, need_weights: bool) -> Tuple[Tensor, Optional[Tensor]]:
        attn_mask = None if key_padding_mask is None else ~key_padding_mask[:, None, None, :]
        if not need_weights:
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, dropout_p=attn_drop), None
        logits = (q @ k.transpose(-2, -1)) * self.head_dims**-0.5
        if attn_mask is not None:
            logits = logits.masked_fill(~attn_mask, float('-inf'))
        weights = logits.softmax(-1)
        return F.dropout(weights, attn_drop) @ v, weights

    def _explicit_infsa(self, q: Tensor, k: Tensor, v: Tensor, key_padding_mask: Optional[Tensor],
                        attn_drop: float) -> Tuple[Tensor, Tensor]:
        with torch.autocast(device_type=q.device.type, enabled=False):
            if self.attn_type == 'pure':
                weights = pure_infsa_scores(q, k, self.rho, key_padding_mask, self.eps)
                out = F.dropout(weights, attn_drop) @ v.to(weights.dtype)
            else:
                weights = linear_infsa_key_weights(q, k, self.rho, key_padding_mask, self.eps)
                pooled = torch.einsum('bhs,bhsd->bhd', F.dropout(weights, attn_drop),
                                      v.to(weights.dtype))
                out = pooled.unsqueeze(2).expand(-1, -1, q.shape[2], -1)
        return out.to(q.dtype), weights
