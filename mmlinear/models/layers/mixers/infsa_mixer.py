"""What the two InfSA mixers share: the decay rho, eps and attention dropout."""
from .token_mixer import TokenMixer


class InfSAMixer(TokenMixer):
    """The base of Pure and Linear InfSA: attention whose weights sum to the learnable decay
    rho (given by the layer, see :attr:`TokenMixer.takes_rho`) instead of 1.

    ``forward`` takes ``rho`` as a keyword after the :class:`TokenMixer` arguments: a
    scalar, (1,) or (H,) tensor.

    Args:
        head_dims (int): d, the width of a head.
        attn_drop (float): Dropout on the attention weights in training. Defaults to 0.
        eps (float): Stabiliser of the normalisations. Defaults to 1e-6.
    """

    takes_rho = True

    def __init__(self, head_dims: int, attn_drop: float = 0., eps: float = 1e-6) -> None:
        super().__init__(head_dims)
        self.attn_drop = attn_drop
        self.eps = eps

    def explicit(self, need_weights: bool) -> bool:
        """Whether the weights must be formed: they are asked for (maps), or dropped out
        (training with attention dropout); otherwise the ops compute the output without
        them."""
        return need_weights or (self.training and self.attn_drop > 0)
