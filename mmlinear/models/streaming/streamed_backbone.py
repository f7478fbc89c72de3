"""The streamed forward of a plain backbone: every block over bands of patch rows, and the
memory model that picks the band height before any work."""
from typing import Any, Dict, NamedTuple, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from mmlinear.utils.deprecation import renamed_arguments
from ..utils import autocast_dtype, check_choice, pixel_to_token_mask, resolve_padding_mask
from .band_progress import BandProgress
from .image_rows import ImageRows
from .memory_model import DEFAULT_BAND_BYTES, GB, BandWorkspace, StreamedMemory, tallest_fitting
from .token_output import format_output
from .token_stream import BUFFERS, TokenStream, check_band_rows, row_bands


class EmbedSetup(NamedTuple):
    """What a backbone's embedding needs for one forward besides the patches' projection
    (what ``_embed_setup`` returns), the same for the whole and the streamed forward.

    Attributes:
        extra (Tensor | None): (B, E, C) the embedded extra tokens (CLS, cores), or None.
        block_state (dict): The state the block loop starts from (VECA: the cores'
            coordinates and the patches' RoPE angles).
        context (Any): What ``_embed_rows`` reads (InfViT: the position rows), or None.
    """
    extra: Optional[Tensor]
    block_state: Dict[str, Any]
    context: Any


