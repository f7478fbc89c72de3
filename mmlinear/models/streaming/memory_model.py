"""The memory model of a streamed forward: its peak, predicted before anything is allocated."""
from typing import Callable, NamedTuple

GB = 2**30


class BandWorkspace(NamedTuple):
    """What the widest moment of a band pass holds per band token, in values.

    Under autocast the outputs of its low-precision ops (linear layers, convolutions, and
    the elementwise ops on them) are in autocast's dtype; the residual stream, the
    LayerNorms and the sums with it stay in the weights' dtype.

    Attributes:
        weight_dtype_values (int): Values kept in the weights' dtype.
        autocast_values (int): Values in autocast's dtype where it is on (else in the
            weights' dtype).
    """
    weight_dtype_values: int
    autocast_values: int

    def bytes_per_token(self, itemsize: int, autocast_itemsize: int) -> int:
        """int: The bytes per band token, with the two dtypes' element sizes."""
        return self.weight_dtype_values * itemsize + self.autocast_values * autocast_itemsize


class StreamedMemory(NamedTuple):
    """The predicted peak memory of a streamed forward beyond the weights, in bytes.

    Attributes:
        input_bytes (int): The image, when it is one tensor in memory (0 when it is read by
            rows from an array such as a file).
        stream_bytes (int): The residual stream (0 when it lives in a mapped file, whose
            pages the kernel can write back).
        output_bytes (int): The dense outputs held in memory.
        band_bytes (int): The widest moment of a band pass: its activations and the band of
            pixels it embeds.
        band_rows (int): The band height (patch rows) of the prediction.
    """
    input_bytes: int
    stream_bytes: int
    output_bytes: int
    band_bytes: int
    band_rows: int

    @property
    def total_bytes(self) -> int:
        """int: Everything the forward holds at its peak."""
        return self.input_bytes + self.stream_bytes + self.output_bytes + self.band_bytes

    def then_heads(self, head_bytes: int) -> int:
        """The peak of a model whose heads run after this backbone: the larger of the
        backbone's phase and the heads' (``head_bytes`` beside the input and the map the
        backbone left; its stream is gone by then).

        Args:
            head_bytes (int): What the heads hold at their peak.

        Returns:
            int: Bytes.
        """
        return max(self.total_bytes, self.input_bytes + self.output_bytes + head_bytes)

    def describe(self) -> str:
        """str: The total and its parts, in GB."""
        return (f'{self.total_bytes / GB:.2f} GB (input {self.input_bytes / GB:.2f}, stream '
                f'{self.stream_bytes / GB:.2f}, outputs {self.output_bytes / GB:.2f}, bands of '
                f'{self.band_rows} patch rows {self.band_bytes / GB:.2f})')


#: The band height picked without ``band_rows``, ``head_rows`` and a memory limit: the tallest
#: band whose pass holds at most this many bytes (256 MiB).
DEFAULT_BAND_BYTES = 2**28


def tallest_fitting(lowest: int, highest: int, fits: Callable[[int], bool]) -> int:
    """The tallest band height in [lowest, highest] that fits, by bisection.

    The predicted memory grows with the band height, so the heights that fit are a prefix
    of the range; ``fits(lowest)`` is taken to hold (the callers check it first, to refuse
    with the predicted figure when even the lowest height does not fit).

    Args:
        lowest (int): A height that fits.
        highest (int): The tallest height allowed (taken as ``lowest`` when smaller).
        fits (Callable[[int], bool]): Whether a height's prediction fits.

    Returns:
        int: The tallest height that fits.
    """
    low, high = lowest, max(highest, lowest)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low
