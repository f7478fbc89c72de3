"""mmdet's two-stage detector with a streamed test mode: the whole image over bands of rows."""
from mmdet.models.detectors import TwoStageDetector
from mmdet.structures import SampleList
from torch import Tensor

from mmlinear.registry import MODELS
from ..streaming.band_planner import streamed_test_options
from ..streaming.detection import MASK_FORMATS, StreamedDetection
from ..utils import check_choice


@MODELS.register_module()
class StreamedTwoStageDetector(TwoStageDetector):
    """``TwoStageDetector`` (Mask R-CNN, Faster R-CNN) whose ``test_cfg`` may ask for the
    whole image to be streamed in bands of rows.

    mmdet's ``test_cfg`` holds one dict per stage, ``rpn`` and ``rcnn``; a third,
    ``streamed``, runs ``predict`` through :class:`StreamedDetection`: the backbone streams,
    the pyramid is built band by band, the RPN runs over bands of each level with one NMS over
    the image and the RoI heads read the rows their RoIs cover. It sees the whole image as
    mmdet's ``predict`` does (the same detections up to rounding) with memory bounded by the
    bands. Same arguments and weights as ``MaskRCNN`` / ``FasterRCNN``; in a config::

        model = dict(type='mmlinear.StreamedTwoStageDetector',
                     test_cfg=dict(streamed=dict(mem_limit_gb=4)))

    or on the command line of ``tools/test.py``: ``--cfg-options
    model.type=mmlinear.StreamedTwoStageDetector model.test_cfg.streamed.mem_limit_gb=4``.
    Without ``streamed`` (or with ``streamed=None``) it is mmdet's detector; ``streamed=dict()``
    streams with the default bands. Its keys are ``band_rows`` (the backbone's band, patch
    rows; deprecated spelling ``chunk_rows``), ``head_rows`` (rows of a pyramid level per
    band), ``mem_limit_gb``, ``buffer`` ('memory' or 'disk'), ``buffer_dir``, ``progress`` and
    ``mask_format``, as :meth:`StreamedDetection.predict` takes them.

    The results are mmdet's: boxes in the original image's coordinates with ``rescale``
    (clipped to each image's ``img_shape`` inside a padded batch), scores and labels, and
    masks pasted into the original image. ``mask_format`` chooses their form: 'bitmap' (the
    default), mmdet's (N, H, W) bool tensor, so that ``tools/test.py --out`` and
    ``--show-dir``, ``CocoMetric`` and any mmdet hook take them unchanged; or 'rle', COCO RLE
    dicts (``size``, ``counts``) encoded box by box, never a whole-image array, for images
    whose N whole-image maps would not fit in memory: ``CocoMetric`` takes them as they are,
    mmdet's ``DumpDetResults`` (``--out``) and visualiser (``--show-dir``) do not. The images
    of a batch are streamed one after the other, each with its own padding mask.
    """

    def predict(self,
                batch_inputs: Tensor,
                batch_data_samples: SampleList,
                rescale: bool = True) -> SampleList:
        """Detect the instances of a batch, streamed where ``test_cfg`` has ``streamed``.

        Args:
            batch_inputs (Tensor): (B, C, H, W) preprocessed images, with the padding mask
                the data preprocessor attaches, if any.
            batch_data_samples (list[DetDataSample]): Their data samples (``img_shape``,
                ``ori_shape``, ``scale_factor``).
            rescale (bool): Whether to give boxes and masks in the original images'
                coordinates. Defaults to True.

        Returns:
            list[DetDataSample]: The samples with ``pred_instances``: ``bboxes`` (N, 4),
            ``scores`` (N,), ``labels`` (N,) and with a mask head ``masks``, an (N, H, W)
            bool tensor, or N COCO RLEs when streamed with ``mask_format='rle'``.

        Raises:
            ValueError: An unknown key or ``mask_format`` in ``test_cfg.streamed``, or data
                samples that carry precomputed proposals (a streamed run makes its own).
        """
        options = self.test_cfg.get('streamed')
        if options is None:
            return super().predict(batch_inputs, batch_data_samples, rescale)
        options, task_options = streamed_test_options(
            options, 'test_cfg.streamed', task_keys=('mask_format', ))
        mask_format = task_options.get('mask_format', 'bitmap')
        check_choice('test_cfg.streamed.mask_format', mask_format, MASK_FORMATS)
        if any(sample.get('proposals') is not None for sample in batch_data_samples):
            raise ValueError('test_cfg.streamed makes its own proposals over bands: the data '
                             'samples carry precomputed ones; remove streamed to use them')
        streamed = StreamedDetection(self)
        padding_mask = getattr(batch_inputs, 'padding_mask', None)
        results = []
        for index, sample in enumerate(batch_data_samples):
            image = batch_inputs[index:index + 1]
            if padding_mask is not None:
                image.padding_mask = padding_mask[index:index + 1]
            results.append(
                streamed.predict(
                    image,
                    options=options,
                    img_meta=sample.metainfo,
                    rescale=rescale,
                    mask_format=mask_format))
        return self.add_pred_to_datasample(batch_data_samples, results)
