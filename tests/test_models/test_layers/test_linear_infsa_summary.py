"""LinearInfSASummary: Linear-InfSA's two fixed-size sums, band by band."""
import pytest
import torch

from mmlinear.models.layers.linear_infsa_summary import LinearInfSASummary
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
    summary = LinearInfSASummary(eps=1e-6)
    spans = [(s, min(s + band, N)) for s in range(0, N, band)]
    for s, e in spans:
        summary.add_queries(q[:, :, s:e], None if mask is None else mask[:, s:e])
    for s, e in spans:
        summary.add_keys(k[:, :, s:e], x[:, s:e], None if mask is None else mask[:, s:e])
    pooled, weight_sum = summary.pooled_inputs(rho)
    weights = linear_infsa_key_weights(q, k, rho, mask, 1e-6)
    torch.testing.assert_close(pooled, torch.bmm(weights, x), rtol=1e-12, atol=1e-14)
    torch.testing.assert_close(weight_sum, weights.sum(-1, keepdim=True), rtol=1e-12, atol=1e-14)


def test_passes_run_in_order():
    summary = LinearInfSASummary(1e-6)
    with pytest.raises(RuntimeError, match='add_queries first'):
        summary.central_query()
    q = torch.randn(1, 1, 3, 2)
    summary.add_queries(q)
    summary.add_keys(q, torch.randn(1, 3, 2))
    with pytest.raises(RuntimeError, match='first pass is over'):
        summary.add_queries(q)
    fresh = LinearInfSASummary(1e-6)
    with pytest.raises(RuntimeError, match='add_keys first'):
        fresh.pooled_inputs(torch.tensor(0.5))
