"""The skeleton that InfViT, WeightFormer and VECA share: a plain (single-stride) token stack."""
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F
from mmengine.model import BaseModule
from torch import Tensor, nn
from torch.utils.checkpoint import checkpoint

from ..utils import (autocast_dtype, check_choice, check_frozen_stages, freeze, masked_mean,
                     normalize_indices, patch_grid, pixel_to_token_mask, resolve_arch,
                     resolve_padding_mask, tokens_to_map)
from ..utils.band_progress import BandProgress
from ..utils.image_rows import ImageRows
from ..utils.stream_memory import GB, BandWorkspace, StreamedMemory
from ..utils.token_stream import BUFFERS, TokenStream, allocate_buffer, check_chunk_rows, row_bands

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


class BasePlainBackbone(BaseModule):
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
            **kwargs: Backbone-specific options of the call (VECA: ``num_cores``).

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

    # ----- streamed inference -------------------------------------------------------------

    #: Bands of the token grid start on multiples of this (WeightFormer's 2 x 2 pooling: 2).
    stream_row_alignment: int = 1

    #: The band height :meth:`forward_streamed` picks without ``chunk_rows`` and
    #: ``mem_limit_gb``: the tallest whose band pass holds at most this many bytes.
    default_band_bytes: int = 2**28

    def _stream_workspace_per_token(self) -> BandWorkspace:
        """What the widest moment of a band pass holds per band token (the activations of its
        MLP, the largest layer of every block), for the memory model."""
        raise NotImplementedError(f'{type(self).__name__} does not stream')

    def _stream_output_dims(self, index: int) -> int:
        """The width of block ``index``'s output as :meth:`forward_streamed` returns it."""
        return self.embed_dims

    def predict_streamed_memory(self,
                                image_shape: Sequence[int],
                                *,
                                chunk_rows: int,
                                buffer: str = 'memory',
                                input_in_memory: bool = True,
                                input_dtype: Optional[torch.dtype] = None,
                                compute_dtype: Optional[torch.dtype] = None) -> StreamedMemory:
        """The peak memory of :meth:`forward_streamed` beyond the weights, before anything is
        allocated.

        The stream and the dense outputs hold B * N * C values each; a band pass holds
        :meth:`_stream_workspace_per_token` values per band token, the part that autocast
        computes in its dtype, and two copies of the band's pixels in the weights' dtype
        (read, then padded; then the padded band and the patches the patch embedding gathers
        from it, in autocast's dtype where that is on). Summaries, and the fixed-size blocks
        a matrix product packs its operands into, are not counted.

        Args:
            image_shape (Sequence[int]): (B, C_in, H, W).
            chunk_rows (int): Patch rows per band (aligned as :meth:`forward_streamed`
                aligns them).
            buffer (str): 'memory' or 'disk' (mapped files: not counted). Defaults to
                'memory'.
            input_in_memory (bool): Count the image (a tensor) rather than reading it by rows
                from an array. Defaults to True.
            input_dtype (torch.dtype, optional): The image's dtype. Defaults to the weights'.
            compute_dtype (torch.dtype, optional): The dtype of autocast's low-precision ops
                (e.g. ``torch.bfloat16``). Defaults to None: for float32 weights autocast's
                dtype on their device where it is on in the calling context (as
                :meth:`forward_streamed` runs under it), else the weights' dtype.

        Returns:
            StreamedMemory: The parts of the peak and their total.
        """
        check_choice('buffer', buffer, BUFFERS)
        B, in_channels, H, W = image_shape
        p = self.patch_size
        grid_h, grid_w = self._grid_shape(image_shape)
        weight = self.patch_embed.projection.weight
        if compute_dtype is None:
            # Autocast narrows float32 only (float64 stays float64).
            narrowed = autocast_dtype(weight.device.type) if weight.dtype == torch.float32 else None
            compute_dtype = narrowed or weight.dtype
        itemsize = weight.element_size()
        input_itemsize = torch.empty((), dtype=input_dtype or weight.dtype).element_size()
        compute_itemsize = torch.empty((), dtype=compute_dtype).element_size()
        band = row_bands(grid_h, chunk_rows, self.stream_row_alignment)[0]
        band_tokens = B * (band[1] - band[0]) * grid_w
        # The rows read and their padded copy; then that copy and the gathered patches.
        pixels = 2 * in_channels * p * p
        tokens = B * grid_h * grid_w
        # The extra tokens of 'raw' (at most 64 per image) are not counted.
        dense = tokens if self.out_type in ('featmap', 'raw') else 0
        on_heap = buffer == 'memory'
        return StreamedMemory(
            input_bytes=B * in_channels * H * W * input_itemsize if input_in_memory else 0,
            stream_bytes=tokens * self.embed_dims * itemsize if on_heap else 0,
            output_bytes=sum(dense * self._stream_output_dims(i) * itemsize
                             for i in self.out_indices) if on_heap else 0,
            band_bytes=band_tokens *
            (self._stream_workspace_per_token().bytes_per_token(itemsize, compute_itemsize) +
             pixels * itemsize),
            chunk_rows=band[1] - band[0])

    def pick_chunk_rows(self,
                        image_shape: Sequence[int],
                        chunk_rows: Optional[int] = None,
                        mem_limit_gb: Optional[float] = None,
                        buffer: str = 'memory',
                        input_in_memory: bool = True,
                        compute_dtype: Optional[torch.dtype] = None) -> int:
        """The band height :meth:`forward_streamed` runs with.

        Args:
            image_shape (Sequence[int]): (B, C_in, H, W).
            chunk_rows (int, optional): The height asked for, taken as it is without a limit.
            mem_limit_gb (float, optional): Take the tallest band (at most ``chunk_rows``)
                whose predicted peak fits; refuse (ValueError, with the predicted figure)
                when none does.
            buffer (str): As :meth:`predict_streamed_memory`. Defaults to 'memory'.
            input_in_memory (bool): As :meth:`predict_streamed_memory`. Defaults to True.
            compute_dtype (torch.dtype, optional): As :meth:`predict_streamed_memory`.
                Defaults to None (the calling context's autocast).

        Returns:
            int: Patch rows per band; without ``chunk_rows`` and ``mem_limit_gb``, the tallest
            band whose pass holds at most :attr:`default_band_bytes`.
        """
        if chunk_rows is not None and mem_limit_gb is None:
            return chunk_rows
        grid_h = self._grid_shape(image_shape)[0]
        tallest = grid_h if chunk_rows is None else row_bands(grid_h, chunk_rows)[0][1]

        def fits(memory: StreamedMemory) -> bool:
            if mem_limit_gb is None:
                return memory.band_bytes <= self.default_band_bytes
            return memory.total_bytes <= mem_limit_gb * GB

        def memory_at(rows: int) -> StreamedMemory:
            return self.predict_streamed_memory(
                image_shape,
                chunk_rows=rows,
                buffer=buffer,
                input_in_memory=input_in_memory,
                compute_dtype=compute_dtype)

        smallest = self.stream_row_alignment
        needed = memory_at(smallest)
        if not fits(needed):
            if mem_limit_gb is None:
                return smallest
            raise ValueError(f'forward_streamed needs {needed.describe()}, limit '
                             f"{mem_limit_gb:g} GB: raise mem_limit_gb, or use buffer='disk' "
                             f'or an image read by rows from a file')
        low, high = smallest, max(tallest, smallest)  # fits(low) holds; find the tallest
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if fits(memory_at(middle)) else (low, middle - 1)
        return low

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
        hw_shape = self._grid_shape(image_shape)
        num_patches = hw_shape[0] * hw_shape[1]
        num_extra_tokens = self._num_extra_tokens(**call_kwargs)
        return [block.interactions(num_patches, num_extra_tokens) for block in self.blocks]

    def _num_extra_tokens(self) -> int:
        """E for one call (the class attribute unless a call argument changes it)."""
        return self.num_extra_tokens

    def _grid_shape(self, image_shape: Sequence[int]) -> Tuple[int, int]:
        """(H', W'), the token grid of (B, C_in, H, W) images (partial patches count)."""
        return patch_grid(self, image_shape[2:])

    def _check_streamable(self) -> None:
        """Raise a ValueError naming what streams when this configuration cannot."""

    def _stream_embed(self, image: ImageRows, stream: TokenStream, **kwargs) -> Dict[str, Any]:
        """Embed the image band by band into ``stream`` (the extra tokens too).

        Returns:
            dict: The block state the streamed block loop starts from.
        """
        raise NotImplementedError(f'{type(self).__name__} does not stream')

    def _stream_block_inputs(self, index: int, stream: TokenStream,
                             state: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """The named arguments of block ``index``'s ``forward_streamed`` and the next state
        (the streamed counterpart of :meth:`_block_inputs`). Defaults to none."""
        return {}, state

    def _embed_band_pixels(self, image: ImageRows, start: int, stop: int) -> Tensor:
        """Pixel rows of grid rows [start, stop), zero-padded to whole patches at the right
        and, in the last band, at the bottom, as the patch embedding pads the whole image
        (it then gathers its patches without padding a second copy).

        Returns:
            Tensor: (B, C_in, (stop - start) * p, W' * p) in the weights' dtype and device.
        """
        weight = self.patch_embed.projection.weight
        p = self.patch_size
        pixels = image.read(start * p, min(stop * p, image.shape[2]), weight.device, weight.dtype)
        return F.pad(pixels, (0, -pixels.shape[3] % p, 0, (stop - start) * p - pixels.shape[2]))

    def _streamed_output(self, stream: TokenStream, last: bool) -> Tensor:
        """One ``out_indices`` output from the stream, as :meth:`_format_output` shapes it,
        dense ones written band by band into a buffer of the stream's kind."""
        extra = self._apply_head(stream.extra) if last and stream.extra is not None else \
            stream.extra
        if self.out_type == 'cls_token':
            return extra[:, 0]
        B, E = stream.patches.shape[0], stream.num_extra_tokens
        H, W = stream.hw_shape
        out, total = None, None
        for start, stop in stream.bands:
            tokens = stream.read(start, stop)
            if last:
                tokens = self._apply_head(tokens)
            if self.out_type == 'avg_featmap':
                mask = stream.mask(start, stop)
                acc = tokens.to(torch.promote_types(tokens.dtype, torch.float32))
                if mask is not None:
                    acc = acc.masked_fill(mask[..., None], 0)
                total = acc.sum(1) if total is None else total + acc.sum(1)
                continue
            if out is None:
                shape = (B, tokens.shape[-1], H, W) if self.out_type == 'featmap' else \
                    (B, E + H * W, tokens.shape[-1])
                out = allocate_buffer(shape, tokens.dtype, stream.buffer, stream.buffer_dir)
            if self.out_type == 'featmap':
                out[:, :, start:stop] = tokens_to_map(tokens, (stop - start, W))
            else:
                out[:, E + start * W:E + stop * W] = tokens
        if self.out_type == 'raw':
            if E:
                out[:, :E] = extra
            return out
        if self.out_type == 'featmap':
            return out
        count = H * W if stream.token_padding_mask is None else \
            (~stream.token_padding_mask).sum(1, keepdim=True).clamp(min=1)
        return (total / count).to(stream.dtype)

    def forward_streamed(self,
                         x: Any,
                         padding_mask: Optional[Tensor] = None,
                         *,
                         chunk_rows: Optional[int] = None,
                         mem_limit_gb: Optional[float] = None,
                         buffer: str = 'memory',
                         buffer_dir: Optional[str] = None,
                         progress: Optional[bool] = None,
                         **kwargs) -> Tuple[Tensor, ...]:
        """What :meth:`forward` returns, computed over bands of patch rows (inference).

        Every block meets the whole image only through a summary of fixed size, so each runs
        as a few passes over the image in bands (see docs/design.md, "Streamed inference"):
        memory holds the residual stream (in memory or in a mapped file), the outputs and a
        few bands, never the block's full activations.

        Args:
            x (Tensor | array-like): (B, in_channels, H, W) floating-point images: a tensor,
                or any array that slices by rows (a numpy memmap, a zarr array), read a band
                at a time.
            padding_mask (Tensor, optional): (B, H, W) bool, True on padded pixels, as
                :meth:`forward` takes it. Defaults to None (or the mask attached to ``x``).
            chunk_rows (int, optional): Patch rows per band, >= 1; taller than the grid means
                one band. A backbone may round it to its alignment
                (:attr:`stream_row_alignment`); the result does not depend on it. Defaults to
                None: the tallest band that ``mem_limit_gb`` allows, or without a limit the
                tallest whose band pass holds at most :attr:`default_band_bytes`.
            mem_limit_gb (float, optional): Pick the tallest band (at most ``chunk_rows``)
                whose predicted peak (:meth:`predict_streamed_memory`) fits; a limit that no
                band meets is refused before any work, with the predicted figure. Defaults
                to None.
            buffer (str): Where the residual stream and the dense outputs live: 'memory', or
                'disk' (memory-mapped files, anonymous, so nothing is left behind).
                Defaults to 'memory'.
            buffer_dir (str, optional): The folder of 'disk' buffers. Defaults to the
                system's temporary folder.
            progress (bool, optional): Show a progress bar; None shows one once the run has
                taken a few seconds. Defaults to None.
            **kwargs: Backbone-specific options of :meth:`forward` (VECA: ``active_cores``).

        Returns:
            tuple[Tensor, ...]: As :meth:`forward`; dense outputs ('featmap', 'raw') are CPU
            tensors (mapped from disk with ``buffer='disk'``).
        """
        if self.training:
            raise RuntimeError('forward_streamed is inference only: call .eval() first (in '
                               'training mode dropout and augmentations draw per call)')
        check_choice('buffer', buffer, BUFFERS)
        self._check_streamable()
        image = ImageRows(x, self.patch_embed.in_channels)
        B, _, H, W = image.shape
        p = self.patch_size
        if H < p or W < p:
            raise ValueError(f'images must be at least one patch ({p}x{p}) large, got {H}x{W}')
        if chunk_rows is not None:
            check_chunk_rows(chunk_rows)
        chunk_rows = self.pick_chunk_rows(image.shape, chunk_rows, mem_limit_gb, buffer,
                                          isinstance(x, Tensor))
        weight = self.patch_embed.projection.weight
        padding_mask = resolve_padding_mask(x, padding_mask)
        token_padding_mask = None
        if padding_mask is not None:
            token_padding_mask = pixel_to_token_mask(padding_mask, p).to(weight.device)
        grid_shape = self._grid_shape(image.shape)
        # The bar counts patch rows: the embedding's pass, then every pass of every block.
        passes = 1 + sum(block.stream_passes for block in self.blocks)
        outs = []
        with torch.no_grad(), BandProgress(
                passes * grid_shape[0], progress, label='streamed forward, patch rows') as bar:
            stream = TokenStream(
                B,
                grid_shape,
                self.embed_dims,
                weight.dtype,
                weight.device,
                token_padding_mask,
                chunk_rows,
                self.stream_row_alignment,
                buffer,
                buffer_dir,
                on_rows=bar.advance)
            bar.describe('embedding')
            state = self._stream_embed(image, stream, **kwargs)
            for index, block in enumerate(self.blocks):
                bar.describe(f'block {index + 1}/{self.num_layers}')
                named, state = self._stream_block_inputs(index, stream, state)
                block.forward_streamed(stream, **named)
                if index in self.out_indices:
                    outs.append(self._streamed_output(stream, index == self.num_layers - 1))
        return tuple(outs)
