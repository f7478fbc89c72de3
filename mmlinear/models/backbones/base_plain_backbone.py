"""The skeleton that InfViT, WeightFormer and VECA share: a plain (single-stride) token stack."""
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from mmengine.model import BaseModule
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from ..streaming.streamed_backbone import StreamedBackboneMixin
from ..utils import (check_choice, check_frozen_stages, freeze, masked_mean, normalize_indices,
                     patch_grid, pixel_to_token_mask, resolve_arch, resolve_padding_mask,
                     tokens_to_map)

#: Every output format a plain backbone may offer; each backbone lists the ones it has.
OUT_TYPES = ('featmap', 'cls_token', 'avg_featmap', 'raw')
#: The DeiT / timm ViT initialisation of the Linear layers (``BaseModule`` copies it).
TRUNC_NORMAL_INIT = dict(type='TruncNormal', layer='Linear', std=.02, bias=0.)


class TokenGrid(NamedTuple):
    """The embedded input that the blocks run on (what :meth:`_embed` returns).

    Attributes:
        tokens (Tensor): (B, E + N, C), the E extra tokens (CLS, cores) first, then the N
            patch tokens in row-major order.
        hw_shape (tuple[int, int]): The patch grid (H', W'), H' * W' = N.
        num_extra_tokens (int): E.
        token_padding_mask (Tensor | None): (B, N) bool, True on padded patches; None
            without a padding mask.
        block_state (dict): The backbone-specific state the block loop starts from (VECA:
            the cores' coordinates and the patches' RoPE angles); :meth:`_block_inputs`
            derives each block's arguments and the next state from it, never changing it.
    """
    tokens: Tensor
    hw_shape: Tuple[int, int]
    num_extra_tokens: int
    token_padding_mask: Optional[Tensor]
    block_state: Dict[str, Any]


class BlockStep(NamedTuple):
    """What :meth:`BasePlainBackbone._run_blocks` yields after each block.

    Attributes:
        index (int): The block index.
        tokens (Tensor): (B, E + N, C), the block's output (before any final norm).
        grid (TokenGrid): The embedded input (grid shape, masks, extra-token count).
        state (dict): The block state this block ran with (see :meth:`_block_inputs`).
        weights (Tensor | None): The block's attention weights, when asked for.
    """
    index: int
    tokens: Tensor
    grid: TokenGrid
    state: Dict[str, Any]
    weights: Optional[Tensor]


