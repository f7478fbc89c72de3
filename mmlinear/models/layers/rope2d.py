"""2D axial rotary position embedding with interleaved channel pairs (as the official VECA code)."""
import math
from typing import NamedTuple, Optional, Tuple

import torch
from torch import Tensor, nn

from mmlinear.utils.ext_loader import exporting
from ..streaming import band_tokens
from ..utils import check_choice

#: How VECA lays its patch coordinates on a grid of another size than the training grid
#: (``pos_extrapolation`` of the backbone; see :func:`patch_band_coords`).
ROPE_POS_EXTRAPOLATIONS = ('interpolate', 'tile', 'extend')


def _axis_coords(start: int, stop: int, valid: Tensor, extrapolation: str,
                 period: Optional[int]) -> Tensor:
    """Coordinates of the patch centres [start, stop) along one axis (see
    :func:`patch_band_coords`).

    Args:
        start (int): First index.
        stop (int): One past the last index.
        valid (Tensor): (B, 1) float32, the valid patches of each image along the axis.
        extrapolation (str): One of :data:`ROPE_POS_EXTRAPOLATIONS`.
        period (int, optional): The training grid's patches along the axis; unused by
            'interpolate'.

    Returns:
        Tensor: (B, stop - start) float32.
    """
    index = torch.arange(start, stop, device=valid.device)
    if extrapolation == 'tile':
        index = index % period
    # One formula for every policy, so that at the training grid (valid == period) each gives
    # 'interpolate''s coordinates bit for bit: the same division, and 'extend''s shift is 0.
    step = valid if extrapolation == 'interpolate' else torch.full_like(valid, period)
    coords = (index.float() + 0.5)[None] / step * 2.0 - 1.0
    if extrapolation == 'extend':
        coords = coords - (valid - step) / step
    return coords


def patch_band_coords(hw_shape: Tuple[int, int],
                      rows: Tuple[int, int],
                      valid_hw: Optional[Tensor] = None,
                      device: Optional[torch.device] = None,
                      extrapolation: str = 'interpolate',
                      train_shape: Optional[Tuple[int, int]] = None) -> Tensor:
    """(x, y) coordinates of the patch centres in grid rows [r0, r1) of a row-major grid.

    Each axis is laid out separately, on each image's valid grid of ``h`` rows and ``w``
    columns, by the policy ``extrapolation`` (shown for x; y is the same with rows, and
    ``Wt`` is the training grid's columns, ``train_shape[1]``):

    - ``'interpolate'``: ``x = (c + 0.5) / w * 2 - 1``, the grid stretched over [-1, 1]
      whatever its size, so a grid larger than the training one has its neighbours closer.
    - ``'tile'``: ``x = (c mod Wt + 0.5) / Wt * 2 - 1``, the training grid's coordinates
      repeated at its period from the top-left corner: every tile of the training size that
      starts on the period sees exactly the training coordinates (the cores' frame included);
      a smaller grid takes the training grid's top-left corner.
    - ``'extend'``: ``x = (c + 0.5) / Wt * 2 - 1 - (w - Wt) / Wt``, the training grid's step
      with the training frame centred on the image: a larger grid extends past [-1, 1], a
      smaller one covers the middle of the frame. RoPE is relative, so neighbouring patches
      keep the relative angles of training.

    At the training grid (``w == Wt``, ``h == Ht``) the three give the same coordinates, bit
    for bit. Each coordinate depends on its own row and column only, so a band's coordinates
    are exactly (bit for bit) the band's slice of the whole grid's
    (:func:`patch_grid_coords`), and the RoPE angles of a band can be computed without the
    rest of the image.

    Args:
        hw_shape (tuple[int, int]): (Hp, Wp), the token grid.
        rows (tuple[int, int]): (r0, r1), the band's rows [r0, r1) (all Wp columns), with
            0 <= r0 < r1 <= Hp.
        valid_hw (Tensor, optional): (B, 2) long, the valid rows and columns of each image
            (its un-padded region in the top-left corner). The coordinates are then those of
            the valid grid, so padding an image further does not move its patches; padded
            patches continue the valid ones (beyond 1 unless tiled). Defaults to None (the
            whole grid is valid).
        device (torch.device, optional): Device of the result when ``valid_hw`` is None.
        extrapolation (str): One of :data:`ROPE_POS_EXTRAPOLATIONS`. Defaults to
            'interpolate'.
        train_shape (tuple[int, int], optional): (Ht, Wt), the training grid, needed by
            'tile' and 'extend'. Defaults to None.

    Returns:
        Tensor: (B, (r1 - r0) * Wp, 2) float32, B = 1 without ``valid_hw``; the tokens
        ``band_tokens(hw_shape, rows)`` of the grid.
    """
    band_tokens(hw_shape, rows)  # checks the rows
    check_choice('pos_extrapolation', extrapolation, ROPE_POS_EXTRAPOLATIONS)
    if extrapolation != 'interpolate' and train_shape is None:
        raise ValueError(f'pos_extrapolation {extrapolation!r} needs the training grid '
                         '(train_shape)')
    Hp, Wp = hw_shape
    r0, r1 = rows
    if valid_hw is None:
        valid_hw = torch.tensor([[Hp, Wp]], device=device)
    elif valid_hw.dim() != 2 or valid_hw.shape[1] != 2:
        raise ValueError(f'valid_hw must be (B, 2) (rows, columns), got {tuple(valid_hw.shape)}')
    Ht, Wt = train_shape if train_shape is not None else (None, None)
    sizes = valid_hw.float()
    y = _axis_coords(r0, r1, sizes[:, :1], extrapolation, Ht)  # (B, r1 - r0)
    x = _axis_coords(0, Wp, sizes[:, 1:], extrapolation, Wt)  # (B, Wp)
    B, h = sizes.shape[0], r1 - r0
    grid = torch.stack([x[:, None, :].expand(B, h, Wp), y[:, :, None].expand(B, h, Wp)], -1)
    return grid.reshape(B, h * Wp, 2)


