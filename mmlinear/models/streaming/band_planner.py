"""What streamed segmentation and detection share: the parts of the model they stream, the
checks before any work, and the band heights picked from the model's prediction of its peak
memory (:class:`BandPlanner`)."""
from abc import ABC, abstractmethod
from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence, Tuple

from torch import Tensor, nn

from mmlinear.utils.deprecation import renamed_keys
from ..utils import check_choice
from .band_resize import Span
from .memory_model import GB, tallest_fitting
from .token_stream import BUFFERS, check_band_rows, check_head_rows


class StreamOptions(NamedTuple):
    """How a streamed segmentation or detection runs: what
    :meth:`StreamedSegmentation.logit_bands` and :meth:`StreamedDetection.predict` take
    besides the image and a plan, and what a model's ``test_cfg`` may set (segmentation's
    mode 'streamed', detection's ``streamed``).

    Attributes:
        band_rows (int, optional): The backbone's band height (patch rows); None picks it.
        head_rows (int, optional): The heads' band height (rows of their finest level);
            None picks it.
        mem_limit_gb (float, optional): Pick the tallest bands whose predicted peak fits;
            refused before any work when none does.
        buffer (str): Where the backbone's stream and map (and detection's pyramid) live:
            'memory' or 'disk'.
        buffer_dir (str, optional): The folder of 'disk' buffers.
        progress (bool, optional): Progress bars; None shows them once a run takes a few
            seconds.
    """
    band_rows: Optional[int] = None
    head_rows: Optional[int] = None
    mem_limit_gb: Optional[float] = None
    buffer: str = 'memory'
    buffer_dir: Optional[str] = None
    progress: Optional[bool] = None


#: The keys of :class:`StreamOptions`, as a ``test_cfg`` spells them.
STREAMED_TEST_KEYS = StreamOptions._fields
#: Retired keys of those options -> their new spelling (they keep working for one release,
#: with a ``FutureWarning``).
RENAMED_TEST_KEYS = dict(chunk_rows='band_rows')


def streamed_test_options(options: Mapping[str, Any], where: str,
                          task_keys: Sequence[str] = ()) -> Tuple[StreamOptions, dict]:
    """The options of a streamed run read from a ``test_cfg``, checked by name; a retired
    key (:data:`RENAMED_TEST_KEYS`) is taken under its new name, with a ``FutureWarning``.

    Args:
        options (Mapping[str, Any]): The options given, keyed by :data:`STREAMED_TEST_KEYS`
            and ``task_keys``.
        where (str): Where they were given, for the error and the warning
            (``"test_cfg.streamed"``).
        task_keys (Sequence[str]): The options of this task alone, allowed beside
            :data:`STREAMED_TEST_KEYS` (detection's ``mask_format``). Defaults to none.

    Returns:
        tuple[StreamOptions, dict]: The run's options, and the task's own (by keyword).

    Raises:
        ValueError: A key that is not an option, naming the allowed ones.
    """
    # The warning names the line that called the model's inference / predict.
    options = renamed_keys(options, RENAMED_TEST_KEYS, where, stacklevel=3)
    allowed = STREAMED_TEST_KEYS + tuple(task_keys)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f'unknown keys {unknown} in {where}; allowed: {", ".join(allowed)}')
    run = {key: value for key, value in options.items() if key in STREAMED_TEST_KEYS}
    task = {key: value for key, value in options.items() if key not in STREAMED_TEST_KEYS}
    return StreamOptions(**run), task


def streamed_parts(model: nn.Module, task: str) -> Tuple[nn.Module, nn.Module]:
    """The backbone and neck of ``model``, checked.

    The streaming package sits below the backbones and necks, so it recognises them by what
    it calls: a backbone with ``forward_streamed`` (every mmlinear plain backbone) that gives
    a map (``out_type='featmap'``), and a neck with ``forward_rows`` (the simple pyramid).

    Args:
        model (nn.Module): An mmseg / mmdet model with ``backbone`` and ``neck``.
        task (str): What the caller does, for the errors ('segmentation', 'detection').

    Returns:
        tuple[nn.Module, nn.Module]: The backbone and the neck.

    Raises:
        TypeError: Another backbone (or one whose ``out_type`` is not 'featmap'), or another
            neck, naming what is supported.
    """
    backbone = getattr(model, 'backbone', None)
    streams = hasattr(backbone, 'forward_streamed')
    if not streams or backbone.out_type != 'featmap':
        got = type(backbone).__name__
        if streams:
            got += f' with out_type={backbone.out_type!r}'
        raise TypeError(f"streamed {task} needs an mmlinear backbone with out_type='featmap' "
                        f'(InfViT, WeightFormer, VECA), got {got}')
    neck = getattr(model, 'neck', None)
    if not hasattr(neck, 'forward_rows'):
        raise TypeError(f'streamed {task} needs the mmlinear SimpleFeaturePyramid neck, got '
                        f'{type(neck).__name__}')
    return backbone, neck