class BasePlainBackbone(StreamedBackboneMixin, BaseModule):
    """A stack of same-width blocks on patch tokens, with OpenMMLab's backbone options.

    The base owns what the three papers' backbones have in common: the preset table
    (``arch_zoo``, mmpretrain style), ``out_indices`` and one output formatter for
    ``out_type``, ``frozen_stages`` with ``train()`` keeping frozen parts in eval mode, the
    block loop (with gradient checkpointing) shared by :meth:`forward` and the attention-map
    methods, the final norm, the padding-mask handling and the input checks. A subclass
    builds its modules (``patch_embed``, ``blocks`` and the final norm through
    :meth:`_add_final_norm`), then calls :meth:`_freeze_stages`, and implements
    :meth:`_embed` and, where its blocks take more than the tokens and the patch mask,
    :meth:`_block_inputs`. Every block is called as ``block(tokens, token_padding_mask,
    **named)`` with the named arguments of :meth:`_block_inputs`.

    Vocabulary: ``padding_mask`` is the (B, H, W) bool pixel mask of the input (True on
    padding, the valid region in the top-left corner, as mmdet / mmseg pad);
    ``token_padding_mask`` is its (B, N) reduction to patch tokens. An image that is all
    padding gives finite features computed from a 1 x 1 valid region (see
    :func:`~mmlinear.models.utils.valid_extents`).

    Args:
        arch (str | dict): A preset of ``arch_zoo`` or a dict with exactly ``arch_keys``.
        patch_size (int): Patch side p.
        out_indices (int | Sequence[int]): Blocks whose outputs are returned; negative
            values count from the end.
        out_type (str): One of the subclass's ``out_types``.
        frozen_stages (int): -1 freezes nothing, 0 the stem, i the stem and the first i
            blocks; all blocks also freeze the final norm (and what follows it).
        with_cp (bool): Gradient checkpointing of each block.
        init_cfg (dict | list[dict], optional): Initialisation config.
    """

    arch_zoo: Dict[str, Dict[str, int]] = {}
    #: The keys a custom ``arch`` dict must have.
    arch_keys: Tuple[str, ...] = ()
    #: The ``out_type`` values this backbone offers.
    out_types: Tuple[str, ...] = OUT_TYPES
    #: The name the final norm is registered under (the released checkpoints' key).
    final_norm_name: str = 'final_norm'
    #: E, the tokens the blocks see before the patches (InfViT's CLS); VECA's cores depend on
    #: the budget of a call, see :meth:`_num_extra_tokens`.
    num_extra_tokens: int = 0

    def __init__(self,
                 arch: Union[str, dict],
                 patch_size: int,
                 out_indices: Union[int, Sequence[int]],
                 out_type: str,
                 frozen_stages: int,
                 with_cp: bool,
                 init_cfg: Optional[Union[dict, List[dict]]] = None) -> None:
        super().__init__(init_cfg=init_cfg)
        self.arch_settings = resolve_arch(arch, self.arch_zoo, self.arch_keys)
        check_choice('out_type', out_type, self.out_types)
        self.embed_dims = self.arch_settings['embed_dims']
        self.num_layers = self.arch_settings['num_layers']
        self.out_type = out_type
        self.patch_size = patch_size
        self.out_indices = normalize_indices('out_indices', out_indices, self.num_layers)
        self.frozen_stages = check_frozen_stages(frozen_stages, self.num_layers)
        self.with_cp = with_cp

    # ----- parts the subclasses provide ---------------------------------------------------

    def _add_final_norm(self, norm: nn.Module) -> None:
        """Register the norm applied after the last block under ``final_norm_name``."""
        self.add_module(self.final_norm_name, norm)

    @property
    def final_norm(self) -> nn.Module:
        """The norm after the last block, whatever name its checkpoint key has."""
        if self.final_norm_name not in self._modules:
            # AttributeError, not KeyError: ``hasattr`` (as ``add_module`` asks) must be False.
            raise AttributeError(f'{type(self).__name__} has no final norm yet')
        return self._modules[self.final_norm_name]

    def _stem_parts(self) -> List[Union[nn.Module, nn.Parameter]]:
        """What ``frozen_stages=0`` freezes: the parts before the first block."""
        raise NotImplementedError

    def _head_parts(self) -> List[nn.Module]:
        """What freezing every block also freezes: the final norm and what follows it."""
        return [self.final_norm]

    def _embed(self, x: Tensor, token_padding_mask: Optional[Tensor], **kwargs) -> TokenGrid:
        """Embed checked images into the tokens the first block takes.

        Args:
            x (Tensor): (B, in_channels, H, W) floating-point images.
            token_padding_mask (Tensor, optional): (B, N) bool, True on padded patches.
            **kwargs: Backbone-specific options of the call (VECA: ``active_cores``).

        Returns:
            TokenGrid: The tokens and what the blocks need besides them.
        """
        raise NotImplementedError

    def _block_inputs(self, index: int, tokens: Tensor, grid: TokenGrid,
                      state: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """The named arguments of block ``index`` besides its tokens and patch mask.

        Args:
            index (int): The block index.
            tokens (Tensor): (B, E + N, C), the block's input.
            grid (TokenGrid): The embedded input.
            state (dict): The block state after the previous block (``grid.block_state``
                for block 0); not changed.

        Returns:
            tuple[dict, dict]: The block's named arguments, and the state it ran with, which
            the next block starts from. Defaults to no arguments and the same state.
        """
        return {}, state

    def _apply_head(self, tokens: Tensor) -> Tensor:
        """Turn the last block's tokens (B, T, C) into the output tokens (the final norm)."""
        return self.final_norm(tokens)

    # ----- the shared skeleton ------------------------------------------------------------

    def _frozen_parts(self) -> List[Union[nn.Module, nn.Parameter]]:
        """What ``frozen_stages`` freezes: the stem, the first ``frozen_stages`` blocks and,
        when that is all of them, the head."""
        parts = self._stem_parts() + list(self.blocks[:self.frozen_stages])
        if self.frozen_stages == self.num_layers:
            parts += self._head_parts()
        return parts

    def _freeze_stages(self) -> None:
        if self.frozen_stages >= 0:
            freeze(self._frozen_parts())

    def train(self, mode: bool = True) -> 'BasePlainBackbone':
        """Set the training mode, keeping frozen stages in eval mode."""
        super().train(mode)
        self._freeze_stages()
        return self

    def _token_padding_mask(self, x: Tensor, padding_mask: Optional[Tensor]) -> Optional[Tensor]:
        """Check the images and the pixel mask; reduce the mask to (B, N) patch tokens."""
        if not x.is_floating_point():
            raise TypeError(f'expected floating-point images (B, C, H, W), normalised as the '
                            f'data preprocessor does, got dtype {x.dtype}')
        padding_mask = resolve_padding_mask(x, padding_mask)
        if padding_mask is None:
            return None
        return pixel_to_token_mask(padding_mask, self.patch_size)

    def _run_blocks(self,
                    x: Tensor,
                    padding_mask: Optional[Tensor],
                    need_weights: bool = False,
                    **embed_kwargs) -> Iterator[BlockStep]:
        """Embed ``x`` and run the blocks, yielding a :class:`BlockStep` after each.

        Args:
            x (Tensor): (B, in_channels, H, W) images.
            padding_mask (Tensor, optional): (B, H, W) bool, True on padded pixels; None
                also looks for a mask attached to ``x`` by the data preprocessor.
            need_weights (bool): Ask every block for its attention weights (no
                checkpointing then). Defaults to False.
            **embed_kwargs: Passed to :meth:`_embed`.
        """
        grid = self._embed(x, self._token_padding_mask(x, padding_mask), **embed_kwargs)
        tokens, state, mask = grid.tokens, grid.block_state, grid.token_padding_mask
        for index, block in enumerate(self.blocks):
            named, state = self._block_inputs(index, tokens, grid, state)
            weights = None
            if need_weights:
                tokens, weights = block(tokens, mask, need_weights=True, **named)
            elif self.with_cp and tokens.requires_grad:
                tokens = checkpoint(block, tokens, mask, use_reentrant=False, **named)
            else:
                tokens = block(tokens, mask, **named)
            yield BlockStep(index, tokens, grid, state, weights)

    def _forward_outputs(self, steps: Iterator[BlockStep]) -> Tuple[Tensor, ...]:
        """Collect the ``out_indices`` outputs of a block loop, the last one through the
        final norm (mmpretrain's ``final_norm=True``)."""
        outs = []
        for step in steps:
            tokens = step.tokens
            if step.index == self.num_layers - 1:
                tokens = self._apply_head(tokens)
            if step.index in self.out_indices:
                outs.append(self._format_output(tokens, step.grid))
        return tuple(outs)

    def _format_output(self, tokens: Tensor, grid: TokenGrid) -> Tensor:
        """Shape one block's tokens (B, E + N, C) as ``out_type`` asks.

        Returns:
            Tensor: (B, C, H', W') for 'featmap'; (B, C) for 'cls_token' (the first extra
            token) and 'avg_featmap' (the mean of the valid patch tokens); (B, E + N, C)
            for 'raw'.
        """
        if self.out_type == 'raw':
            return tokens
        if self.out_type == 'cls_token':
            return tokens[:, 0]
        patch_tokens = tokens[:, grid.num_extra_tokens:]
        if self.out_type == 'featmap':
            return tokens_to_map(patch_tokens, grid.hw_shape)
        return masked_mean(patch_tokens, grid.token_padding_mask)

    def forward(self, x: Tensor, padding_mask: Optional[Tensor] = None) -> Tuple[Tensor, ...]:
        """Features for OpenMMLab necks and heads.

        Args:
            x (Tensor): (B, in_channels, H, W) floating-point images, any H, W >=
                ``patch_size``.
            padding_mask (Tensor, optional): (B, H, W) bool, True on padded pixels, the
                valid region in the top-left corner (as mmdet / mmseg pad). Defaults to None:
                the mask attached to ``x`` by the mmlinear data preprocessors, if any; without
                one the reference behaviour is kept.

        Returns:
            tuple[Tensor, ...]: One entry per ``out_indices``, shaped by ``out_type`` (see
            :meth:`_format_output`), with H' = ceil(H / p) and W' = ceil(W / p).
        """
        return self._forward_outputs(self._run_blocks(x, padding_mask))

    def attention_interactions(self, image_shape: Sequence[int], **call_kwargs) -> List[int]:
        """Query-key pairs that each block scores per head and image, the quadratic term
        the linear backbones avoid (a dense ViT scores ``(E + N)^2``).

        Args:
            image_shape (Sequence[int]): (B, C_in, H, W) of the input.
            **call_kwargs: Arguments of :meth:`forward` that change the token count
                (VECA's ``active_cores``).

        Returns:
            list[int]: One count per block.
        """
        hw_shape = self.grid_shape(image_shape)
        num_patches = hw_shape[0] * hw_shape[1]
        num_extra_tokens = self._num_extra_tokens(**call_kwargs)
        return [block.interactions(num_patches, num_extra_tokens) for block in self.blocks]

    def _num_extra_tokens(self) -> int:
        """E for one call (the class attribute unless a call argument changes it)."""
        return self.num_extra_tokens

    def grid_shape(self, image_shape: Sequence[int]) -> Tuple[int, int]:
        """The token grid of images of a shape.

        Args:
            image_shape (Sequence[int]): (B, C_in, H, W).

        Returns:
            tuple[int, int]: (H', W') = (ceil(H / p), ceil(W / p)): partial patches count.
        """
        return patch_grid(self, image_shape[2:])
