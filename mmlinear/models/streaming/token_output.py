"""One output formatter for a plain backbone's forward, whole or streamed: a block's tokens,
held as the extra tokens and bands of patch rows, shaped as ``out_type`` asks."""
from typing import Iterable, Optional, Tuple

import torch
from torch import Tensor

from ..utils import tokens_to_map
from .token_stream import allocate_buffer, band_tokens

#: A band of patch rows: its (start, stop) grid rows and their tokens (B, (stop - start) * W', C).
Band = Tuple[Tuple[int, int], Tensor]


def format_output(out_type: str,
                  extra: Optional[Tensor],
                  bands: Iterable[Band],
                  hw_shape: Tuple[int, int],
                  token_padding_mask: Optional[Tensor],
                  buffer: Optional[str] = None,
                  buffer_dir: Optional[str] = None) -> Tensor:
    """Shape one block's tokens as ``out_type`` asks.

    The whole forward hands its tokens over as one band (the result keeps its autograd
    graph); the streamed forward hands them over band by band, read from its stream, and
    the dense outputs are written into a buffer of the stream's kind as they come.

    Args:
        out_type (str): 'featmap', 'cls_token', 'avg_featmap' or 'raw'.
        extra (Tensor, optional): (B, E, C) the extra tokens (CLS, cores); None when E = 0.
        bands (Iterable[Band]): Consecutive bands covering the grid's rows once, in order;
            read lazily, and not at all for 'cls_token'.
        hw_shape (tuple[int, int]): The token grid (H', W').
        token_padding_mask (Tensor, optional): (B, N) bool, True on padded patches.
        buffer (str, optional): None gathers dense outputs in the bands' memory (one band
            is returned as it is); 'memory' or 'disk' writes them into a CPU buffer of that
            kind (see :func:`allocate_buffer`). Defaults to None.
        buffer_dir (str, optional): The folder of a 'disk' buffer. Defaults to None.

    Returns:
        Tensor: (B, C, H', W') for 'featmap'; (B, C) for 'cls_token' (the first extra
        token) and 'avg_featmap' (the mean of the valid patch tokens, summed in at least
        float32); (B, E + N, C) for 'raw'.
    """
    if out_type == 'cls_token':
        return extra[:, 0]
    if out_type == 'avg_featmap':
        return _mean_of_valid(bands, hw_shape, token_padding_mask)
    width, offset = hw_shape[1], 0 if extra is None else extra.shape[1]
    pieces, out = [], None
    for (start, stop), tokens in bands:
        piece = tokens_to_map(tokens, (stop - start, width)) if out_type == 'featmap' else tokens
        if buffer is None:
            pieces.append(piece)
            continue
        if out is None:
            out = _allocate_dense(out_type, piece, extra, offset, hw_shape, buffer, buffer_dir)
        if out_type == 'featmap':
            out[:, :, start:stop] = piece
        else:
            out[:, offset + start * width:offset + stop * width] = piece
    if buffer is not None:
        return out
    if out_type == 'raw' and extra is not None:
        pieces.insert(0, extra)
    return pieces[0] if len(pieces) == 1 else torch.cat(pieces, 2 if out_type == 'featmap' else 1)


def _allocate_dense(out_type: str, piece: Tensor, extra: Optional[Tensor], offset: int,
                    hw_shape: Tuple[int, int], buffer: str, buffer_dir: Optional[str]) -> Tensor:
    """The buffer of a dense output, shaped from its first band's piece; a 'raw' one gets
    the ``offset`` (E) extra tokens at once."""
    B, num_rows, num_cols = piece.shape[0], hw_shape[0], hw_shape[1]
    if out_type == 'featmap':
        return allocate_buffer((B, piece.shape[1], num_rows, num_cols), piece.dtype, buffer,
                               buffer_dir)
    out = allocate_buffer((B, offset + num_rows * num_cols, piece.shape[-1]), piece.dtype, buffer,
                          buffer_dir)
    if offset:
        out[:, :offset] = extra
    return out


def _mean_of_valid(bands: Iterable[Band], hw_shape: Tuple[int, int],
                   token_padding_mask: Optional[Tensor]) -> Tensor:
    """(B, C), the mean of the patch tokens that are not padding (zeros for an image that is
    all padding), summed band by band in at least float32 and returned in the tokens' dtype."""
    total, dtype = None, None
    for rows, tokens in bands:
        dtype = tokens.dtype
        acc = tokens.to(torch.promote_types(tokens.dtype, torch.float32))
        if token_padding_mask is not None:
            acc = acc.masked_fill(token_padding_mask[:, band_tokens(hw_shape, rows), None], 0)
        total = acc.sum(1) if total is None else total + acc.sum(1)
    count = hw_shape[0] * hw_shape[1] if token_padding_mask is None else \
        (~token_padding_mask).sum(1, keepdim=True).clamp(min=1)
    return (total / count).to(dtype)
