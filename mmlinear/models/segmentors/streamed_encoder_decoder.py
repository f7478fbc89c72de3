"""mmseg's EncoderDecoder with a third test mode, 'streamed': the whole image over bands."""
from typing import List

from mmseg.models.segmentors import EncoderDecoder
from torch import Tensor

from mmlinear.registry import MODELS
from ..decode_heads.context_window_uper_head import context_window_of
from ..streaming.band_planner import streamed_test_options
from ..streaming.segmentation import StreamedSegmentation
from ..utils import check_choice

TEST_MODES = ('whole', 'slide', 'streamed')


@MODELS.register_module()
class StreamedEncoderDecoder(EncoderDecoder):
    """``EncoderDecoder`` whose ``test_cfg`` may also ask for ``mode='streamed'``.

    mmseg tests in mode 'whole' (the image at once: every map of the head for the whole
    image) or 'slide' (overlapping crops, averaged, which loses the global context). Mode
    'streamed' sees the whole image as 'whole' does, with memory bounded by bands of rows:
    the backbone streams and the neck and UPerHead run band by band
    (:class:`StreamedSegmentation`); its logits equal mode 'whole' up to rounding. Same
    arguments and weights as ``EncoderDecoder``; in a config::

        model = dict(type='mmlinear.StreamedEncoderDecoder',
                     test_cfg=dict(mode='streamed', mem_limit_gb=4))

    ``test_cfg`` keys of mode 'streamed': ``band_rows`` (the backbone's band, patch rows;
    deprecated spelling ``chunk_rows``), ``head_rows`` (rows of the head's finest level per
    band), ``mem_limit_gb``, ``buffer`` ('memory' or 'disk'), ``buffer_dir`` and ``progress``, as
    :meth:`StreamedSegmentation.logit_bands` takes them.
    """

    def inference(self, inputs: Tensor, batch_img_metas: List[dict]) -> Tensor:
        """Logits of a batch in the ``test_cfg`` mode.

        Args:
            inputs (Tensor): (B, C, H, W) preprocessed images.
            batch_img_metas (list[dict]): Their meta information.

        Returns:
            Tensor: (B, num_classes, H, W) logits, before ``postprocess_result``.
        """
        mode = self.test_cfg.get('mode', 'whole')
        check_choice('test_cfg mode', mode, TEST_MODES)
        if mode != 'streamed':
            return super().inference(inputs, batch_img_metas)
        options = {key: value for key, value in self.test_cfg.items() if key != 'mode'}
        options, _ = streamed_test_options(options, "test_cfg (mode 'streamed')")
        B, _, H, W = inputs.shape
        logits = inputs.new_empty(B, self.decode_head.out_channels, H, W)
        streamed = StreamedSegmentation(self, context_window_of(self.decode_head))
        for (start, stop), band in streamed.logit_bands(inputs, options=options):
            logits[:, :, start:stop] = band.to(logits.device)
        return logits
