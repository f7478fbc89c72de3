"""The VECA block: pre-norm core-periphery attention and a SwiGLU MLP."""
from typing import Optional, Tuple, Union

from torch import Tensor, nn

from .core_periphery_attention import CorePeripheryAttention
from .onednn_linear import OneDNNLinear
from .swiglu import SwiGLU


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
        self.fc1 = OneDNNLinear(embed_dims, 2 * feedforward_channels)
        self.act = SwiGLU()
        self.fc2 = OneDNNLinear(feedforward_channels, embed_dims)
        self.drop = nn.Dropout(dropout)

    def forward(self,
                x: Tensor,
                token_padding_mask: Optional[Tensor] = None,
                *,
                num_cores: int,
                cos: Tensor,
                sin: Tensor,
                need_weights: bool = False) -> Union[Tensor, Tuple[Tensor, Tensor]]:
        """Args:
            x (Tensor): (B, K + N, C), the K cores first.
            token_padding_mask (Tensor, optional): (B, N) bool, True on padded patches
                (the cores are never padding).
            num_cores (int): K.
            cos (Tensor): (B, K + N, head_dims) RoPE cosines.
            sin (Tensor): (B, K + N, head_dims) RoPE sines.
            need_weights (bool): Also return the cores' attention weights. Defaults to False.

        Returns:
            Tensor | tuple[Tensor, Tensor]: (B, K + N, C), and with ``need_weights`` the
            (B, num_heads, K, K + N) core attention rows.
        """
        attn = self.attn(
            self.norm_attn(x),
            token_padding_mask,
            num_cores=num_cores,
            cos=cos,
            sin=sin,
            need_weights=need_weights)
        attn, weights = attn if need_weights else (attn, None)
        x = x + attn
        x = x + self.drop(self.fc2(self.drop(self.act(self.fc1(self.norm_ffn(x))))))
        return (x, weights) if need_weights else x
