"""The ordered bank of learned VECA cores and their initial coordinates, built as the
official VECA code builds them."""
import math
import numbers
from typing import List, Sequence, Tuple

import torch
from torch import Tensor, nn


def farthest_point_sampling(points: Tensor, k: int) -> Tensor:
    """Greedy farthest-point order of 2D points, starting from the point nearest the origin.

    Args:
        points (Tensor): (P, 2).
        k (int): Points to pick; all P (in order) when k >= P.

    Returns:
        Tensor: (min(k, P), ) long indices into ``points``, in pick order.
    """
    if k >= points.shape[0]:
        return torch.arange(points.shape[0], device=points.device)
    picked = [int(torch.argmin((points**2).sum(1)))]
    min_dist = ((points - points[picked[0]])**2).sum(1)
    for _ in range(1, k):
        picked.append(int(torch.argmax(min_dist)))
        min_dist = torch.minimum(min_dist, ((points - points[picked[-1]])**2).sum(1))
    return torch.tensor(picked, device=points.device)


def fps_core_coords(max_cores: int, pool_size: int = 1000, coord_range: float = 0.95) -> Tensor:
    """Raw (pre-tanh) initial core coordinates by farthest-point sampling.

    A pool uniform in [-coord_range, coord_range]^2 is ordered coarse to fine: core 0 (the
    global core) starts near the image centre and every prefix covers the image, which suits
    nested truncation of the bank.

    Args:
        max_cores (int): Cores M.
        pool_size (int): Pool size. Defaults to 1000.
        coord_range (float): Half side of the pool square. Defaults to 0.95.

    Returns:
        Tensor: (M, 2) float32 ``atanh`` of the picked points (clamped to +-0.999), so that
        ``tanh`` gives them back.
    """
    # On the CPU whatever the default device: the greedy loop is sequential and tiny.
    pool = torch.empty(pool_size, 2, device='cpu').uniform_(-coord_range, coord_range)
    picked = pool[farthest_point_sampling(pool, max_cores)]
    return torch.atanh(picked.clamp(-0.999, 0.999))


def build_core_bank(max_cores: int,
                    chunk_size: int,
                    embed_dims: int,
                    fps_pool_size: int = 1000,
                    fps_coord_range: float = 0.95) -> Tuple[nn.ParameterList, nn.ParameterList]:
    """Core embeddings and raw coordinates, stored in chunks (released key layout).

    Chunks make the elastic budget cheap: a budget of K cores uses the first K / chunk_size
    chunks, and the others get no gradient.

    Args:
        max_cores (int): Cores M, a multiple of ``chunk_size``.
        chunk_size (int): Cores per chunk.
        embed_dims (int): Token width C.
        fps_pool_size (int): See :func:`fps_core_coords`. Defaults to 1000.
        fps_coord_range (float): See :func:`fps_core_coords`. Defaults to 0.95.

    Returns:
        tuple[ParameterList, ParameterList]: M / chunk_size chunks of (1, chunk_size, C)
        embeddings drawn from N(0, 1 / C) (not truncated, as the reference), and of
        (1, chunk_size, 2) raw coordinates.
    """
    if max_cores % chunk_size:
        raise ValueError(f'the core bank size {max_cores} must be a multiple of the chunk '
                         f'size {chunk_size}')
    num_chunks = max_cores // chunk_size
    tokens = nn.ParameterList(
        nn.Parameter(torch.randn(1, chunk_size, embed_dims) / math.sqrt(embed_dims))
        for _ in range(num_chunks))
    raw = fps_core_coords(max_cores, fps_pool_size,
                          fps_coord_range).view(num_chunks, 1, chunk_size, 2)
    coords = nn.ParameterList(nn.Parameter(chunk.clone()) for chunk in raw)
    return tokens, coords


def active_prefix(chunks: nn.ParameterList, num_chunks: int, batch_size: int) -> Tensor:
    """The first ``num_chunks`` chunks of a bank, concatenated and expanded over the batch.

    Args:
        chunks (ParameterList): (1, chunk_size, K) chunks.
        num_chunks (int): How many to take.
        batch_size (int): B.

    Returns:
        Tensor: (B, num_chunks * chunk_size, K), a view shared by the batch.
    """
    return torch.cat(list(chunks[:num_chunks]), dim=1).expand(batch_size, -1, -1)


def check_core_budget(value: object, max_cores: int, chunk_size: int) -> int:
    """Validate an active-core budget.

    Args:
        value: The budget given.
        max_cores (int): Bank size M.
        chunk_size (int): Budget granularity.

    Returns:
        int: The budget.

    Raises:
        ValueError: Unless ``value`` is an integer (not a bool) multiple of ``chunk_size`` in
            [chunk_size, max_cores]; the message names the allowed values.
    """
    allowed = tuple(range(chunk_size, max_cores + 1, chunk_size))
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or \
            int(value) not in allowed:
        raise ValueError(f'active_cores must be one of {allowed} (multiples of {chunk_size} '
                         f'up to the bank size {max_cores}), got {value!r}')
    return int(value)


def check_core_budgets(budgets: Sequence[int], max_cores: int, chunk_size: int) -> List[int]:
    """Validate the core budgets of a sweep, naming every bad one.

    Args:
        budgets (Sequence[int]): The budgets given (repeats allowed).
        max_cores (int): Bank size M.
        chunk_size (int): Budget granularity.

    Returns:
        list[int]: The distinct budgets, ascending.

    Raises:
        ValueError: Unless every budget is a multiple of ``chunk_size`` in
            [chunk_size, max_cores]; the message lists the bad ones.
    """
    bad = [c for c in budgets if c % chunk_size or not chunk_size <= c <= max_cores]
    if bad:
        raise ValueError(f'core budgets must be multiples of {chunk_size} in '
                         f'[{chunk_size}, {max_cores}], got {bad}')
    return sorted(set(budgets))
