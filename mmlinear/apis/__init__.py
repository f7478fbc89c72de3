"""What the tools share: building models by name, reading images, counting FLOPs, setting up
runs and running a config's test loop, converting ViT checkpoints to InfViT, running one image
through a trained model, segmenting and detecting on a whole image of any size (where mmseg and
mmdet are installed), and (in :mod:`mmlinear.apis.benchmark`) measuring speed and memory.

This layer sits above :mod:`mmlinear.models` and :mod:`mmlinear.engine`; the scripts in
``tools/`` import it, and nothing below it may.
"""
import importlib.util

from .flops import count_attention_interactions, count_flops, count_params, count_patch_tokens
from .image_inference import IMAGE_TASKS, ImageInferenceResult, ImageTask, detect_task, infer_image
from .images import IMAGE_EXTENSIONS, list_images, load_images
from .model_presets import (BACKBONE_PRESETS, IMAGENET_MEAN, IMAGENET_STD, backbone_config,
                            build_backbone, build_classifier, input_normalization)
from .runner_setup import (SCOPES, add_common_arguments, check_dataset_paths, close_launcher,
                           enable_amp, fix_dataloaders, load_config, pair_checkpoints,
                           parse_tool_args, prepare_launcher, set_work_dir, toolbox_scope,
                           torchrun_attempt)
from .test_runner import build_test_runner, run_test_loop
from .vit_conversion import ConvertedViT, convert_vit_checkpoint, save_converted

__all__ = [
    'BACKBONE_PRESETS', 'ConvertedViT', 'IMAGENET_MEAN', 'IMAGENET_STD', 'IMAGE_EXTENSIONS',
    'IMAGE_TASKS', 'ImageInferenceResult', 'ImageTask', 'SCOPES', 'add_common_arguments',
    'backbone_config', 'build_backbone', 'build_classifier', 'build_test_runner',
    'check_dataset_paths', 'close_launcher', 'convert_vit_checkpoint',
    'count_attention_interactions', 'count_flops', 'count_params', 'count_patch_tokens',
    'detect_task', 'enable_amp', 'fix_dataloaders', 'infer_image', 'input_normalization',
    'list_images', 'load_config', 'load_images', 'pair_checkpoints', 'parse_tool_args',
    'prepare_launcher', 'run_test_loop', 'save_converted', 'set_work_dir', 'toolbox_scope',
    'torchrun_attempt'
]

if importlib.util.find_spec('mmseg') is not None:
    from .large_image_segmentation import segment_large_image  # noqa: F401
    __all__.append('segment_large_image')
if importlib.util.find_spec('mmdet') is not None and importlib.util.find_spec('mmseg'):
    from .large_image_detection import detect_large_image  # noqa: F401
    __all__.append('detect_large_image')
