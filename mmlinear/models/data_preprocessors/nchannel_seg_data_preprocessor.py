"""mmseg's segmentation data preprocessor for images of any number of channels."""
from numbers import Number
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import torch
from mmengine.model import BaseDataPreprocessor
from mmseg.utils import stack_batch
from torch import Tensor

from mmlinear.registry import MODELS


def channel_values(name: str, values: Union[Number, Sequence[Number]]) -> Tensor:
    """``mean`` or ``std`` as a (C, 1, 1) float32 tensor; a ValueError unless it is one
    number or a flat, non-empty sequence of them."""
    tensor = torch.tensor(values, dtype=torch.float32)
    if tensor.dim() > 1 or tensor.numel() == 0:
        raise ValueError(f'{name} takes one number or one per channel, got {values!r}')
    return tensor.view(-1, 1, 1)


@MODELS.register_module()
class NChannelSegDataPreprocessor(BaseDataPreprocessor):
    """mmseg's ``SegDataPreProcessor`` for images of any number of channels.

    Same arguments and output as mmseg 1.2.2's ``SegDataPreProcessor``: each image is
    converted from BGR to RGB (or back) if configured and it has 3 channels, cast to float32,
    normalised with ``mean`` / ``std``, then padded and stacked by mmseg's ``stack_batch``
    (to ``size`` / ``size_divisor`` when training, to ``test_cfg``'s at test time). The
    normalisation is its own, on (C, 1, 1) buffers, so a multispectral segmentor (4, 13, ...
    channels) is normalised per channel whatever the installed mmseg: onedl-mmsegmentation
    1.4.2 builds its preprocessor on mmengine's ``ImgDataPreprocessor``, which refuses a mean
    or std of other than 1 or 3 values. mmlinear's segmentation configs use it with the
    padding mask, :class:`PaddingMaskSegDataPreprocessor`.

    Args:
        mean (Number | Sequence[Number], optional): One value for all channels or one per
            channel, subtracted after the colour conversion (so R, G, B order with
            ``bgr_to_rgb``). None (default): no normalisation.
        std (Number | Sequence[Number], optional): As ``mean``, divided by; given with
            ``mean``.
        size (tuple[int, int], optional): (H, W) the training batch is padded to.
        size_divisor (int, optional): The training batch's sides are padded to multiples of it.
        pad_val (Number): Value of padded image pixels. Defaults to 0.
        seg_pad_val (Number): Value of padded segmentation-map pixels. Defaults to 255.
        bgr_to_rgb (bool): Reverse the channels of 3-channel images (other images are left
            as they are, as mmseg does). Defaults to False.
        rgb_to_bgr (bool): The same conversion, the other way round. Defaults to False.
        batch_augments (Callable, optional): Called as ``batch_augments(inputs,
            data_samples)`` on the padded training batch, as mmseg calls it.
        test_cfg (dict, optional): ``size`` and / or ``size_divisor`` the test batch is
            padded to (its samples' metainfo records the padding); without it, test images
            are stacked unpadded.
    """

    def __init__(self,
                 mean: Optional[Union[Number, Sequence[Number]]] = None,
                 std: Optional[Union[Number, Sequence[Number]]] = None,
                 size: Optional[tuple] = None,
                 size_divisor: Optional[int] = None,
                 pad_val: Number = 0,
                 seg_pad_val: Number = 255,
                 bgr_to_rgb: bool = False,
                 rgb_to_bgr: bool = False,
                 batch_augments: Optional[Callable] = None,
                 test_cfg: Optional[dict] = None) -> None:
        super().__init__()
        if bgr_to_rgb and rgb_to_bgr:
            raise ValueError('bgr_to_rgb and rgb_to_bgr are the same conversion: set one of '
                             'them, not both')
        if (mean is None) != (std is None):
            raise ValueError(f'mean and std go together (both: normalise, neither: do not); '
                             f'got mean={mean!r}, std={std!r}')
        self.size = size
        self.size_divisor = size_divisor
        self.pad_val = pad_val
        self.seg_pad_val = seg_pad_val
        # mmseg's attribute names, which NormalizedRows reads to normalise a huge image by rows.
        self.channel_conversion = bgr_to_rgb or rgb_to_bgr
        self._enable_normalize = mean is not None
        if self._enable_normalize:
            # Checked on the given numbers, not the tensors: a model may be built on the meta
            # device (to compare its keys and shapes), where a tensor's values cannot be read.
            if 0 in (list(std) if isinstance(std, Sequence) else [std]):
                raise ValueError(f'std divides, so none of its values may be 0; got {std!r}')
            mean, std = channel_values('mean', mean), channel_values('std', std)
            # Not saved in checkpoints: they come from the config, as mmseg's.
            self.register_buffer('mean', mean, persistent=False)
            self.register_buffer('std', std, persistent=False)
        self.batch_augments = batch_augments
        self.test_cfg = test_cfg

    def normalize(self, image: Tensor) -> Tensor:
        """One image as the model takes it.

        Args:
            image (Tensor): (C, H, W), any dtype.

        Returns:
            Tensor: (C, H, W) float32: BGR to RGB if configured and C = 3, minus ``mean``,
            over ``std``.

        Raises:
            ValueError: If ``mean`` or ``std`` has other than 1 or C values.
        """
        channels = image.shape[0]
        if self.channel_conversion and channels == 3:
            image = image[[2, 1, 0], ...]
        image = image.float()
        if not self._enable_normalize:
            return image
        counts = (self.mean.shape[0], self.std.shape[0])
        if any(count not in (1, channels) for count in counts):
            raise ValueError(f'the data preprocessor\'s mean has {counts[0]} values and its '
                             f'std {counts[1]}, the image has {channels} channels: each takes '
                             f'1 value (all channels) or {channels} (one per channel)')
        return (image - self.mean) / self.std

    def forward(self, data: dict, training: bool = False) -> Dict[str, Any]:
        """Normalise the images, then pad and stack them with their ground truth.

        Args:
            data (dict): ``inputs``, a list of (C, H, W) images, and ``data_samples`` (their
                ``SegDataSample``; needed when training).
            training (bool): Pad to ``size`` / ``size_divisor`` and run the batch augments;
                else pad as ``test_cfg`` says, if it does. Defaults to False.

        Returns:
            dict: ``inputs`` (B, C, H', W') float32 and ``data_samples``, their padding
            recorded (``pad_shape``, ``padding_size``) and their ground truth padded with
            ``seg_pad_val`` when training.
        """
        data = self.cast_data(data)
        inputs: List[Tensor] = [self.normalize(image) for image in data['inputs']]
        data_samples = data.get('data_samples', None)
        if training:
            if data_samples is None:
                raise ValueError('training needs the data samples: their ground truth is '
                                 'padded with the images')
            inputs, data_samples = stack_batch(
                inputs=inputs,
                data_samples=data_samples,
                size=self.size,
                size_divisor=self.size_divisor,
                pad_val=self.pad_val,
                seg_pad_val=self.seg_pad_val)
            if self.batch_augments is not None:
                inputs, data_samples = self.batch_augments(inputs, data_samples)
            return dict(inputs=inputs, data_samples=data_samples)
        sizes = sorted({tuple(image.shape[1:]) for image in inputs})
        if len(sizes) > 1:
            raise ValueError(f'the images of a test batch must have one size, got {sizes}')
        if self.test_cfg:
            inputs, pad_infos = stack_batch(
                inputs=inputs,
                size=self.test_cfg.get('size', None),
                size_divisor=self.test_cfg.get('size_divisor', None),
                pad_val=self.pad_val,
                seg_pad_val=self.seg_pad_val)
            for data_sample, pad_info in zip(data_samples, pad_infos):
                data_sample.set_metainfo(pad_info)
        else:
            inputs = torch.stack(inputs, dim=0)
        return dict(inputs=inputs, data_samples=data_samples)
