"""PaddedCrossEntropyLoss: mmseg's class-weighted cross-entropy, with padding (label 255)
left out of the mean instead of failing."""
import mmseg
import pytest
import torch
import torch.nn.functional as F
from mmengine.utils import digit_version
from mmseg.models.losses import CrossEntropyLoss

from mmlinear.models.losses import PaddedCrossEntropyLoss

CLASS_WEIGHT = [1.0, 4.0, 4.9, 6.0]
IGNORE = 255


def logits_and_labels(batch=2, size=8, seed=0):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, len(CLASS_WEIGHT), size, size, generator=generator)
    labels = torch.randint(0, len(CLASS_WEIGHT), (batch, size, size), generator=generator)
    return logits, labels


def test_without_padding_it_is_mmsegs_loss():
    logits, labels = logits_and_labels()
    expected = CrossEntropyLoss(class_weight=CLASS_WEIGHT)(logits, labels, ignore_index=IGNORE)
    loss = PaddedCrossEntropyLoss(class_weight=CLASS_WEIGHT)(logits, labels, ignore_index=IGNORE)
    torch.testing.assert_close(loss, expected)


def test_padding_is_left_out_of_the_weighted_mean():
    """A batch whose second image is padded: the loss is the class-weighted mean over the
    labelled pixels, and whatever the logits are on the padding, it does not move."""
    logits, labels = logits_and_labels()
    labels[1, 5:] = IGNORE
    labels[1, :, 6:] = IGNORE
    loss = PaddedCrossEntropyLoss(class_weight=CLASS_WEIGHT)(logits, labels, ignore_index=IGNORE)
    weight = torch.tensor(CLASS_WEIGHT)
    valid = labels != IGNORE
    per_pixel = F.cross_entropy(
        logits, labels, weight=weight, reduction='none', ignore_index=IGNORE)
    torch.testing.assert_close(loss, per_pixel.sum() / weight[labels[valid]].sum())
    logits[1, :, 5:] = 100.0
    torch.testing.assert_close(
        PaddedCrossEntropyLoss(class_weight=CLASS_WEIGHT)(logits, labels, ignore_index=IGNORE),
        loss)


def test_mmsegs_loss_fails_where_it_does_not_or_gives_the_same_mean():
    """Why the class exists: mmseg 1.2.2's loss with class weights looks the ignored label
    up and fails. onedl-mmsegmentation 1.4.2 (the maintained stack) looks up the labelled
    pixels only, the divisor this class takes, so there the two losses are equal."""
    logits, labels = logits_and_labels(batch=1)
    labels[0, -1] = IGNORE
    mmseg_loss = CrossEntropyLoss(class_weight=CLASS_WEIGHT)
    if digit_version(mmseg.__version__) < digit_version('1.4.0'):
        with pytest.raises(IndexError):
            mmseg_loss(logits, labels, ignore_index=IGNORE)
    else:
        torch.testing.assert_close(
            mmseg_loss(logits, labels, ignore_index=IGNORE),
            PaddedCrossEntropyLoss(class_weight=CLASS_WEIGHT)(logits, labels, ignore_index=IGNORE))


@pytest.mark.parametrize('option', ['use_sigmoid', 'use_mask'])
def test_other_criteria_are_refused(option):
    with pytest.raises(ValueError, match='softmax'):
        PaddedCrossEntropyLoss(**{option: True})
