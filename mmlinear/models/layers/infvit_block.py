"""Pre-norm transformer encoder block with a selectable (InfSA or softmax) token mixer."""
from typing import Optional, Tuple, Union

import torch
from mmcv.cnn.bricks import DropPath
from torch import Tensor, nn

from ..streaming.token_stream import TokenStream
from .infsa_attention import InfSAAttention
from .linear_infsa_summary import LinearInfSAKeyPool, LinearInfSAQuerySums
from .mlp import Mlp
from .windowed_linear_infsa import Window, image_extents, window_input_rows

#: The attention types whose blocks run over a token stream (:meth:`InfViTBlock.forward_streamed`):
#: each token meets the others only through a summary of fixed size. Pure InfSA and softmax
#: need every key for every query.
STREAMED_ATTN_TYPES = ('linear', 'none')


def check_streamable(attn_type: str) -> None:
    """Refuse to stream an attention type that has no streamed path, saying why.

    Raises:
        ValueError: Naming the attention types that stream.
    """
    if attn_type in STREAMED_ATTN_TYPES:
        return
    if attn_type in ('pure', 'softmax'):
        reason = 'has no fixed-size summary (every query needs every key)'
    else:
        reason = 'is an efficient-attention baseline without a streamed path'
    raise ValueError(f'{attn_type!r} attention {reason} and cannot stream; attn_type values '
                     f'that stream: {", ".join(map(repr, STREAMED_ATTN_TYPES))}')


