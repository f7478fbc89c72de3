"""What a user calls from Python: building models by name (presets), loading a config, running
one image through a trained model, segmenting and detecting on a whole image of any size (where
mmseg and mmdet are installed) read from files of any kind (GeoTIFF, OME-TIFF, whole-slide
images, ...), many such images as one resumable run shared between processes
(:func:`run_batch` over :func:`collect_inputs`, its manifest in :mod:`.run_manifest`),
counting FLOPs, parameters and attention interactions and converting ViT checkpoints to
InfViT. Their modules hold more: the readers (:mod:`.rasters`, :mod:`.ome_tiff`,
:mod:`.whole_slide`, :mod:`.channel_view`), the writers and scorers of what the whole-image
APIs give (:mod:`.detection_files`: COCO and GeoJSON; :mod:`.class_map_iou`: mIoU of a class
map of any size) and the ONNX export (:mod:`.onnx_export`), each importing its optional
packages itself.

This layer sits above :mod:`mmlinear.models` and :mod:`mmlinear.engine`; the command-line glue
of the scripts in ``tools/`` (argument parsing, launchers, the benchmark harness) is
:mod:`mmlinear.cli`, one floor up: nothing here imports it, and nothing below imports this.
"""
import importlib.util

from mmlinear.models.streaming import BUFFERS
from mmlinear.models.streaming.band_planner import BandPlan
from mmlinear.models.utils.windowed_pyramid_pooling import WHOLE_MAP
from .batch_run import BatchResult, StopSignals, run_batch
from .config_loading import SCOPES, load_config, toolbox_scope
from .flops import (count_attention_interactions, count_block_flops, count_flops, count_params,
                    count_patch_tokens)
from .image_batch import collect_inputs, output_names
from .image_inference import IMAGE_TASKS, ImageInferenceResult, ImageTask, detect_task, infer_image
from .images import IMAGE_EXTENSIONS, list_images, load_images
from .large_image_inputs import open_image
from .large_image_plan import band_planner, plan_large_image
from .model_presets import (BACKBONE_PRESETS, IMAGENET_MEAN, IMAGENET_STD, backbone_config,
                            build_backbone, build_classifier, input_normalization)
from .vit_conversion import ConvertedViT, convert_vit_checkpoint, save_converted

__all__ = [
    'BACKBONE_PRESETS', 'BUFFERS', 'BandPlan', 'BatchResult', 'ConvertedViT', 'IMAGENET_MEAN',
    'IMAGENET_STD', 'IMAGE_EXTENSIONS', 'IMAGE_TASKS', 'ImageInferenceResult', 'ImageTask',
    'SCOPES', 'StopSignals', 'WHOLE_MAP', 'backbone_config', 'band_planner', 'build_backbone',
    'build_classifier', 'collect_inputs', 'convert_vit_checkpoint', 'count_attention_interactions',
    'count_block_flops', 'count_flops', 'count_params', 'count_patch_tokens', 'detect_task',
    'infer_image', 'input_normalization', 'list_images', 'load_config', 'load_images', 'open_image',
    'output_names', 'plan_large_image', 'run_batch', 'save_converted', 'toolbox_scope'
]

if importlib.util.find_spec('mmseg') is not None:
    from .large_image_segmentation import segment_large_image  # noqa: F401
    __all__.append('segment_large_image')
if importlib.util.find_spec('mmdet') is not None:
    from .large_image_detection import detect_large_image  # noqa: F401
    __all__.append('detect_large_image')
