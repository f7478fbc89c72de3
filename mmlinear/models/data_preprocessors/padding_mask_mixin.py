"""Hand the padding of a batch to the backbone, for the detection / segmentation data
preprocessors."""
from typing import Any, Dict

from ..utils import attach_padding_mask


class PaddingMaskMixin:
    """After the preprocessing of the class it is mixed into (normalisation, padding, batch
    augments), attach the pixel padding mask (each data sample's ``img_shape`` against the
    batch size) to the batch tensor, where mmlinear backbones find it (see
    :func:`attach_padding_mask`).

    Mixed in before a data preprocessor class (mmdet's ``DetDataPreprocessor``, mmlinear's
    ``NChannelSegDataPreprocessor``); it changes nothing else, so a backbone that ignores the
    mask sees exactly that class's batch.
    """

    def forward(self, data: dict, training: bool = False) -> Dict[str, Any]:
        data = super().forward(data, training)
        samples = data.get('data_samples')
        if samples:
            img_shapes = [tuple(sample.metainfo['img_shape'][:2]) for sample in samples]
            attach_padding_mask(data['inputs'], img_shapes)
        return data
