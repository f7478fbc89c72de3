"""Multi-head attention with a choice of token mixer: softmax, Pure InfSA, Linear-InfSA, none
or one of the efficient-attention baselines."""
import math
from typing import Any, Dict, Optional, Tuple, Union

import torch
from torch import Tensor, nn

from mmlinear.utils.ext_loader import exporting
from ..utils import check_choice, extend_padding_mask
from ..utils.windowed_pyramid_pooling import Span
from .mixers import (EFFICIENT_ATTENTIONS, MIXERS, Values, build_mixer, merge_heads, mixer_options,
                     project_pooled_inputs, split_heads)
from .windowed_linear_infsa import Window, covers_grid, image_extents, windowed_linear_infsa

ATTN_TYPES = tuple(MIXERS)
RHO_MODES = ('per_head', 'per_layer', 'fixed')


class InfSAAttention(nn.Module):
    """Multi-head self-attention whose token mixer is picked by ``attn_type``.

    The layer projects its tokens to queries, keys and values, hands them to the mixer of
    ``attn_type`` (:data:`~mmlinear.models.layers.mixers.MIXERS`, one class per type, each a
    :class:`~mmlinear.models.layers.mixers.TokenMixer`) and projects the mixed values back:

    - ``'softmax'``: scaled dot-product attention, the matched baseline.
    - ``'pure'``: Pure InfSA, ``rho * relu(QK^T) / ||relu(QK^T)||_F`` applied to V.
    - ``'linear'``: Linear-InfSA, a rank-1 pooled value broadcast to every query, O(N).
      Its output is one vector per sample, so outside the explicit path (``need_weights``,
      attention dropout) V and the output projection run once per (sample, head) on the
      pooled inputs instead of once per token (see
      :class:`~mmlinear.models.layers.mixers.LinearInfSAAttention`).
    - ``'none'``: no token mixing (the attention branch outputs zeros); an ablation control,
      without projections.
    - The efficient-attention baselines of the InfSA paper's comparison, in the same body:
      ``'elu_linear'`` (Katharopoulos et al., 2020), ``'performer'`` (FAVOR+),
      ``'linformer'``, ``'nystromformer'`` and ``'agent'`` (Agent Attention, Han et al.,
      2024). They run in float32 (float64 for float64) under autocast, and take no
      attention dropout.

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
            for 'nystromformer', ``dict(num_agents=16)`` for 'agent'. Only those types take
            it. Defaults to None.
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
                dropped = [t for t in MIXERS if 'attn_drop' in mixer_options(t)]
                raise ValueError(f'{attn_type!r} attention takes no attention dropout, got '
                                 f'attn_drop={attn_drop}; attention dropout is supported by '
                                 f'{", ".join(map(repr, dropped[:-1]))} and {dropped[-1]!r}')
            options = mixer_cfg or {}
        elif mixer_cfg:
            raise ValueError(f'mixer_cfg configures an efficient-attention baseline '
                             f'({", ".join(map(repr, EFFICIENT_ATTENTIONS))}), not '
                             f'{attn_type!r} attention')
        else:
            # The layer's own options, for the mixers that use them.
            options = {
                name: value
                for name, value in dict(attn_drop=attn_drop, eps=eps).items()
                if name in mixer_options(attn_type)
            }
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

        mixer = MIXERS[attn_type]
        if mixer.projected:
            self.q_proj = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
            self.k_proj = None if tie_qk else nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
            self.v_proj = nn.Linear(embed_dims, embed_dims, bias=qkv_bias)
            self.out_proj = nn.Linear(embed_dims, embed_dims)
            self.proj_drop = nn.Dropout(proj_drop)
        else:
            # The control mixes nothing, so it holds no (unused, DDP-breaking) parameters:
            # the mixer sees the inputs themselves, and its zeros are not dropped out.
            self.q_proj = self.v_proj = self.out_proj = self.proj_drop = nn.Identity()
            self.k_proj = None
        if mixer.takes_rho:
            logit = torch.full((num_heads if rho_mode == 'per_head' else 1, ),
                               math.log(rho_init / (1. - rho_init)))
            if rho_mode == 'fixed':
                self.register_buffer('rho_logit', logit)
            else:
                self.rho_logit = nn.Parameter(logit)
        self.mixer = build_mixer(attn_type, self.head_dims, **options)

    @property
    def rho(self) -> Tensor:
        """Tensor: the InfSA decay, (H,) for 'per_head', else (1,)."""
        if not self.mixer.takes_rho:
            decayed = [name for name, mixer in MIXERS.items() if mixer.takes_rho]
            raise ValueError(f'{self.attn_type!r} attention has no rho; only '
                             f'{" and ".join(decayed)} do')
        return torch.sigmoid(self.rho_logit)

    def interactions(self, num_patches: int, num_extra_tokens: int) -> int:
        """Query-key pairs scored per head and image (what the papers call interactions):
        the mixer's count for the T = E + N tokens (:meth:`TokenMixer.interactions`: T^2 for
        softmax and Pure InfSA, T for Linear-InfSA, none for 'none' and the feature-map
        attentions, e.g. T k for Linformer).

        Args:
            num_patches (int): N.
            num_extra_tokens (int): E (InfViT's CLS token).

        Returns:
            int: The number of scores one head computes.
        """
        return self.mixer.interactions(num_patches + num_extra_tokens)

    def _split_heads(self, x: Tensor) -> Tensor:
        return split_heads(x, self.num_heads)

    def forward(self,
                x: Tensor,
                token_padding_mask: Optional[Tensor] = None,
                *,
                num_extra_tokens: int = 0,
                need_weights: bool = False,
                hw_shape: Optional[Tuple[int, int]] = None,
                context_window: Optional[Window] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """Mix the tokens of ``x``.

        Args:
            x (Tensor): (B, E + N, C) tokens, the E extra tokens (InfViT's CLS) first.
            token_padding_mask (Tensor, optional): (B, N) bool over the N patch tokens, True
                on padded patches, which are then excluded from every normalisation and from
                the keys. The extra tokens are never padding. Defaults to None.
            num_extra_tokens (int): E. Defaults to 0.
            need_weights (bool): Also return the attention weights. Defaults to False.
            hw_shape (tuple[int, int], optional): The patch grid (H', W'), which
                ``context_window`` needs. Defaults to None.
            context_window (tuple[int, int], optional): 'linear' only: each patch token's
                output from the window of (rows, columns) patch tokens around it and the extra
                tokens (:meth:`windowed_outputs`); the extra tokens' outputs stay the whole
                sequence's. None, or a window that covers the grid: the whole sequence's
                summary for every token, bit for bit. Defaults to None.

        Returns:
            Tensor | tuple[Tensor, Tensor]: (B, T, C) output, T = E + N; with
            ``need_weights`` also the weights over the T tokens: (B, H, T, T) for 'softmax'
            and 'pure' (rows of rho * A_hat for 'pure'), (B, H, T) key weights ``a`` for
            'linear', (B, H, T, T) for the baselines (the matrix their approximation
            multiplies V with), and None for 'none'. For 'linear'
            without ``need_weights``, attention dropout and a context window smaller than the
            grid, and without output dropout, the
            output is an expanded view of one (B, C) vector (stride 0 along T): copy it
            before writing to it in place.
        """
        B, T, C = x.shape
        windowed = self.check_window(context_window, hw_shape, need_weights)
        key_padding_mask = extend_padding_mask(token_padding_mask, num_extra_tokens, T)
        q = self.queries(x)
        k = q if self.k_proj is None else self.keys(x)
        mixer_inputs = dict(rho=self.rho) if self.mixer.takes_rho else {}
        mixed, weights = self.mixer.mix(
            q,
            k,
            Values(x, self.v_proj, self.num_heads),
            key_padding_mask,
            need_weights=need_weights,
            **mixer_inputs)
        # A mixer's output is per query, (B, H, T, d), or one per sample, (B, H, d), which
        # is projected once and broadcast to the T tokens. Dropout acts on the broadcast
        # tokens, as on per-token outputs (same mask for the same seed); in eval or with
        # p = 0 it returns the expanded view itself, so nothing of size T is materialised.
        out = self.out_proj(merge_heads(mixed)).reshape(B, -1, C).expand(B, T, C)
        if windowed:
            E = num_extra_tokens
            patches = self.windowed_outputs(
                x[:, :E],
                x[:, E:],
                token_padding_mask,
                band_start=0,
                span=(0, hw_shape[0]),
                hw_shape=hw_shape,
                window=context_window,
                extents=None if token_padding_mask is None else image_extents(
                    token_padding_mask, hw_shape, B))
            out = torch.cat([out[:, :E], patches], dim=1)
        out = self.proj_drop(out)
        return (out, weights) if need_weights else out

    def check_window(self, context_window: Optional[Window], hw_shape: Optional[Tuple[int, int]],
                     need_weights: bool) -> bool:
        """Whether a context window applies to a call (it is set and smaller than the grid);
        a ValueError where it cannot.

        Raises:
            ValueError: A window for another attention type than 'linear', without the
                grid, or with the explicit form (attention weights asked for, or attention
                dropout in training: each token has weights of its own there).
        """
        if context_window is None:
            return False
        if self.attn_type != 'linear':
            raise ValueError(f"context_window applies to 'linear' attention only, got "
                             f'{self.attn_type!r}; use context_window=None')
        if hw_shape is None:
            raise ValueError('context_window needs the patch grid: pass hw_shape')
        # While exporting, the windows at every size (a window that covers the grid is the
        # grid's summary, up to rounding), so that the graph holds at sizes above the window.
        if not exporting() and covers_grid(context_window, hw_shape):
            return False
        if self.mixer.explicit(need_weights):
            raise ValueError(f'with a context_window {context_window} smaller than the grid '
                             f'{tuple(hw_shape)}, Linear-InfSA has no attention weights to '
                             f'return and takes no attention dropout: set context_window=None '
                             f'(or a window that covers the grid), need_weights=False, or '
                             f'eval mode')
        return True

    def windowed_outputs(self, extra: Tensor, x: Tensor, token_padding_mask: Optional[Tensor], *,
                         band_start: int, span: Span, hw_shape: Tuple[int, int], window: Window,
                         extents: Tensor) -> Tensor:
        """Linear-InfSA's output for the patch tokens of rows ``span``, each from its window
        (:func:`~mmlinear.models.layers.windowed_linear_infsa.windowed_linear_infsa`), before
        the output dropout.

        Args:
            extra (Tensor): (B, E, C) the extra tokens' attention inputs (E may be 0).
            x (Tensor): (B, n, C) attention inputs of grid rows ``[band_start, band_start +
                n / W')``, covering the windows of ``span``.
            token_padding_mask (Tensor, optional): (B, n) bool, True on padded patches.
            band_start (int): The band's first grid row.
            span (Span): The output rows.
            hw_shape (tuple[int, int]): The patch grid (H', W').
            window (tuple[int, int]): The window's (rows, columns).
            extents (Tensor): (B, 2) the images' valid regions.

        Returns:
            Tensor: (B, (span rows) * W', C) in the queries' dtype.
        """

        def heads(t: Tensor) -> Tensor:  # (B, n, C) -> (B, n, H, d)
            return t.reshape(*t.shape[:2], self.num_heads, self.head_dims)

        def qkv(t: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
            q = heads(self.q_proj(t))
            k = q if self.k_proj is None else heads(self.k_proj(t))
            return q, k, heads(self.v_proj(t))

        q, k, v = qkv(x)
        pooled = windowed_linear_infsa(
            q,
            k,
            v,
            qkv(extra) if extra.shape[1] else None,
            token_padding_mask,
            self.rho,
            self.eps,
            band_start=band_start,
            span=span,
            hw_shape=hw_shape,
            window=window,
            extents=extents)
        # Rounded to q's dtype (the autocast one), as the whole summary's pooled value.
        return self.out_proj(pooled.to(q.dtype).flatten(2))

    def project_pooled_inputs(self, pooled_x: Tensor, weight_sum: Tensor,
                              dtype: torch.dtype) -> Tensor:
        """Linear-InfSA's output from its key-weighted inputs (see
        :class:`~mmlinear.models.layers.mixers.LinearInfSAAttention`): the value projection
        of H vectors per sample, then the output projection.

        Args:
            pooled_x (Tensor): (B, H, C) ``sum_j a_hj x_j`` per head, in the accumulation
                dtype (float32, float64 for float64).
            weight_sum (Tensor): (B, H, 1) ``sum_j a_hj``, the factor of the value bias.
            dtype (torch.dtype): The queries' dtype (the autocast one under autocast).

        Returns:
            Tensor: (B, C), before the output dropout and the broadcast to the tokens.
        """
        pooled = project_pooled_inputs(self.v_proj, self.num_heads, pooled_x, weight_sum)
        # Cast as the per-token path casts its pooled value (to q's dtype, the autocast one),
        # then the output projection under the caller's autocast state.
        return self.out_proj(merge_heads(pooled.to(dtype)))

    def queries(self, x: Tensor) -> Tensor:
        """(B, T, C) attention inputs -> (B, H, T, d) queries, before scaling."""
        return self._split_heads(self.q_proj(x))

    def keys(self, x: Tensor) -> Tensor:
        """(B, T, C) attention inputs -> (B, H, T, d) keys (the queries with ``tie_qk``)."""
        return self._split_heads((self.q_proj if self.k_proj is None else self.k_proj)(x))
