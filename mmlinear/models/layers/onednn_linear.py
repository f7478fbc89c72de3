"""``nn.Linear`` whose inference forward on the CPU runs oneDNN's fused matmul."""
from torch import Tensor, nn

from mmlinear.ops import onednn_linear


class OneDNNLinear(nn.Linear):
    """An ``nn.Linear`` (same parameters, state dict keys and initialisation) that computes
    through :func:`mmlinear.ops.onednn_linear`: oneDNN with the bias fused where no gradient
    is needed on the CPU, ``F.linear`` otherwise.

    Args: as ``nn.Linear``.
    """

    def forward(self, x: Tensor) -> Tensor:
        """x (Tensor): (..., in_features) -> (..., out_features)."""
        return onednn_linear(x, self.weight, self.bias)
