"""The protocol every block of a plain backbone follows (InfViT, WeightFormer, VECA)."""
from typing import Optional, Protocol, Tuple, Union, runtime_checkable

from torch import Tensor

from ..streaming.token_stream import TokenStream


@runtime_checkable
class PlainBlock(Protocol):
    """What :class:`~mmlinear.models.backbones.base_plain_backbone.BasePlainBackbone` calls
    on its blocks (:class:`InfViTBlock`, :class:`WeightFormerBlock`, :class:`VECABlock`).

    The named arguments (``**block_inputs``) are each backbone's own, always keyword-only,
    and the same for :meth:`forward` and :meth:`forward_streamed`: ``num_extra_tokens``
    (InfViT), ``hw_shape`` (WeightFormer), ``active_cores``, ``core_rope``, ``patch_rope``
    (VECA). The backbone's one ``_block_inputs`` produces them for both.

    ``isinstance(block, PlainBlock)`` checks that the four members exist; their signatures
    are checked by ``tests/test_models/test_layers/test_block_protocol.py``.
    """

    def forward(self,
                x: Tensor,
                token_padding_mask: Optional[Tensor] = None,
                *,
                need_weights: bool = False,
                **block_inputs) -> Union[Tensor, Tuple[Tensor, Optional[Tensor]]]:
        """Run the block on a batch of token sequences.

        Args:
            x (Tensor): (B, E + N, C) tokens, the E extra tokens (CLS, cores) first.
            token_padding_mask (Tensor, optional): (B, N) bool over the patch tokens, True
                on padded patches. Defaults to None.
            need_weights (bool): Also return the attention weights, None for a block
                without attention (WeightFormer). Defaults to False.
            **block_inputs: The backbone's named arguments.

        Returns:
            Tensor | tuple[Tensor, Tensor | None]: (B, E + N, C), and the weights when
            asked.
        """

    def interactions(self, num_patches: int, num_extra_tokens: int) -> int:
        """Query-key pairs scored per head and image for N patches and E extra tokens."""

    @property
    def stream_passes(self) -> int:
        """int: Passes of :meth:`forward_streamed` over the patch rows (to plan its
        memory and report its progress)."""

    def forward_streamed(self, stream: TokenStream, **block_inputs) -> None:
        """The block over a token stream, band by band, in place (inference only), equal to
        :meth:`forward` on the whole sequence.

        Args:
            stream (TokenStream): The extra tokens and the patch tokens with their padding
                mask.
            **block_inputs: The backbone's named arguments.
        """
