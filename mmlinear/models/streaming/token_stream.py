"""The residual stream of a streamed backbone forward, held in memory or in a mapped file and
visited in bands of token-grid rows."""
import tempfile
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

#: Where a streamed forward keeps its residual stream and dense outputs.
BUFFERS = ('memory', 'disk')

# numpy has no bfloat16: a bfloat16 buffer is mapped as int16 and viewed as bfloat16.
_NUMPY_STORAGE = {torch.bfloat16: (np.int16, torch.int16)}


def allocate_buffer(shape: Sequence[int],
                    dtype: torch.dtype,
                    buffer: str = 'memory',
                    buffer_dir: Optional[str] = None) -> Tensor:
    """An uninitialised CPU tensor in memory, or backed by a memory-mapped file.

    The file of a ``'disk'`` buffer is anonymous (created already unlinked), so it leaves
    nothing behind whatever happens to the caller; its pages live as long as the tensor.

    Args:
        shape (Sequence[int]): The tensor's shape.
        dtype (torch.dtype): Its dtype.
        buffer (str): 'memory' or 'disk'. Defaults to 'memory'.
        buffer_dir (str, optional): The folder of a 'disk' buffer's file. Defaults to None
            (the system's temporary folder).

    Returns:
        Tensor: ``shape``, ``dtype``, on the CPU.
    """
    if buffer not in BUFFERS:
        raise ValueError(f'unknown buffer {buffer!r}; allowed: {", ".join(map(repr, BUFFERS))}')
    if buffer == 'memory':
        return torch.empty(tuple(shape), dtype=dtype)
    np_dtype, view_dtype = _NUMPY_STORAGE.get(dtype, (None, None))
    if np_dtype is None:
        np_dtype = torch.empty((), dtype=dtype).numpy().dtype
    with tempfile.TemporaryFile(dir=buffer_dir) as handle:
        # The mapping keeps the file's pages after the handle is closed.
        array = np.memmap(handle, dtype=np_dtype, mode='w+', shape=tuple(shape))
    tensor = torch.from_numpy(array)
    return tensor.view(dtype) if view_dtype is not None else tensor


def check_band_rows(band_rows: int) -> None:
    """Raise a ValueError unless ``band_rows`` (patch rows per band) is an integer >= 1."""
    if isinstance(band_rows, bool) or not isinstance(band_rows, int) or band_rows < 1:
        raise ValueError(f'band_rows must be an integer >= 1 (patch rows per band), got '
                         f'{band_rows!r}')


def check_head_rows(head_rows: int) -> None:
    """Raise a ValueError unless ``head_rows`` (rows of a head's level per band, after the
    backbone has streamed) is an integer >= 1."""
    if isinstance(head_rows, bool) or not isinstance(head_rows, int) or head_rows < 1:
        raise ValueError(f"head_rows must be an integer >= 1 (rows of the head's level per "
                         f'band), got {head_rows!r}')