class StreamedBackboneMixin:
    """Streamed inference for :class:`~mmlinear.models.backbones.BasePlainBackbone`.

    The skeleton's blocks, embedding and head run here over a :class:`TokenStream` instead of
    one tensor (docs/design.md, "Streamed inference"), through the hooks the whole forward
    uses too (``_embed_setup``, ``_embed_rows``, ``_block_inputs``, ``_apply_head``) and the
    one output formatter. The mixin reads what the skeleton defines (``patch_embed``,
    ``blocks``, ``embed_dims``, ``patch_size``, ``out_type``, ``out_indices``,
    ``num_layers``, :meth:`grid_shape`); a backbone that streams implements
    :meth:`_stream_workspace_per_token` for the memory model.
    """

    #: Bands of the token grid start on multiples of this (WeightFormer's 2 x 2 pooling: 2).
    stream_row_alignment: int = 1

    #: The band height :meth:`forward_streamed` picks without ``band_rows`` and
    #: ``mem_limit_gb``: the tallest whose band pass holds at most this many bytes.
    default_band_bytes: int = DEFAULT_BAND_BYTES

    def _stream_workspace_per_token(self) -> BandWorkspace:
        """What the widest moment of a band pass holds per band token (the activations of its
        MLP, the largest layer of every block), for the memory model."""
        raise NotImplementedError(f'{type(self).__name__} does not stream')

    def _stream_halo_rows(self, grid_rows: int) -> int:
        """Rows a band pass holds besides its band's own, each with the workspace of its
        tokens (InfViT's context window: the rows its windows reach); 0 by default.

        Args:
            grid_rows (int): H', the rows of the token grid.
        """
        return 0

    def _stream_output_dims(self, index: int) -> int:
        """The width of block ``index``'s output as :meth:`forward_streamed` returns it."""
        return self.embed_dims

    @renamed_arguments(chunk_rows='band_rows')
    def predict_streamed_memory(self,
                                image_shape: Sequence[int],
                                *,
                                band_rows: int,
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
            band_rows (int): Patch rows per band (aligned as :meth:`forward_streamed`
                aligns them; deprecated spelling ``chunk_rows``).
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
        grid_h, grid_w = self.grid_shape(image_shape)
        weight = self.patch_embed.projection.weight
        if compute_dtype is None:
            # Autocast narrows float32 only (float64 stays float64).
            narrowed = autocast_dtype(weight.device.type) if weight.dtype == torch.float32 else None
            compute_dtype = narrowed or weight.dtype
        itemsize = weight.element_size()
        input_itemsize = torch.empty((), dtype=input_dtype or weight.dtype).element_size()
        compute_itemsize = torch.empty((), dtype=compute_dtype).element_size()
        band = row_bands(grid_h, band_rows, self.stream_row_alignment)[0]
        band_tokens = B * (band[1] - band[0]) * grid_w
        halo_tokens = B * min(self._stream_halo_rows(grid_h), grid_h - (band[1] - band[0])) * grid_w
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
            band_bytes=(band_tokens + halo_tokens) *
            self._stream_workspace_per_token().bytes_per_token(itemsize, compute_itemsize) +
            band_tokens * pixels * itemsize,
            band_rows=band[1] - band[0])

    def pick_band_rows(self,
                       image_shape: Sequence[int],
                       band_rows: Optional[int] = None,
                       mem_limit_gb: Optional[float] = None,
                       buffer: str = 'memory',
                       input_in_memory: bool = True,
                       compute_dtype: Optional[torch.dtype] = None) -> int:
        """The band height :meth:`forward_streamed` runs with.

        Args:
            image_shape (Sequence[int]): (B, C_in, H, W).
            band_rows (int, optional): The height asked for, taken as it is without a limit.
            mem_limit_gb (float, optional): Take the tallest band (at most ``band_rows``)
                whose predicted peak fits; refuse (ValueError, with the predicted figure)
                when none does.
            buffer (str): As :meth:`predict_streamed_memory`. Defaults to 'memory'.
            input_in_memory (bool): As :meth:`predict_streamed_memory`. Defaults to True.
            compute_dtype (torch.dtype, optional): As :meth:`predict_streamed_memory`.
                Defaults to None (the calling context's autocast).

        Returns:
            int: Patch rows per band; without ``band_rows`` and ``mem_limit_gb``, the tallest
            band whose pass holds at most :attr:`default_band_bytes`.
        """
        if band_rows is not None and mem_limit_gb is None:
            return band_rows
        grid_h = self.grid_shape(image_shape)[0]
        tallest = grid_h if band_rows is None else row_bands(grid_h, band_rows)[0][1]

        def fits(memory: StreamedMemory) -> bool:
            if mem_limit_gb is None:
                return memory.band_bytes <= self.default_band_bytes
            return memory.total_bytes <= mem_limit_gb * GB

        def memory_at(rows: int) -> StreamedMemory:
            return self.predict_streamed_memory(
                image_shape,
                band_rows=rows,
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
        return tallest_fitting(smallest, tallest, lambda rows: fits(memory_at(rows)))

    def _check_streamable(self) -> None:
        """Raise a ValueError naming what streams when this configuration cannot."""

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
        """One ``out_indices`` output from the stream (the last block's through the head),
        dense ones written band by band into a buffer of the stream's kind."""
        head = self._apply_head if last else (lambda tokens: tokens)
        extra = None if stream.extra is None else head(stream.extra)
        bands = ((rows, head(stream.read(*rows))) for rows in stream.bands)
        return format_output(self.out_type, extra, bands, stream.hw_shape,
                             stream.token_padding_mask, stream.buffer, stream.buffer_dir)

    @renamed_arguments(chunk_rows='band_rows')
    def forward_streamed(self,
                         x: Any,
                         padding_mask: Optional[Tensor] = None,
                         *,
                         band_rows: Optional[int] = None,
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
            band_rows (int, optional): Patch rows per band, >= 1 (deprecated spelling
                ``chunk_rows``); taller than the grid means one band. A backbone may round it
                to its alignment (:attr:`stream_row_alignment`); the result does not depend on
                it. Defaults to None: the tallest band that ``mem_limit_gb`` allows, or without
                a limit the tallest whose band pass holds at most :attr:`default_band_bytes`.
            mem_limit_gb (float, optional): Pick the tallest band (at most ``band_rows``)
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
        if band_rows is not None:
            check_band_rows(band_rows)
        band_rows = self.pick_band_rows(image.shape, band_rows, mem_limit_gb, buffer,
                                        isinstance(x, Tensor))
        weight = self.patch_embed.projection.weight
        padding_mask = resolve_padding_mask(x, padding_mask)
        token_padding_mask = None
        if padding_mask is not None:
            token_padding_mask = pixel_to_token_mask(padding_mask, p).to(weight.device)
        grid_shape = self.grid_shape(image.shape)
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
                band_rows,
                self.stream_row_alignment,
                buffer,
                buffer_dir,
                on_rows=bar.advance)
            bar.describe('embedding')
            setup = self._embed_setup(B, grid_shape, token_padding_mask, weight.device, False,
                                      **kwargs)
            for start, stop in stream.pass_bands():
                tokens, _ = self.patch_embed.project(self._embed_band_pixels(image, start, stop))
                stream.write(start, stop, self._embed_rows(tokens, (start, stop), setup))
            stream.extra, state = setup.extra, setup.block_state
            for index, block in enumerate(self.blocks):
                bar.describe(f'block {index + 1}/{self.num_layers}')
                named, state = self._block_inputs(index, stream.extra, stream.hw_shape, state)
                block.forward_streamed(stream, **named)
                if index in self.out_indices:
                    outs.append(self._streamed_output(stream, index == self.num_layers - 1))
        return tuple(outs)
