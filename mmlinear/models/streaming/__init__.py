"""Streamed inference: a model run over an image in bands of rows, with memory bounded by the
bands instead of the image.

The package sits just above ``models/utils``: the layers, backbones and necks import its
primitives (the token stream, the image read by rows, the memory model, band spans), and it
imports none of them. The runners over whole models (:mod:`.segmentation`,
:mod:`.detection`) need mmseg / mmdet and are imported by their module paths.
"""
from .band_progress import BandProgress
from .band_resize import Span, check_span, crop_band, expand_span, resize_band, source_span
from .image_rows import ImageRows
from .memory_model import DEFAULT_BAND_BYTES, GB, BandWorkspace, StreamedMemory, tallest_fitting
from .token_stream import (BUFFERS, TokenStream, allocate_buffer, band_tokens, check_band_rows,
                           check_head_rows, row_bands)

__all__ = [
    'BUFFERS', 'DEFAULT_BAND_BYTES', 'GB', 'BandProgress', 'BandWorkspace', 'ImageRows', 'Span',
    'StreamedMemory', 'TokenStream', 'allocate_buffer', 'band_tokens', 'check_band_rows',
    'check_head_rows', 'check_span', 'crop_band', 'expand_span', 'resize_band', 'row_bands',
    'source_span', 'tallest_fitting'
]
