"""mmseg's sliding-window inference (``test_cfg.mode='slide'``) on an image taken as
:func:`~mmlinear.apis.segment_large_image` takes it, for comparisons with the whole image."""
from typing import Any, Sequence, Tuple

import torch
from mmengine.config import ConfigDict
from torch import Tensor, nn

from mmlinear.models.data_preprocessors import NormalizedRows


def segment_slide(model: nn.Module, image: Any, crop_size: Sequence[int],
                  stride: Sequence[int]) -> Tuple[Tensor, Tensor]:
    """Segment an image with mmseg's own ``EncoderDecoder.slide_inference``.

    The image is normalised as the model's data preprocessor would (the same rows
    :func:`~mmlinear.apis.segment_large_image` reads, here all at once: mmseg's slide mode
    takes the whole image as one tensor), then ``model.inference`` runs with
    ``test_cfg`` set to ``mode='slide'`` and the given crop and stride: each crop is
    segmented alone, and overlapping crops' logits are averaged. The model's own
    ``test_cfg`` is restored afterwards.

    Args:
        model (nn.Module): An mmseg ``EncoderDecoder`` in eval mode.
        image (array-like): (H, W, C) or (H, W) image, sliced by rows, with the channels the
            data preprocessor expects.
        crop_size (Sequence[int]): (height, width) of the crops.
        stride (Sequence[int]): (vertical, horizontal) step between crops.

    Returns:
        tuple[Tensor, Tensor]: The (H, W) class map (int64) and the (num_classes, H, W)
        float32 logits.

    Raises:
        ValueError: A crop or stride that is not two positive integers.
    """
    for name, value in (('crop_size', crop_size), ('stride', stride)):
        if len(value) != 2 or not all(int(v) == v and v > 0 for v in value):
            raise ValueError(f'{name} must be two positive integers (height, width), '
                             f'got {tuple(value)}')
    rows = NormalizedRows(image, model.data_preprocessor)
    _, _, height, width = rows.shape
    inputs = rows[:, :, 0:height]
    meta = dict(ori_shape=(height, width), img_shape=(height, width), pad_shape=(height, width))
    saved = model.test_cfg
    model.test_cfg = ConfigDict(
        mode='slide',
        crop_size=tuple(int(v) for v in crop_size),
        stride=tuple(int(v) for v in stride))
    try:
        with torch.no_grad():
            logits = model.inference(inputs, [meta])[0].float()
    finally:
        model.test_cfg = saved
    return logits.argmax(0), logits
