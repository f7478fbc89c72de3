"""VECADistillLoss: the reference loss (veca/losses.py of the official code), term by term."""
import pytest
import torch

from mmlinear.models import VECADistillLoss


def reference_terms(g_s, z_s, t_cls, t_z, eps=1e-6):
    """The reference's formula written out in float64."""
    g_s, z_s, t_cls, t_z = (t.double() for t in (g_s, z_s, t_cls, t_z))

    def cos(a, b):
        return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(eps)

    return ((1 - cos(g_s, t_cls)).mean(), (1 - cos(z_s, t_z)).mean(), ((z_s - t_z)**2).mean())


def random_features(seed=0, batch=3, patches=5, dims=8):
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randn(*shape, generator=gen) * 2
        for shape in ((batch, dims), (batch, patches, dims), (batch, dims), (batch, patches, dims))
    ]


def test_terms_match_the_reference_formula():
    feats = random_features()
    losses = VECADistillLoss()(*feats)
    assert set(losses) == {'loss_global', 'loss_patch_cos', 'loss_patch_mse'}
    for value, expected in zip(losses.values(), reference_terms(*feats)):
        assert value.dtype == torch.float32
        assert value.item() == pytest.approx(expected.item(), rel=1e-5)
        assert value.item() > 0


def test_weights_scale_the_patch_terms_only():
    feats = random_features(1)
    plain = VECADistillLoss()(*feats)
    weighted = VECADistillLoss(dense_weight=0.5, mse_weight=3.0)(*feats)
    assert weighted['loss_global'].item() == pytest.approx(plain['loss_global'].item())
    assert weighted['loss_patch_cos'].item() == pytest.approx(0.5 * plain['loss_patch_cos'])
    assert weighted['loss_patch_mse'].item() == pytest.approx(1.5 * plain['loss_patch_mse'])


def test_identical_features_give_zero_and_scale_only_the_mse():
    g, z, _, _ = random_features(2)
    same = VECADistillLoss()(g, z, g.clone(), z.clone())
    assert all(abs(v.item()) < 1e-6 for v in same.values())
    scaled = VECADistillLoss()(g, z, 2 * g, 2 * z)  # cosine ignores scale, MSE does not
    assert abs(scaled['loss_global'].item()) < 1e-6
    assert scaled['loss_patch_mse'].item() == pytest.approx((z**2).mean().item(), rel=1e-5)


def test_computed_in_float32_under_bfloat16_autocast():
    feats = [f.bfloat16() for f in random_features(3)]
    with torch.autocast('cpu', dtype=torch.bfloat16):
        losses = VECADistillLoss()(*feats)
    for value, expected in zip(losses.values(), reference_terms(*feats)):
        assert value.dtype == torch.float32
        assert value.item() == pytest.approx(expected.item(), rel=1e-5)


def test_bad_inputs_raise():
    g, z, t, tz = random_features()
    with pytest.raises(ValueError, match='equal shapes'):
        VECADistillLoss()(g, z, t, tz[:, :4])
    with pytest.raises(ValueError, match='dense_weight must be >= 0'):
        VECADistillLoss(dense_weight=-1)