def row_bands(num_rows: int, band_rows: int, align: int = 1) -> List[Tuple[int, int]]:
    """Split the rows [0, num_rows) into consecutive bands.

    Args:
        num_rows (int): Rows of the token grid.
        band_rows (int): The band height asked for, >= 1; taller than the grid means one
            band.
        align (int): Every band but the last starts and ends on a multiple of ``align``
            (WeightFormer's 2 x 2 pooling needs even rows): the height is rounded down to a
            multiple of it, and up to ``align`` where it is smaller. Defaults to 1.

    Returns:
        list[tuple[int, int]]: (start, stop) of each band, covering every row once.
    """
    check_band_rows(band_rows)
    height = max(align, band_rows // align * align)
    return [(start, min(start + height, num_rows)) for start in range(0, num_rows, height)]


def band_tokens(hw_shape: Tuple[int, int], rows: Tuple[int, int]) -> slice:
    """The patch tokens of a band of grid rows in a row-major (H', W') token grid.

    Args:
        hw_shape (tuple[int, int]): The token grid (H', W').
        rows (tuple[int, int]): (start, stop), the band's grid rows [start, stop) (all W'
            columns), with 0 <= start < stop <= H'.

    Returns:
        slice: ``slice(start * W', stop * W')`` over the N = H' * W' patch tokens.
    """
    (num_rows, num_cols), (start, stop) = hw_shape, rows
    if not 0 <= start < stop <= num_rows:
        raise ValueError(f'grid rows [{start}, {stop}) lie outside the {num_rows} rows of the '
                         f'token grid or hold none: a band needs 0 <= start < stop <= '
                         f'{num_rows}')
    return slice(start * num_cols, stop * num_cols)


class TokenStream:
    """The tokens between the blocks of a streamed forward.

    The E extra tokens (CLS, cores) are small and stay in memory on the compute device; the
    N patch tokens (row-major on the (H', W') grid) live in a CPU buffer (see
    :func:`allocate_buffer`) and are read and written by bands of grid rows, so a block
    holds a few bands at a time.

    Args:
        batch (int): B.
        hw_shape (tuple[int, int]): The token grid (H', W').
        embed_dims (int): C.
        dtype (torch.dtype): The tokens' dtype.
        device (torch.device): Where bands are computed.
        token_padding_mask (Tensor, optional): (B, N) bool, True on padded patches.
        band_rows (int): The band height asked for (see :func:`row_bands`).
        align (int): The band alignment (see :func:`row_bands`). Defaults to 1.
        buffer (str): 'memory' or 'disk'. Defaults to 'memory'.
        buffer_dir (str, optional): The folder of a 'disk' buffer. Defaults to None.
        on_rows (Callable[[int], None], optional): Called with a band's height once a pass
            (:meth:`pass_bands`, :meth:`segments`) has finished it: a progress bar counts
            patch rows with it. Defaults to None.
    """

    def __init__(self,
                 batch: int,
                 hw_shape: Tuple[int, int],
                 embed_dims: int,
                 dtype: torch.dtype,
                 device: torch.device,
                 token_padding_mask: Optional[Tensor],
                 band_rows: int,
                 align: int = 1,
                 buffer: str = 'memory',
                 buffer_dir: Optional[str] = None,
                 on_rows: Optional[Callable[[int], None]] = None) -> None:
        self.hw_shape = tuple(hw_shape)
        self.on_rows = on_rows
        self.dtype = dtype
        self.device = device
        self.buffer = buffer
        self.buffer_dir = buffer_dir
        self.token_padding_mask = token_padding_mask
        self.bands = row_bands(self.hw_shape[0], band_rows, align)
        self.patches = allocate_buffer((batch, self.hw_shape[0] * self.hw_shape[1], embed_dims),
                                       dtype, buffer, buffer_dir)
        self.extra: Optional[Tensor] = None

    def segments(self) -> Iterator[Tuple[Optional[Tuple[int, int]], Tensor, Optional[Tensor]]]:
        """Visit the extra tokens, then each band of patch rows.

        Yields:
            tuple: the band (None for the extra tokens, else (start, stop) grid rows), its
            tokens (B, n, C) and its padding mask (B, n) (None for the extra tokens, which
            are never padding, or without a mask).
        """
        if self.extra is not None:
            yield None, self.extra, None
        for start, stop in self.pass_bands():
            yield (start, stop), self.read(start, stop), self.mask(start, stop)

    def pass_bands(self) -> Iterator[Tuple[int, int]]:
        """The bands of one pass of a layer over the patch rows, each reported to
        ``on_rows`` when the pass moves on to the next (so after its work).

        Yields:
            tuple[int, int]: (start, stop) grid rows.
        """
        for start, stop in self.bands:
            yield start, stop
            if self.on_rows is not None:
                self.on_rows(stop - start)

    def put(self, band: Optional[Tuple[int, int]], tokens: Tensor) -> None:
        """Replace the tokens of a segment of :meth:`segments` (None: the extra tokens)."""
        if band is None:
            self.extra = tokens
        else:
            self.write(*band, tokens)

    @property
    def num_extra_tokens(self) -> int:
        """int: E (0 before the extra tokens are set)."""
        return 0 if self.extra is None else self.extra.shape[1]

    def read(self, start: int, stop: int) -> Tensor:
        """The patch tokens of grid rows [start, stop).

        Returns:
            Tensor: (B, (stop - start) * W', C) on the compute device (a copy where the
            buffer is elsewhere or on disk).
        """
        return self.patches[:, band_tokens(self.hw_shape, (start, stop))].to(self.device)

    def write(self, start: int, stop: int, tokens: Tensor) -> None:
        """Replace the patch tokens of grid rows [start, stop).

        Args:
            start (int): First grid row.
            stop (int): One past the last.
            tokens (Tensor): (B, (stop - start) * W', C).
        """
        self.patches[:, band_tokens(self.hw_shape, (start, stop))] = tokens

    def mask(self, start: int, stop: int) -> Optional[Tensor]:
        """The (B, (stop - start) * W') padding mask of rows [start, stop), or None."""
        if self.token_padding_mask is None:
            return None
        return self.token_padding_mask[:, band_tokens(self.hw_shape, (start, stop))]