class InfViTBlock(nn.Module):
    """``x + DropPath(Attn(LN(x)))`` then ``x + DropPath(MLP(LN(x)))``.

    Args:
        embed_dims (int): Token width C.
        num_heads (int): Attention heads.
        feedforward_channels (int): Hidden width of the MLP.
        drop_rate (float): Dropout after the projections. Defaults to 0.
        attn_drop_rate (float): Dropout on the attention scores. Defaults to 0.
        drop_path_rate (float): Stochastic depth of both branches. Defaults to 0.
        layer_norm_eps (float): Epsilon of the two LayerNorms. Defaults to 1e-6.
        **attn_kwargs: ``attn_type``, ``rho_init``, ``rho_mode``, ``qkv_bias``, ``tie_qk``,
            ``mixer_cfg``, passed to :class:`InfSAAttention`.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 feedforward_channels: int,
                 drop_rate: float = 0.,
                 attn_drop_rate: float = 0.,
                 drop_path_rate: float = 0.,
                 layer_norm_eps: float = 1e-6,
                 **attn_kwargs) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(embed_dims, eps=layer_norm_eps)
        self.attn = InfSAAttention(
            embed_dims, num_heads, attn_drop=attn_drop_rate, proj_drop=drop_rate, **attn_kwargs)
        self.ln2 = nn.LayerNorm(embed_dims, eps=layer_norm_eps)
        self.ffn = Mlp(embed_dims, feedforward_channels, drop=drop_rate)
        self.drop_path = DropPath(drop_path_rate) if drop_path_rate > 0 else nn.Identity()

    def forward(self,
                x: Tensor,
                token_padding_mask: Optional[Tensor] = None,
                *,
                num_extra_tokens: int = 0,
                need_weights: bool = False,
                hw_shape: Optional[Tuple[int, int]] = None,
                context_window: Optional[Window] = None) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """Args:
            x (Tensor): (B, E + N, C) tokens, the E extra tokens (CLS) first.
            token_padding_mask (Tensor, optional): (B, N) bool over the patch tokens, True on
                padded patches; the attention builds its key mask from it.
            num_extra_tokens (int): E, the tokens before the patches. Defaults to 0.
            need_weights (bool): Also return the attention weights.
            hw_shape (tuple[int, int], optional): The patch grid, for ``context_window``.
            context_window (tuple[int, int], optional): Linear-InfSA's window around each
                patch token (see :meth:`InfSAAttention.forward`). Defaults to None (the whole
                sequence).

        Returns:
            Tensor | tuple[Tensor, Tensor]: (B, E + N, C), plus the weights when asked.
        """
        attn_out = self.attn(
            self.ln1(x),
            token_padding_mask,
            num_extra_tokens=num_extra_tokens,
            need_weights=need_weights,
            hw_shape=hw_shape,
            context_window=context_window)
        weights = None
        if need_weights:
            attn_out, weights = attn_out
        x = x + self.drop_path(attn_out)
        x = x + self.drop_path(self.ffn(self.ln2(x)))
        return (x, weights) if need_weights else x

    def interactions(self, num_patches: int, num_extra_tokens: int) -> int:
        """Query-key pairs per head and image: :meth:`InfSAAttention.interactions`."""
        return self.attn.interactions(num_patches, num_extra_tokens)

    @property
    def stream_passes(self) -> int:
        """int: Passes of :meth:`forward_streamed` over the patch rows: the two sums of
        Linear-InfSA and the update (3), or the update alone without attention (1)."""
        return 3 if self.attn.attn_type == 'linear' else 1

    def forward_streamed(self,
                         stream: TokenStream,
                         *,
                         num_extra_tokens: int = 0,
                         hw_shape: Optional[Tuple[int, int]] = None,
                         context_window: Optional[Window] = None) -> None:
        """The block over a token stream, band by band, in place (inference only).

        Linear-InfSA's output is one vector per sample, computed from two fixed-size sums
        (:class:`LinearInfSAQuerySums`, :class:`LinearInfSAKeyPool`), each a pass over the
        stream; a third pass adds it and runs the MLP, which is per token. The result equals
        :meth:`forward` on the whole sequence.

        With a ``context_window`` smaller than the grid the two sums give the extra tokens'
        output only, and the third pass computes each band's patch outputs from the rows
        their windows cover (:meth:`_windowed_update`).

        Args:
            stream (TokenStream): The extra tokens (CLS) and the patch tokens; the padding
                mask is the stream's.
            num_extra_tokens (int): E, which the stream's extra tokens must be (as
                :meth:`forward` takes it). Defaults to 0.
            hw_shape (tuple[int, int], optional): The patch grid, which must be the
                stream's (as :meth:`forward` takes it). Defaults to None (the stream's).
            context_window (tuple[int, int], optional): As :meth:`forward`. Defaults to None.
        """
        attn = self.attn
        check_streamable(attn.attn_type)
        if stream.num_extra_tokens != num_extra_tokens:
            raise ValueError(f'the stream must hold the {num_extra_tokens} extra tokens, got '
                             f'{stream.num_extra_tokens}')
        if hw_shape is not None and tuple(hw_shape) != stream.hw_shape:
            raise ValueError(f'hw_shape {tuple(hw_shape)} is not the stream\'s grid '
                             f'{stream.hw_shape}')
        windowed = attn.check_window(context_window, stream.hw_shape, False)
        mixed = 0.
        if attn.attn_type == 'linear':
            query_sums = LinearInfSAQuerySums(attn.eps)
            for _, tokens, mask in stream.segments():
                queries = attn.queries(self.ln1(tokens))
                query_sums.add(queries, mask)
            key_pool = LinearInfSAKeyPool(query_sums.result(), attn.rho, attn.eps)
            for _, tokens, mask in stream.segments():
                normed = self.ln1(tokens)
                key_pool.add(attn.keys(normed), normed, mask)
            mixed = attn.project_pooled_inputs(*key_pool.result(), queries.dtype)[:, None]
        if windowed:
            self._windowed_update(stream, mixed, context_window)
            return
        for band, tokens, _ in stream.segments():
            tokens = tokens + mixed
            stream.put(band, tokens + self.ffn(self.ln2(tokens)))

    def _update(self, tokens: Tensor, attn_out: Tensor) -> Tensor:
        """The block's output from its input and the attention's output (eval: no drop
        path)."""
        tokens = tokens + attn_out
        return tokens + self.ffn(self.ln2(tokens))

    def _windowed_update(self, stream: TokenStream, mixed: Tensor, window: Window) -> None:
        """The streamed block's last pass with a context window: the extra tokens take the
        whole sequence's output ``mixed`` (B, 1, C); each band of patch rows the windowed
        output, from its rows and the rows their windows reach above and below.

        The stream is updated in place, band after band, while the next band's windows
        still need the inputs of up to ``window[0] - 1`` rows above it: those rows of the
        band just computed are kept (a copy) before its output is written over them.
        """
        hw_shape, W = stream.hw_shape, stream.hw_shape[1]
        B, _, C = stream.patches.shape
        extra = stream.extra if stream.extra is not None else torch.zeros(
            B, 0, C, dtype=stream.dtype, device=stream.device)
        extra_normed = self.ln1(extra)
        extents = image_extents(stream.token_padding_mask, hw_shape, B)
        if stream.extra is not None:
            stream.put(None, self._update(stream.extra, mixed))
        bands = stream.bands
        kept, kept_start = None, 0  # the inputs of rows [kept_start, the band's start)
        for index, (start, stop) in enumerate(stream.pass_bands()):
            low, high = window_input_rows((start, stop), extents, window[0])
            low, high = min(low, start), max(high, stop)
            inputs = stream.read(start, high)
            if low < start:
                inputs = torch.cat([kept[:, (low - kept_start) * W:], inputs], dim=1)
            attn_out = self.attn.windowed_outputs(
                extra_normed,
                self.ln1(inputs),
                stream.mask(low, high),
                band_start=low,
                span=(start, stop),
                hw_shape=hw_shape,
                window=window,
                extents=extents)
            own = inputs[:, (start - low) * W:(stop - low) * W]
            output = self._update(own, attn_out)
            if index + 1 < len(bands):
                kept_start = min(window_input_rows(bands[index + 1], extents, window[0])[0], stop)
                # A copy: ``inputs`` may be a view of the stream, which the write overwrites.
                kept = inputs[:, (kept_start - low) * W:(stop - low) * W].clone()
            stream.write(start, stop, output)