class BandPlan(NamedTuple):
    """The band heights of a streamed model and its predicted peak memory with them.

    Attributes:
        band_rows (int): The backbone's band height (patch rows).
        head_rows (int): The heads' band height (rows of their finest level).
        memory (Any): The model's prediction with these heights: an object with
            ``total_bytes`` and ``describe()`` (``StreamedSegmentationMemory``,
            ``StreamedDetectionMemory``).
    """
    band_rows: int
    head_rows: int
    memory: Any

    @property
    def predicted_peak_gb(self) -> float:
        """float: The predicted peak beyond the weights, in GB (2**30 bytes)."""
        return self.memory.total_bytes / GB


class BandPlanner(ABC):
    """Plans the bands of a streamed segmentation or detection: the backbone's and the heads'
    band heights, picked from the model's own prediction of its peak memory.

    A subclass sets :attr:`task`, :attr:`batch_of_one`, ``model``, ``backbone`` and ``neck`` and
    defines :meth:`predict_memory` (whose prediction has ``total_bytes``,
    ``head_band_bytes`` and ``describe()``) and :meth:`finest_rows`.
    """

    #: What the model does, for the errors ('segmentation', 'detection').
    task: str
    #: Whether the model takes one image at a time (detection) or a batch (segmentation).
    batch_of_one: bool
    model: nn.Module
    backbone: nn.Module
    neck: nn.Module

    @property
    def in_channels(self) -> int:
        """int: The channels of the images the backbone takes."""
        return self.backbone.patch_embed.in_channels

    @abstractmethod
    def predict_memory(self, image_shape: Sequence[int], *, band_rows: int, head_rows: int,
                       buffer: str, input_in_memory: bool, **memory_options: int) -> Any:
        """The model's peak memory beyond the weights with these band heights, before any
        work: an object with ``total_bytes``, ``head_band_bytes`` and ``describe()``."""

    @abstractmethod
    def finest_rows(self, image_shape: Sequence[int]) -> int:
        """Rows of the heads' finest level for (B, C, H, W) images (the tallest head band)."""

    def plan_bands(self,
                   image_shape: Sequence[int],
                   *,
                   band_rows: Optional[int] = None,
                   head_rows: Optional[int] = None,
                   mem_limit_gb: Optional[float] = None,
                   buffer: str = 'memory',
                   input_in_memory: bool = True,
                   **memory_options: int) -> BandPlan:
        """The backbone's and the heads' band heights, and the predicted peak with them.

        Without a limit, heights not given are the tallest whose head band holds at most
        the backbone's ``default_band_bytes``; with ``mem_limit_gb`` the tallest whose
        predicted peak fits (at most the heights given), and a limit that no band meets is
        refused before any work.

        Args:
            image_shape (Sequence[int]): (B, C, H, W).
            band_rows (int, optional): The backbone's band height (patch rows), if given.
            head_rows (int, optional): The heads' band height (rows of their finest level).
            mem_limit_gb (float, optional): The limit of the predicted peak.
            buffer (str): 'memory' or 'disk', the backbone's residual stream.
            input_in_memory (bool): Whether the image is one array in memory.
            **memory_options (int): What else the peak depends on (segmentation:
                ``output_bytes``, the whole-image outputs the caller holds).

        Returns:
            BandPlan: (band_rows, head_rows, memory).

        Raises:
            ValueError: A height below 1, or a limit that even one-row bands exceed (with the
                predicted figure).
        """
        if band_rows is not None:
            check_band_rows(band_rows)
        if head_rows is not None:
            check_head_rows(head_rows)

        def memory_at(backbone_rows: int, rows: int) -> Any:
            return self.predict_memory(
                image_shape,
                band_rows=backbone_rows,
                head_rows=rows,
                buffer=buffer,
                input_in_memory=input_in_memory,
                **memory_options)

        def fits(memory: Any) -> bool:
            if mem_limit_gb is None:
                return memory.head_band_bytes <= self.backbone.default_band_bytes
            return memory.total_bytes <= mem_limit_gb * GB

        if mem_limit_gb is not None:
            needed = memory_at(band_rows or self.backbone.stream_row_alignment, 1)
            if not fits(needed):
                raise ValueError(f'streamed {self.task} needs {needed.describe()}, limit '
                                 f"{mem_limit_gb:g} GB: raise mem_limit_gb, or use "
                                 f"buffer='disk' or an image read by rows from a file")
        band_rows = self.backbone.pick_band_rows(image_shape, band_rows, mem_limit_gb, buffer,
                                                 input_in_memory)
        if head_rows is not None and mem_limit_gb is None:
            return BandPlan(band_rows, head_rows, memory_at(band_rows, head_rows))
        # The tallest head band that fits (the prediction grows with the band); without a
        # limit, even one row may pass the mark, and one row it is then. The predictions are
        # kept, so the plan's is the one its search found, not made twice.
        predicted = {1: memory_at(band_rows, 1)}

        def head_band_fits(rows: int) -> bool:
            predicted[rows] = predicted.get(rows) or memory_at(band_rows, rows)
            return fits(predicted[rows])

        rows = 1
        if fits(predicted[1]):
            finest = self.finest_rows(image_shape)
            rows = tallest_fitting(1, min(head_rows or finest, finest), head_band_fits)
        return BandPlan(band_rows, rows, predicted[rows])

    def start(self, image: Any, plan: Optional[BandPlan], options: StreamOptions,
              **memory_options: int) -> Tuple[Tuple[int, ...], BandPlan]:
        """The checks before a streamed run, and its plan (inference only).

        Args:
            image (Tensor | array-like): (B, C, H, W) normalised images (one image for
                detection).
            plan (BandPlan, optional): Heights planned beforehand (by :meth:`plan_bands`
                with the same image and options); None plans them here.
            options (StreamOptions): The run's options; ``buffer`` is checked here.
            **memory_options (int): What else the peak depends on, as :meth:`plan_bands`
                takes it (unused when ``plan`` is given).

        Returns:
            tuple: The image's shape and the plan.

        Raises:
            RuntimeError: The model is in training mode.
            ValueError: A bad ``buffer``, an image of another shape, or a limit no band meets.
        """
        if self.model.training:
            raise RuntimeError(f'streamed {self.task} is inference only: call .eval() first')
        check_choice('buffer', options.buffer, BUFFERS)
        shape = tuple(getattr(image, 'shape', ()))
        if len(shape) != 4 or (self.batch_of_one and shape[0] != 1):
            expected = 'one image of shape (1, C, H, W)' if self.batch_of_one else \
                'images of shape (B, C, H, W)'
            raise ValueError(f'expected {expected}, got '
                             f'{shape if shape else type(image).__name__}')
        if plan is None:
            plan = self.plan_bands(
                shape,
                band_rows=options.band_rows,
                head_rows=options.head_rows,
                mem_limit_gb=options.mem_limit_gb,
                buffer=options.buffer,
                input_in_memory=isinstance(image, Tensor),
                **memory_options)
        return shape, plan

    def stream_feature_map(self, image: Any, band_rows: int,
                           options: StreamOptions) -> Tuple[Tensor, Callable[[Span], Tensor]]:
        """The backbone's map of the whole image, streamed in bands of ``band_rows``, and a
        reader of its rows on the weights' device and dtype (the heads' input).

        Args:
            image (Tensor | array-like): (B, C, H, W) normalised images.
            band_rows (int): The backbone's band height (patch rows), as planned.
            options (StreamOptions): Where the stream and map live, and the progress bars.

        Returns:
            tuple[Tensor, Callable]: The (B, C, h, w) map the neck reads (in memory or a
            mapped file) and ``read_map(span)``, its rows ``span`` as a tensor.
        """
        weight = self.backbone.patch_embed.projection.weight
        feats = self.backbone.forward_streamed(
            image,
            band_rows=band_rows,
            buffer=options.buffer,
            buffer_dir=options.buffer_dir,
            progress=options.progress)
        feature_map = feats[self.neck.in_index]

        def read_map(span: Span) -> Tensor:
            return feature_map[:, :, span[0]:span[1]].to(weight.device, weight.dtype)

        return feature_map, read_map
