"""How closely Linear-InfSA's key weights follow the Perron vector of the full InfSA operator.

Pure InfSA attends through the normalised affinity ``A = relu(Q K^T / sqrt(d)) / ||.||_F``;
the stationary weight each key receives is the left Perron vector of ``A`` (its dominant
left eigenvector, non-negative for a non-negative matrix). Linear-InfSA replaces it by one
power-iteration step from the query energies (:func:`~mmlinear.ops.linear_infsa_key_weights`)
and broadcasts the pooled value to every query. The InfSA paper reports the cosine between
the two; a plain cosine of two positive vectors is close to 1 for almost any pair (a uniform
vector already scores 0.97-0.99 against a Perron vector), so the comparison here is made on
centred vectors and by rank (Spearman), with the uniform vector's cosine as the baseline.
"""
from typing import Dict, List

import torch
from torch import Tensor, nn

from mmlinear.ops import linear_infsa_key_weights, pure_infsa_scores

#: InfViT attention types whose query and key projections define the InfSA operator.
ALIGNED_ATTN_TYPES = ('linear', 'pure')

#: Spectral radius, relative to the largest entry, below which a non-negative matrix is taken
#: as nilpotent (no Perron vector).
MIN_SPECTRAL_RADIUS = 1e-9


def left_perron_vector(matrix: Tensor) -> Tensor:
    """The left Perron vector of non-negative square matrices.

    A non-negative matrix whose spectral radius is 0 (nilpotent: the ReLU affinity of a
    trained head can be, when its positive scores all point one way along some order of the
    tokens) has no Perron vector: its entries are NaN.

    Args:
        matrix (Tensor): (..., N, N) non-negative.

    Returns:
        Tensor: (..., N) float64, the left eigenvector of the eigenvalue with the largest
        real part (the spectral radius), signed to a positive sum and scaled to sum to 1; NaN
        where the spectral radius is at most :data:`MIN_SPECTRAL_RADIUS` times the largest
        entry.
    """
    matrix = matrix.double()
    values, vectors = torch.linalg.eig(matrix.transpose(-2, -1))
    radius, index = values.real.max(-1)
    vector = vectors.real.gather(-1, index[..., None, None].expand(*vectors.shape[:-1], 1))[..., 0]
    vector = vector / vector.sum(-1, keepdim=True)
    nilpotent = radius <= MIN_SPECTRAL_RADIUS * matrix.abs().amax((-2, -1))
    return vector.masked_fill(nilpotent[..., None], float('nan'))


def _cosine(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp(min=1e-300)


def _centred(a: Tensor) -> Tensor:
    return a - a.mean(-1, keepdim=True)


def _ranks(a: Tensor) -> Tensor:
    ranks = a.argsort(-1).argsort(-1).double()
    return ranks.masked_fill(a.isnan().any(-1, keepdim=True), float('nan'))


def spearman(a: Tensor, b: Tensor) -> Tensor:
    """Spearman rank correlation along the last dimension (ties broken by position; NaN
    where either vector holds a NaN).

    Args:
        a (Tensor): (..., N).
        b (Tensor): (..., N).

    Returns:
        Tensor: (...) float64 in [-1, 1].
    """
    return _cosine(_centred(_ranks(a)), _centred(_ranks(b)))


def perron_alignment(q: Tensor, k: Tensor) -> Dict[str, Tensor]:
    """Linear-InfSA's key weights against the left Perron vector of the InfSA operator on
    the same queries and keys.

    Args:
        q (Tensor): (B, H, N, d) queries, before scaling.
        k (Tensor): (B, H, N, d) keys.

    Returns:
        dict[str, Tensor]: (B, H) float64 each: ``centred_cosine`` and ``spearman`` of the key
        weights against the Perron vector, their plain ``cosine``, and ``uniform_cosine``,
        the plain cosine a uniform vector reaches against the same Perron vector; NaN where
        the operator has no Perron vector (:func:`left_perron_vector`).
    """
    if q.shape != k.shape or q.dim() != 4:
        raise ValueError(f'q and k must be (B, H, N, d) of one shape, got {tuple(q.shape)} '
                         f'and {tuple(k.shape)}')
    one = torch.ones((), dtype=q.dtype, device=q.device)
    weights = linear_infsa_key_weights(q, k, one).double()
    perron = left_perron_vector(pure_infsa_scores(q, k, one))
    uniform = torch.ones_like(perron)
    return dict(
        centred_cosine=_cosine(_centred(weights), _centred(perron)),
        spearman=spearman(weights, perron),
        cosine=_cosine(weights, perron),
        uniform_cosine=_cosine(uniform, perron))


def spectral_alignment(backbone: nn.Module, x: Tensor) -> List[Dict[str, Tensor]]:
    """:func:`perron_alignment` in every block of an InfViT on a batch of images.

    Each block's attention input (LayerNorm of its tokens, the CLS token included) is caught
    by a forward hook during one forward pass, and its queries and keys are computed by the
    layer's own projections.

    Args:
        backbone (nn.Module): An :class:`~mmlinear.models.InfViT` whose ``attn_type`` is one
            of :data:`ALIGNED_ATTN_TYPES`.
        x (Tensor): (B, 3, H, W) images, normalised as the backbone expects.

    Returns:
        list[dict[str, Tensor]]: Per block, the (B, H) metrics of :func:`perron_alignment`.
    """
    attn_type = getattr(backbone, 'attn_type', None)
    if attn_type not in ALIGNED_ATTN_TYPES:
        raise ValueError(f'the spectral alignment compares the key weights with the InfSA '
                         f'operator of the same projections: it needs an InfViT with attn_type '
                         f'in {ALIGNED_ATTN_TYPES}, got {type(backbone).__name__} with '
                         f'attn_type {attn_type!r}')
    inputs: List[Tensor] = []
    hooks = [
        block.attn.register_forward_hook(lambda module, args, out: inputs.append(args[0]))
        for block in backbone.blocks
    ]
    try:
        with torch.no_grad():
            backbone(x)
    finally:
        for hook in hooks:
            hook.remove()
    with torch.no_grad():
        return [
            perron_alignment(block.attn.queries(tokens), block.attn.keys(tokens))
            for block, tokens in zip(backbone.blocks, inputs)
        ]
