"""The padding mask a data preprocessor attaches to a padded batch cannot be lost silently:
a backbone that receives a replacement of that batch without the mask refuses it."""
import pytest
import torch

from mmlinear.models.backbones import InfViT
from mmlinear.models.utils import attach_padding_mask

LOST = 'the backbone received a tensor without it'


def backbone():
    torch.manual_seed(0)
    return InfViT(arch='test', attn_type='linear', out_type='featmap').eval()


def padded_batch():
    """Two images, 32 x 48 and 64 x 64, padded to 64 x 64 as a data preprocessor does."""
    batch = torch.randn(2, 3, 64, 64, generator=torch.Generator().manual_seed(0))
    return attach_padding_mask(batch, [(32, 48), (64, 64)])


@pytest.mark.parametrize('replace', [
    lambda x: x * 1,
    lambda x: x.clone(),
    lambda x: x.contiguous(memory_format=torch.channels_last),
    lambda x: x[:, :, :48],
])
def test_a_replaced_padded_batch_is_refused(replace):
    model, batch = backbone(), padded_batch()
    with torch.no_grad(), pytest.raises(RuntimeError, match=LOST):
        model(replace(batch))


def test_a_streamed_forward_refuses_it_too():
    model, batch = backbone(), padded_batch()
    with pytest.raises(RuntimeError, match=LOST):
        model.forward_streamed(batch.clone(), band_rows=2)


def test_the_batch_itself_or_a_mask_carried_over_is_used():
    model, batch = backbone(), padded_batch()
    mask = batch.padding_mask
    with torch.no_grad():
        attached = model(batch)[-1]
        explicit = model(batch.clone(), padding_mask=mask)[-1]
        copy = batch.clone()
        copy.padding_mask = mask
        # The hand-off is closed by the first backbone call; set it up again.
        attach_padding_mask(batch, [(32, 48), (64, 64)])
        carried = model(copy)[-1]
        unmasked = model(batch.clone())[-1]  # the hand-off closed: a new batch, no mask
    assert torch.equal(attached, explicit)
    assert torch.equal(attached, carried)
    assert (attached - unmasked).abs().max() > 1e-3


def test_a_batch_without_padding_may_be_replaced():
    model = backbone()
    batch = attach_padding_mask(torch.randn(2, 3, 64, 64), [(64, 64), (64, 64)])
    with torch.no_grad():
        assert torch.equal(model(batch.clone())[-1], model(batch)[-1])


def test_the_hand_off_ends_with_its_batch():
    model, batch = backbone(), padded_batch()
    other = batch.clone()
    del batch  # e.g. a data preprocessor's output that no backbone ran on
    with torch.no_grad():
        assert model(other)[-1].shape == (2, 32, 4, 4)  # 64 px, patch 16