def patch_grid_coords(hw_shape: Tuple[int, int],
                      valid_hw: Optional[Tensor] = None,
                      device: Optional[torch.device] = None,
                      extrapolation: str = 'interpolate',
                      train_shape: Optional[Tuple[int, int]] = None) -> Tensor:
    """(x, y) coordinates of all the patch centres of a row-major grid:
    :func:`patch_band_coords` over every row.

    Args:
        hw_shape, valid_hw, device, extrapolation, train_shape: As :func:`patch_band_coords`
            takes them.

    Returns:
        Tensor: (B, Hp * Wp, 2) float32, B = 1 without ``valid_hw``.
    """
    return patch_band_coords(hw_shape, (0, hw_shape[0]), valid_hw, device, extrapolation,
                             train_shape)


def rotate_pairs(x: Tensor) -> Tensor:
    """Map each adjacent channel pair (a, b) to (-b, a): the sine term of a pair rotation."""
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((-b, a), dim=-1).flatten(-2)


def _pairs_as_complex(x: Tensor) -> bool:
    """Whether :func:`apply_rope` may rotate ``x`` as complex numbers: in eager mode (exported
    graphs and compiled code keep the real formula, which ONNX and the compiler's fusion
    handle), for floating-point x whose adjacent channel pairs a complex view can address."""
    if not x.is_floating_point() or torch.compiler.is_compiling() or exporting():
        return False
    return x.stride(-1) == 1 and x.storage_offset() % 2 == 0 and \
        all(stride % 2 == 0 for stride in x.stride()[:-1])


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate queries or keys by their RoPE angles.

    Args:
        x (Tensor): (B, num_heads, T, head_dims).
        cos (Tensor): (B, T, head_dims), from :class:`Rope2D`; the same for every head.
        sin (Tensor): (B, T, head_dims).

    Returns:
        Tensor: (B, num_heads, T, head_dims) in the dtype of ``x``.
    """
    if _pairs_as_complex(x):
        # A pair (a, b) rotated by t is the complex product (a + ib) e^(it): one pass over x
        # instead of five, with the same products and sums (a cos t - b sin t,
        # b cos t + a sin t). Both members of a pair share their angle. Half-precision x is
        # rotated in float32 (its complex types are incomplete) and rounded once.
        dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float32
        rotation = torch.complex(cos[..., 0::2].to(dtype), sin[..., 0::2].to(dtype))
        pairs = torch.view_as_complex(x.to(dtype).unflatten(-1, (-1, 2)))
        return torch.view_as_real(pairs * rotation.unsqueeze(1)).flatten(-2).to(x.dtype)
    cos = cos.to(x.dtype).unsqueeze(1)
    sin = sin.to(x.dtype).unsqueeze(1)
    return x * cos + rotate_pairs(x) * sin


class CoordAugmentation(NamedTuple):
    """One draw of the training-time patch-coordinate augmentation of :class:`Rope2D`.

    Attributes:
        shift (Tensor | None): (2,) float32, added to (x, y); None without shifting.
        scale (Tensor | None): (1,) float32, then multiplying both; None without rescaling.
    """
    shift: Optional[Tensor]
    scale: Optional[Tensor]


class Rope2D(nn.Module):
    """Angles of the VECA 2D axial RoPE, and its training-time patch-coordinate augmentation.

    A head of width d carries x in its first d / 2 channels and y in its last d / 2, each
    rotated in adjacent (interleaved) pairs ``(2i, 2i + 1)`` by ``2 pi * coord / period_i``
    with ``period_i = base ** (i / (d / 4))``, i = 0 .. d / 4 - 1. The ``round(p_zero_freqs *
    d / 4)`` longest periods (the lowest frequencies) are infinite: those channels are never
    rotated and stay position-free. This layout is that of the released checkpoints; DINOv3's
    split-half RoPE differs and cannot replace it.

    Args:
        head_dims (int): Head width d, a multiple of 4.
        base (float): Period base. Defaults to 100.
        p_zero_freqs (float): Fraction of the frequencies zeroed, from the lowest.
            Defaults to 0.125 (2 of 16 for d = 64).
        shift_coords (float, optional): Training only: add U(-s, s) to the patch x and y
            (one draw per axis). Defaults to 0.08; None disables.
        rescale_coords (float, optional): Training only: then multiply the patch coordinates
            by exp(U(-ln r, ln r)) (one draw for both axes). Defaults to 2.0; None disables.
    """

    def __init__(self,
                 head_dims: int,
                 base: float = 100.,
                 p_zero_freqs: float = 0.125,
                 shift_coords: Optional[float] = 0.08,
                 rescale_coords: Optional[float] = 2.0) -> None:
        super().__init__()
        if head_dims % 4 != 0:
            raise ValueError(f'2D RoPE needs a head width divisible by 4, got {head_dims}')
        if not 0 <= p_zero_freqs <= 1:
            raise ValueError(f'p_zero_freqs must lie in [0, 1], got {p_zero_freqs}')
        if rescale_coords is not None and rescale_coords < 1:
            raise ValueError(f'rescale_coords must be >= 1 (or None), got {rescale_coords}')
        self.head_dims = head_dims
        self.shift_coords = shift_coords
        self.rescale_coords = rescale_coords
        num_freqs = head_dims // 4
        periods = base**(2 * torch.arange(num_freqs, dtype=torch.float32) / (head_dims // 2))
        num_zero = int(round(p_zero_freqs * num_freqs))
        if num_zero:
            periods[num_freqs - num_zero:] = float('inf')
        # Derived from the options, so not stored in checkpoints (as the reference).
        self.register_buffer('periods', periods, persistent=False)

    def draw_augmentation(self, device: torch.device) -> Optional[CoordAugmentation]:
        """Draw the training-time shift and rescale of the patch coordinates, one draw for
        the whole batch (cores are never augmented).

        Args:
            device (torch.device): Where the draws are made (the coordinates' device).

        Returns:
            CoordAugmentation | None: The draws, or None in eval mode.
        """
        if not self.training:
            return None
        shift = scale = None
        if self.shift_coords is not None:
            shift = torch.empty(
                2, device=device, dtype=torch.float32).uniform_(-self.shift_coords,
                                                                self.shift_coords)
        if self.rescale_coords is not None:
            log_max = math.log(float(self.rescale_coords))
            scale = torch.empty(
                1, device=device, dtype=torch.float32).uniform_(-log_max, log_max).exp()
        return CoordAugmentation(shift, scale)

    @staticmethod
    def augment(coords: Tensor, augmentation: Optional[CoordAugmentation]) -> Tensor:
        """Shift, then rescale patch coordinates (B, n, 2) by a draw of
        :meth:`draw_augmentation`; None leaves them as they are."""
        if augmentation is None:
            return coords
        if augmentation.shift is not None:
            coords = coords + augmentation.shift.view(1, 1, 2)
        if augmentation.scale is not None:
            coords = coords * augmentation.scale.view(1, 1, 1)
        return coords

    def forward(self, coords: Tensor) -> Tuple[Tensor, Tensor]:
        """Cosines and sines of the rotation angles, computed in float32.

        Args:
            coords (Tensor): (B, T, 2) (x, y) coordinates.

        Returns:
            tuple[Tensor, Tensor]: cos and sin, each (B, T, head_dims) float32, channel
            layout as in the class docstring.
        """
        coords = coords.float()
        periods = self.periods.float()
        # A zero angle on the infinite periods: 2 pi x / inf == 0.
        ang_x = (2.0 * math.pi) * coords[..., 0:1] / periods
        ang_y = (2.0 * math.pi) * coords[..., 1:2] / periods
        angles = torch.cat([ang_x.repeat_interleave(2, dim=-1),
                            ang_y.repeat_interleave(2, dim=-1)],
                           dim=-1)
        return angles.cos(), angles.sin()


class PatchRope:
    """The RoPE angles of a forward's patches, by bands of grid rows.

    The patches never move, so their angles serve every block; the training-time
    augmentation is drawn once, when the forward makes this object. The whole forward asks
    for :meth:`grid` (computed once, then kept); the streamed one for each band's
    :meth:`rows`, so the whole grid's angles are never held.

    Args:
        rope (Rope2D): The angles' module.
        hw_shape (tuple[int, int]): (Hp, Wp), the token grid.
        valid_hw (Tensor, optional): (B, 2) long, the valid rows and columns of each image
            (see :func:`patch_band_coords`). Defaults to None (the whole grid is valid).
        batch (int): B. Defaults to 1.
        device (torch.device, optional): Where the angles are computed. Defaults to None
            (``valid_hw``'s device, else the CPU).
        extrapolation (str): How the coordinates are laid on the grid, one of
            :data:`ROPE_POS_EXTRAPOLATIONS` (see :func:`patch_band_coords`). Defaults to
            'interpolate'.
        train_shape (tuple[int, int], optional): (Ht, Wt), the training grid, needed by
            'tile' and 'extend'. Defaults to None.
    """

    def __init__(self,
                 rope: Rope2D,
                 hw_shape: Tuple[int, int],
                 valid_hw: Optional[Tensor] = None,
                 batch: int = 1,
                 device: Optional[torch.device] = None,
                 extrapolation: str = 'interpolate',
                 train_shape: Optional[Tuple[int, int]] = None) -> None:
        self.rope = rope
        self.hw_shape = tuple(hw_shape)
        self.valid_hw = valid_hw
        self.batch = batch
        self.extrapolation = extrapolation
        self.train_shape = train_shape
        self.device = valid_hw.device if valid_hw is not None else device
        self.augmentation = rope.draw_augmentation(self.device)
        self._grid: Optional[Tuple[Tensor, Tensor]] = None

    def rows(self, start: int, stop: int) -> Tuple[Tensor, Tensor]:
        """The angles of the patches of grid rows [start, stop).

        Returns:
            tuple[Tensor, Tensor]: cos and sin, each (B, (stop - start) * Wp, head_dims)
            float32.
        """
        coords = patch_band_coords(self.hw_shape, (start, stop), self.valid_hw, self.device,
                                   self.extrapolation, self.train_shape)
        coords = self.rope.augment(coords.expand(self.batch, -1, -1), self.augmentation)
        return self.rope(coords)

    def grid(self) -> Tuple[Tensor, Tensor]:
        """The angles of every patch, (B, Hp * Wp, head_dims) cos and sin, computed once."""
        if self._grid is None:
            self._grid = self.rows(0, self.hw_shape[0])
        return self._grid
