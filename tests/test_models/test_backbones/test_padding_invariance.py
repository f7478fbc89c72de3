"""With a padding mask, an image's features do not depend on how far its batch was padded.

mmdet and mmseg pad every batch to its largest image (and to a size divisor), so without this
an image's detections would change with the other images drawn into its batch.
"""
import pytest
import torch

from mmlinear.models.backbones import VECA, InfViT, WeightFormer
from mmlinear.models.utils import pixel_padding_mask

WFM_TINY = dict(embed_dims=32, num_layers=3, feedforward_channels=64)  # block 1 is dynamic
BACKBONES = {
    'infvit-linear': lambda: InfViT(arch='test', attn_type='linear', out_type='featmap'),
    'infvit-pure': lambda: InfViT(arch='test', attn_type='pure', out_type='featmap'),
    'infvit-softmax': lambda: InfViT(arch='test', attn_type='softmax', out_type='featmap'),
    # The feature-map baselines leave padded keys out of their sums; Linformer's projection,
    # Nystromformer's landmarks and Agent Attention's agents mix positions, so padding moves
    # their outputs.
    'infvit-elu-linear': lambda: InfViT(arch='test', attn_type='elu_linear', out_type='featmap'),
    'infvit-performer': lambda: InfViT(arch='test', attn_type='performer', out_type='featmap'),
    'weightformer': lambda: WeightFormer(arch=WFM_TINY, out_type='featmap'),
    'veca': lambda: VECA(arch='test', active_cores=16, out_type='featmap'),
}


def padded_batch(image, canvas, partner_seed=1):
    """``image`` in the top-left corner of a zero-padded ``canvas``, beside a random partner
    image that fills the whole canvas (so the batch really is that large)."""
    H, W = canvas
    batch = torch.zeros(2, 3, H, W)
    batch[0, :, :image.shape[-2], :image.shape[-1]] = image
    batch[1] = torch.randn(3, H, W, generator=torch.Generator().manual_seed(partner_seed))
    return batch, pixel_padding_mask([tuple(image.shape[-2:]), (H, W)], (H, W))


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_features_do_not_change_when_the_batch_is_padded_further(name):
    torch.manual_seed(0)
    model = BACKBONES[name]().eval()
    # 64 x 96 pixels = a 4 x 6 token grid; an even grid, so WeightFormer's 2 x 2 pooling of
    # the image alone covers the same tokens as in a padded batch.
    image = torch.randn(3, 64, 96)
    with torch.no_grad():
        alone = model(image[None])[-1][0]
        for canvas in [(80, 112), (128, 160), (96, 256)]:
            batch, mask = padded_batch(image, canvas)
            padded = model(batch, padding_mask=mask)[-1][0, :, :4, :6]
            torch.testing.assert_close(padded, alone, atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_odd_token_grids_are_invariant_between_padded_sizes(name):
    """A 3 x 5 token image: WeightFormer's reference pooling drops the odd last row of an
    unpadded grid, so compare two padded batches with each other."""
    torch.manual_seed(0)
    model = BACKBONES[name]().eval()
    image = torch.randn(3, 40, 72)  # partial last patches: the grid is 3 x 5
    with torch.no_grad():
        outs = []
        for canvas in [(64, 96), (128, 192)]:
            batch, mask = padded_batch(image, canvas)
            outs.append(model(batch, padding_mask=mask)[-1][0, :, :3, :5])
    torch.testing.assert_close(outs[0], outs[1], atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_without_a_mask_the_reference_behaviour_is_kept(name):
    """No mask: the padding is ordinary input (as in the reference code), so it changes the
    features, and passing no mask equals the mask-free forward bit for bit."""
    torch.manual_seed(0)
    model = BACKBONES[name]().eval()
    image = torch.randn(3, 64, 96)
    batch, _ = padded_batch(image, (128, 160))
    with torch.no_grad():
        alone = model(image[None])[-1][0]
        unmasked = model(batch)[-1][0, :, :4, :6]
        explicit_none = model(batch, padding_mask=None)[-1][0, :, :4, :6]
    assert torch.equal(unmasked, explicit_none)
    assert (unmasked - alone).abs().max() > 1e-3


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_a_mask_attached_to_the_input_is_used(name):
    """The mmlinear data preprocessors attach the mask to the batch tensor."""
    torch.manual_seed(0)
    model = BACKBONES[name]().eval()
    batch, mask = padded_batch(torch.randn(3, 64, 96), (128, 160))
    with torch.no_grad():
        explicit = model(batch, padding_mask=mask)[-1]
        batch.padding_mask = mask
        attached = model(batch)[-1]
    assert torch.equal(explicit, attached)
    batch.padding_mask = mask[:, :64]
    with pytest.raises(ValueError, match=r'padding_mask must have shape \(B, H, W\)'):
        model(batch)
