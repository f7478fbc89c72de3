"""How closely Linear-InfSA's key weights follow the Perron vector of the full InfSA operator.

Pure InfSA attends through the normalised affinity ``A = relu(Q K^T / sqrt(d)) / ||.||_F``;
the stationary weight each key receives is the left Perron vector of ``A`` (its dominant
left eigenvector, non-negative for a non-negative matrix; found here by shifted power
iteration, :func:`left_perron_vector`). Linear-InfSA replaces it by one
power-iteration step from the query energies (:func:`~mmlinear.ops.linear_infsa_key_weights`)
and broadcasts the pooled value to every query. The InfSA paper reports the cosine between
the two; a plain cosine of two positive vectors is close to 1 for almost any pair (a uniform
vector already scores 0.97-0.99 against a Perron vector), so the comparison here is made on
centred vectors and by rank (Spearman), with the uniform vector's cosine as the baseline.
"""
import math
import warnings
from typing import Dict, List

import torch
from torch import Tensor, nn

from mmlinear.ops import linear_infsa_key_weights, pure_infsa_scores

#: InfViT attention types whose query and key projections define the InfSA operator.
ALIGNED_ATTN_TYPES = ('linear', 'pure')

#: Power iteration stops once ``||x A - r x||_1 <= PERRON_TOLERANCE * r`` for the iterate ``x``
#: (summing to 1) and its radius estimate ``r``, in float64.
PERRON_TOLERANCE = 1e-12
#: ... or after this many steps, with a warning.
PERRON_MAX_ITERATIONS = 20000


def is_nilpotent(matrix: Tensor) -> Tensor:
    """Whether non-negative square matrices are nilpotent (spectral radius 0).

    A non-negative matrix is nilpotent exactly when the directed graph of its non-zero entries
    has no cycle, i.e. when ``P^N = 0`` for its 0/1 pattern ``P``: decided exactly by repeated
    squaring of the pattern, with no threshold on any value.

    Args:
        matrix (Tensor): (..., N, N) non-negative.

    Returns:
        Tensor: (...) bool.
    """
    pattern = (matrix > 0).double()
    for _ in range(max(1, math.ceil(math.log2(matrix.shape[-1])))):  # until the power >= N
        pattern = (pattern @ pattern > 0).double()
    return ~pattern.flatten(-2).any(-1)


def left_perron_vector(matrix: Tensor,
                       tol: float = PERRON_TOLERANCE,
                       max_iter: int = PERRON_MAX_ITERATIONS) -> Tensor:
    """The left Perron vector of non-negative square matrices, by shifted power iteration.

    A general eigen-solver (``torch.linalg.eig``) fails on the ReLU affinities of trained heads
    (ill-conditioned, with many repeated zero eigenvalues), and plain power iteration need not
    converge on a periodic matrix (eigenvalues ``r * exp(2 pi i k / p)`` of one modulus).
    Iterating with ``A + r I`` instead, ``r`` the current estimate of the spectral radius,
    keeps the Perron vector (``A`` and ``A + r I`` share their eigenvectors) and makes the
    Perron root ``2 r`` strictly the largest in modulus (``|l + r| < 2 r`` for every other
    eigenvalue ``l``, ``|l| <= r``), so the iteration converges from the positive uniform start
    for every non-negative matrix that is not nilpotent: geometrically where the Perron root
    is semisimple, slowly (as ``1 / k``) where it is defective, which the tolerance catches.
    For a reducible matrix whose Perron root belongs to several blocks, the Perron vector is
    not unique: the iteration returns one non-negative Perron vector (the limit from the
    uniform start).

    Args:
        matrix (Tensor): (..., N, N) non-negative.
        tol (float): Convergence when ``||x A - r x||_1 <= tol * r``. Defaults to
            :data:`PERRON_TOLERANCE`.
        max_iter (int): Steps at most. Defaults to :data:`PERRON_MAX_ITERATIONS`.

    Returns:
        Tensor: (..., N) float64, non-negative, summing to 1 (``x A = r x`` with ``r`` the
        spectral radius); NaN for a nilpotent matrix (:func:`is_nilpotent`), which has no
        Perron vector. Warns when some matrices did not converge in ``max_iter`` steps
        (their vectors are the last iterates).
    """
    if matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2]:
        raise ValueError(f'expected (..., N, N) square matrices, got {tuple(matrix.shape)}')
    if not matrix.isfinite().all():
        raise ValueError('the matrices hold NaN or infinite entries (an overflow upstream?)')
    if (matrix < 0).any():
        raise ValueError('the Perron vector is defined here for non-negative matrices only')
    if max_iter < 1 or not tol > 0:
        raise ValueError(f'max_iter must be >= 1 and tol > 0, got {max_iter} and {tol}')
    matrix = matrix.double()
    nilpotent = is_nilpotent(matrix)
    # Scaled to a largest row sum of 1 (an upper bound of the spectral radius): the same
    # vectors, and a tolerance that reads the same at every scale of the scores.
    scale = matrix.sum(-1).amax(-1, keepdim=True)[..., None]
    matrix = matrix / scale.masked_fill(nilpotent[..., None, None], 1.0)
    vector = torch.full(
        matrix.shape[:-1], 1.0 / matrix.shape[-1], dtype=torch.float64, device=matrix.device)
    active = ~nilpotent
    for _ in range(max_iter):
        step = (vector[..., None, :] @ matrix)[..., 0, :]
        # x sums to 1, so sum(x A) is the weighted mean of the row sums: positive for a
        # positive x and a matrix that is not zero, and the radius when x is the vector.
        radius = step.sum(-1, keepdim=True)
        residual = (step - radius * vector).abs().sum(-1) / radius[..., 0]
        active = active & ~(residual <= tol)
        if not active.any():
            break
        shifted = step + radius * vector
        vector = torch.where(active[..., None], shifted / shifted.sum(-1, keepdim=True), vector)
    else:
        worst = residual[active].max().item()
        warnings.warn(
            f'left_perron_vector: {int(active.sum())} of {active.numel()} matrices did not '
            f'converge in {max_iter} iterations (largest relative residual {worst:.1e} > '
            f'tol {tol:.0e}; a defective Perron root converges slowly): their vectors are the '
            'last iterates')
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
