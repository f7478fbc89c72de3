"""LinearInfSAQuerySums and LinearInfSAKeyPool: Linear-InfSA's two fixed-size sums, band by
band."""
import pytest
import torch

from mmlinear.models.layers.linear_infsa_summary import LinearInfSAKeyPool, LinearInfSAQuerySums
from mmlinear.ops import linear_infsa_key_weights


@pytest.mark.parametrize('band', [1, 4, 13])
@pytest.mark.parametrize('masked', [False, True])
def test_band_sums_give_the_whole_sequence_key_weighted_inputs(band, masked):
    g = torch.Generator().manual_seed(0)
    B, H, N, d, C = 2, 3, 13, 4, 6
    q, k = (torch.randn(B, H, N, d, generator=g, dtype=torch.float64) for _ in range(2))
    x = torch.randn(B, N, C, generator=g, dtype=torch.float64)
    rho = torch.tensor([0.9, 0.5, 0.7], dtype=torch.float64)
    mask = None
    if masked:
        mask = torch.zeros(B, N, dtype=torch.bool)
        mask[1, 5:] = True
    query_sums = LinearInfSAQuerySums(eps=1e-6)
    spans = [(s, min(s + band, N)) for s in range(0, N, band)]
    for s, e in spans:
        query_sums.add(q[:, :, s:e], None if mask is None else mask[:, s:e])
    key_pool = LinearInfSAKeyPool(query_sums.result(), rho, eps=1e-6)
    for s, e in spans:
        key_pool.add(k[:, :, s:e], x[:, s:e], None if mask is None else mask[:, s:e])
    pooled, weight_sum = key_pool.result()
    weights = linear_infsa_key_weights(q, k, rho, mask, 1e-6)
    torch.testing.assert_close(pooled, torch.bmm(weights, x), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(weight_sum, weights.sum(-1, keepdim=True), rtol=1e-12, atol=1e-14)


def test_a_result_needs_a_band_first():
    with pytest.raises(RuntimeError, match='no queries have been added'):
        LinearInfSAQuerySums(1e-6).result()
    with pytest.raises(RuntimeError, match='no keys have been added'):
        LinearInfSAKeyPool(torch.randn(1, 1, 2), torch.tensor(0.5), 1e-6).result()
