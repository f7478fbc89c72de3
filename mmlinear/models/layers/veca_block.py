"""The VECA block: pre-norm core-periphery attention and a SwiGLU MLP."""
from typing import Optional, Tuple, Union

import torch
from torch import Tensor, nn

from mmlinear.ops import Linear
from ..streaming.token_stream import TokenStream
from .core_periphery_attention import CorePeripheryAttention
from .online_core_attention import OnlineCoreAttention
from .rope2d import PatchRope


class VECABlock(nn.Module):
    """``x + attn(norm_attn(x))`` then ``x + fc2(SwiGLU(fc1(norm_ffn(x))))``, the official VECA
    block (paper Fig. 2).

    No layer scale, drop path or QK-norm; every Linear has a bias. Parameter names are those
    of the released checkpoints (``norm_attn``, ``attn.{q,k,v,out}_proj``, ``norm_ffn``,
    ``fc1``, ``fc2``).

    Args:
        embed_dims (int): Token width C.
        num_heads (int): Attention heads.
        feedforward_channels (int): SwiGLU hidden width h; ``fc1`` has 2 h outputs.
        dropout (float): Dropout in the attention and after the gate and ``fc2``.
            Defaults to 0.
    """

    def __init__(self,
                 embed_dims: int,
                 num_heads: int,
                 feedforward_channels: int,
                 dropout: float = 0.) -> None:
        super().__init__()
        self.norm_attn = nn.LayerNorm(embed_dims)
        self.attn = CorePeripheryAttention(embed_dims, num_heads, dropout)
        self.norm_ffn = nn.LayerNorm(embed_dims)
        # fc1 and the SwiGLU gate in one layer (the first h outputs feed the SiLU), so that
        # a CPU backend can fuse the gate into the matmul.
        self.fc1 = Linear(embed_dims, 2 * feedforward_channels, activation='swiglu')
        self.fc2 = Linear(feedforward_channels, embed_dims)
        self.drop = nn.Dropout(dropout)

    def forward(self,
                x: Tensor,
                token_padding_mask: Optional[Tensor] = None,
                *,
                active_cores: int,
                core_rope: Tuple[Tensor, Tensor],
                patch_rope: PatchRope,
                need_weights: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """Args:
            x (Tensor): (B, K + N, C), the K cores first.
            token_padding_mask (Tensor, optional): (B, N) bool, True on padded patches
                (the cores are never padding).
            active_cores (int): K.
            core_rope (tuple[Tensor, Tensor]): (B, K, head_dims) RoPE cosines and sines of
                the cores.
            patch_rope (PatchRope): The patches' RoPE angles (its :meth:`PatchRope.grid`).
            need_weights (bool): Also return the cores' attention weights. Defaults to False.

        Returns:
            Tensor | tuple[Tensor, Tensor]: (B, K + N, C), and with ``need_weights`` the
            (B, num_heads, K, K + N) core attention rows.
        """
        cos, sin = (torch.cat([core, patch], dim=1)
                    for core, patch in zip(core_rope, patch_rope.grid()))
        attn = self.attn(
            self.norm_attn(x),
            token_padding_mask,
            active_cores=active_cores,
            cos=cos,
            sin=sin,
            need_weights=need_weights)
        attn, weights = attn if need_weights else (attn, None)
        x = self._add_mlp(x + attn)
        return (x, weights) if need_weights else x

    def interactions(self, num_patches: int, num_extra_tokens: int) -> int:
        """Query-key pairs per head and image: :meth:`CorePeripheryAttention.interactions`."""
        return self.attn.interactions(num_patches, num_extra_tokens)

    @property
    def stream_passes(self) -> int:
        """int: Passes of :meth:`forward_streamed` over the patch rows: one serves the cores'
        online softmax and the patches' attention to the cores."""
        return 1

    def _add_mlp(self, x: Tensor) -> Tensor:
        """``x + fc2(SwiGLU(fc1(norm_ffn(x))))``: the second half of the block, per token."""
        return x + self.drop(self.fc2(self.drop(self.fc1(self.norm_ffn(x)))))

    def forward_streamed(self, stream: TokenStream, *, active_cores: int,
                         core_rope: Tuple[Tensor, Tensor], patch_rope: PatchRope) -> None:
        """The block over a token stream, band by band, in place (inference only).

        One pass: the cores' queries, keys and values come from the cores (in memory); each
        band of patches attends to the cores' keys and values (its rows of the result) and
        feeds its keys and values into the cores' attention over all tokens, an online
        softmax (:class:`OnlineCoreAttention`) complete after the last band. The result
        equals :meth:`forward` on the whole sequence.

        Args:
            stream (TokenStream): The K cores (its extra tokens) and the patch tokens.
            active_cores (int): K.
            core_rope (tuple[Tensor, Tensor]): (B, K, head_dims) RoPE cosines and sines of
                the cores.
            patch_rope (PatchRope): The patches' RoPE angles, taken band by band (its
                :meth:`PatchRope.rows`).
        """
        attn = self.attn
        cores = stream.extra
        if cores is None or cores.shape[1] != active_cores:
            raise ValueError(f'the stream must hold the {active_cores} cores as its extra tokens')
        q_cores, k_cores, v_cores = attn.project_tokens(self.norm_attn(cores), *core_rope)
        core_attention = OnlineCoreAttention(q_cores)
        core_attention.add(k_cores, v_cores)
        for start, stop in stream.pass_bands():
            tokens = stream.read(start, stop)
            q, k, v = attn.project_tokens(self.norm_attn(tokens), *patch_rope.rows(start, stop))
            core_attention.add(k, v, stream.mask(start, stop))
            patches = tokens + attn.project_out(attn.attend_to_cores(q, k_cores, v_cores))
            stream.write(start, stop, self._add_mlp(patches))
        stream.extra = self._add_mlp(cores + attn.project_out(core_attention.result()))
