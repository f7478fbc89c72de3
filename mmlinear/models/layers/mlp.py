"""The two-layer feed-forward network of a transformer block."""
from torch import Tensor, nn


class Mlp(nn.Module):
    """Linear -> GELU -> dropout -> Linear -> dropout.

    Args:
        embed_dims (int): Input and output width C.
        hidden_dims (int): Hidden width.
        drop (float): Dropout after the activation and after the output. Defaults to 0.
    """

    def __init__(self, embed_dims: int, hidden_dims: int, drop: float = 0.) -> None:
        super().__init__()
        self.fc1 = nn.Linear(embed_dims, hidden_dims)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden_dims, embed_dims)
        self.drop = nn.Dropout(drop)

    def forward(self, x: Tensor) -> Tensor:
        """x (Tensor): (..., C) -> (..., C)."""
        return self.drop(self.fc2(self.drop(self.act(self.fc1(x)))))
