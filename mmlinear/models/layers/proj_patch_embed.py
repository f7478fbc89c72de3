"""PatchEmbed with its convolution named ``proj``, as timm and released checkpoints name it."""
from torch import nn

from .patch_embed import PatchEmbed


class ProjPatchEmbed(PatchEmbed):
    """:class:`PatchEmbed` whose convolution is registered as ``proj`` (timm's
    ``patch_embed.proj``), so checkpoints in that layout load without renaming.

    Args: as :class:`PatchEmbed`.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.proj = self._modules.pop('projection')

    @property
    def projection(self) -> nn.Conv2d:
        """The convolution, under the name :class:`PatchEmbed` uses."""
        return self.proj
