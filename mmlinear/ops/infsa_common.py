"""Input handling shared by the InfSA ops and their references."""
from typing import Optional, Tuple

import torch
from torch import Tensor


def check_infsa_inputs(q: Tensor, k: Tensor, v: Optional[Tensor], rho: Tensor,
                       key_padding_mask: Optional[Tensor]) -> None:
    """Validate shapes and devices of an InfSA call.

    Args:
        q (Tensor): (B, H, N, d) queries.
        k (Tensor): (B, H, S, d) keys.
        v (Tensor, optional): (B, H, S, d) values; None for a call without them (the key
            weights alone).
        rho (Tensor): scalar, (1,) or (H,) decay.
        key_padding_mask (Tensor, optional): (B, S) bool, True marks padding.

    Raises:
        ValueError: If a shape, dtype or device does not match.
    """
    v_shape = k.shape if v is None else v.shape
    if q.dim() != 4 or k.dim() != 4 or len(v_shape) != 4:
        raise ValueError('q, k and v must be 4-D (B, H, N, d), got shapes '
                         f'{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v_shape)}')
    B, H, _, d = q.shape
    if d == 0:
        raise ValueError('the head dimension d of q, k and v must be at least 1, got 0')
    v_dtype = k.dtype if v is None else v.dtype
    dtypes = {q.dtype, k.dtype, v_dtype}
    if len(dtypes) > 1 or not q.dtype.is_floating_point or not rho.dtype.is_floating_point:
        raise ValueError('q, k and v must share one floating dtype and rho must be floating, got '
                         f'q {q.dtype}, k {k.dtype}, v {v_dtype}, rho {rho.dtype}')
    if k.shape[:2] != (B, H) or k.shape[-1] != d or v_shape[:3] != k.shape[:3]:
        raise ValueError('expected q (B, H, N, d), k (B, H, S, d), v (B, H, S, d), got '
                         f'{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v_shape)}')
    if rho.numel() not in (1, H):
        raise ValueError(f'rho must hold 1 value or one per head ({H}), got shape '
                         f'{tuple(rho.shape)}')
    tensors = [('q', q), ('k', k), ('rho', rho)] + ([] if v is None else [('v', v)])
    if key_padding_mask is not None:
        if key_padding_mask.shape != (B, k.shape[2]) or key_padding_mask.dtype != torch.bool:
            raise ValueError('key_padding_mask must be a bool tensor of shape (B, S) = '
                             f'{(B, k.shape[2])}, got {key_padding_mask.dtype} '
                             f'{tuple(key_padding_mask.shape)}')
        tensors.append(('key_padding_mask', key_padding_mask))
    devices = {name: t.device for name, t in tensors}
    if len(set(devices.values())) > 1:
        raise ValueError(f'all inputs must be on one device, got {devices}')


def scale_float32(x: Tensor) -> Tensor:
    """Scale queries or keys (..., d) by 1/sqrt(d) (as the reference code does) in at least
    float32.

    The normalisations sum many squares or scores, which overflows or loses precision in
    half types, so they always run in float32 (float64 inputs stay float64).
    """
    return x.to(torch.promote_types(x.dtype, torch.float32)) * x.shape[-1]**-0.5


def scaled_float32(q: Tensor, k: Tensor) -> Tuple[Tensor, Tensor]:
    """q and k through :func:`scale_float32`."""
    return scale_float32(q), scale_float32(k)


def rho_vector(rho: Tensor, num_heads: int, dtype: torch.dtype) -> Tensor:
    """Return rho as a contiguous (H,) tensor of ``dtype``, one value per head.

    Broadcasting a single rho here (rather than in the kernel) lets autograd sum the per-head
    gradients back into it.
    """
    return rho.to(dtype).reshape(-1).expand(num_heads).contiguous()


def rho_per_head(rho: Tensor, num_heads: int, dtype: torch.dtype) -> Tensor:
    """Return rho shaped (1, H, 1) (or (1, 1, 1)) for broadcasting over (B, H, *)."""
    return rho.to(dtype).reshape(1, -1, 1) if rho.numel() == num_heads else rho.to(dtype).reshape(
        1, 1, 1)
