"""One image through a trained mmlinear model of any of the three toolboxes.

The config's model decides the task: an mmpretrain classifier runs through mmpretrain's
``ImageClassificationInferencer``, an mmdet detector through ``DetInferencer`` and an mmseg
segmentor through ``MMSegInferencer``, so the pipeline, the checkpoint's class names and the
drawing are each toolbox's own. ``demo/image_demo.py`` is the command-line front end.
"""
import importlib
import os.path as osp
import tempfile
from typing import Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
from mmengine.config import Config
from mmengine.registry import DefaultScope

from .config_loading import load_config


class ImageTask(NamedTuple):
    """A task the image inference runs: which toolbox, which models, which inferencer.

    ``base_class`` is ``module:Class``, the base class every model of the task derives from.
    """
    name: str
    scope: str
    model_kind: str
    base_class: str
    example_types: str


IMAGE_TASKS = (
    ImageTask('classification', 'mmpretrain', 'classifier',
              'mmpretrain.models.classifiers:BaseClassifier', 'ImageClassifier'),
    ImageTask('detection', 'mmdet', 'detector', 'mmdet.models.detectors:BaseDetector',
              'MaskRCNN, RetinaNet'),
    ImageTask('segmentation', 'mmseg', 'segmentor', 'mmseg.models.segmentors:BaseSegmentor',
              'EncoderDecoder'),
)


class ImageInferenceResult(NamedTuple):
    """What one image gave.

    ``prediction`` holds numpy arrays: for classification ``label`` (int), ``scores``
    (num_classes,); for detection ``labels`` (N,), ``scores`` (N,), ``bboxes`` (N, 4) as
    x1, y1, x2, y2 in input-image pixels and, for instance segmentation, ``masks``
    (N, H, W) bool; for segmentation ``sem_seg`` (H, W) class indices. ``visualization`` is
    the drawn result, (H, W, 3) uint8 RGB at the input image's size.
    """
    task: ImageTask
    model_type: str
    classes: Sequence[str]
    prediction: Dict[str, object]
    visualization: np.ndarray
    summary: str


# What each task's runner hands back: class names, prediction, drawn picture, summary.
TaskOutput = Tuple[List[str], Dict[str, object], np.ndarray, str]


def _import_attr(path: str) -> type:
    module, name = path.split(':')
    return getattr(importlib.import_module(module), name)


def _supported_models() -> str:
    return '; '.join(f'{t.scope} {t.model_kind}s for {t.name} (subclasses of '
                     f'{t.base_class.split(":")[1]}, e.g. {t.example_types})' for t in IMAGE_TASKS)


def detect_task(cfg: Config) -> ImageTask:
    """The task of a config's model: classifier, detector or segmentor.

    The model type is resolved in each toolbox's registry, the config's ``default_scope``
    first (types such as ``mmlinear.X`` resolve under every scope), and the task is the one
    whose base class the model derives from.

    Args:
        cfg (Config): A model config (``model.type`` as a registry name or a class).

    Returns:
        ImageTask: One of :data:`IMAGE_TASKS`.

    Raises:
        ValueError: If the config has no model, or its model is none of the supported kinds
            (the message names them).
    """
    model = cfg.get('model')
    if not isinstance(model, dict) or 'type' not in model:
        raise ValueError(f'the config has no model with a type; image inference runs '
                         f'{_supported_models()}')
    model_type = model['type']
    tasks = sorted(IMAGE_TASKS, key=lambda task: task.scope != cfg.get('default_scope'))
    for task in tasks:
        if isinstance(model_type, str):
            registry = importlib.import_module(f'{task.scope}.registry').MODELS
            with registry.switch_scope_and_registry(task.scope) as scoped:
                model_cls = scoped.get(model_type)
        else:
            model_cls = model_type
        if isinstance(model_cls, type) and issubclass(model_cls, _import_attr(task.base_class)):
            return task
    name = model_type if isinstance(model_type, str) else model_type.__name__
    raise ValueError(f'the config\'s model {name!r} is not an image classifier, detector or '
                     f'segmentor; image inference runs {_supported_models()}')


def _classify(config: Config, checkpoint: str, image: str, device: str) -> TaskOutput:
    from mmpretrain.apis import ImageClassificationInferencer
    inferencer = ImageClassificationInferencer(config, pretrained=checkpoint, device=device)
    sample = inferencer(image, return_datasamples=True)[0]
    # mmpretrain 1.2 draws only into a window or a folder; the folder is thrown away.
    with tempfile.TemporaryDirectory() as folder:
        visualization = inferencer.visualize([image], [sample], show_dir=folder)[0]
    classes = list(inferencer.classes or [])
    scores = sample.pred_score.cpu().numpy()
    label = int(sample.pred_label.item())
    name = classes[label] if classes else str(label)
    ranked = np.argsort(-scores)[:3]
    summary = f'top-1 {name} (score {scores[label]:.3f}); scores: ' + ', '.join(
        f'{classes[i] if classes else i} {scores[i]:.3f}' for i in ranked)
    return classes, dict(label=label, scores=scores), visualization, summary


def _detect(config: Config, checkpoint: str, image: str, device: str,
            score_thr: float) -> TaskOutput:
    from mmdet.apis import DetInferencer
    inferencer = DetInferencer(config, weights=checkpoint, device=device, show_progress=False)
    outputs = inferencer(
        image, return_datasamples=True, return_vis=True, no_save_vis=True, pred_score_thr=score_thr)
    instances = outputs['predictions'][0].pred_instances
    kept = instances[instances.scores >= score_thr]
    classes = list(inferencer.model.dataset_meta.get('classes', []))
    prediction = dict(
        labels=kept.labels.cpu().numpy(),
        scores=kept.scores.cpu().numpy(),
        bboxes=kept.bboxes.cpu().numpy())
    if 'masks' in kept:
        prediction['masks'] = kept.masks.cpu().numpy().astype(bool)
    found = [
        f'{classes[label] if classes else label} {score:.2f} at '
        f'({", ".join(f"{v:.0f}" for v in box)})' for label, score, box in zip(
            prediction['labels'][:5], prediction['scores'][:5], prediction['bboxes'][:5])
    ]
    summary = f'{len(kept)} instances with score >= {score_thr}' + (
        ': ' + '; '.join(found) + (' ...' if len(kept) > 5 else '') if found else '')
    return classes, prediction, outputs['visualization'][0], summary


def _segment(config: Config, checkpoint: str, image: str, device: str) -> TaskOutput:
    from mmseg.apis import MMSegInferencer
    inferencer = MMSegInferencer(config, weights=checkpoint, device=device)
    outputs = inferencer(image, return_vis=True)
    sem_seg = np.asarray(outputs['predictions'])
    classes = list(inferencer.model.dataset_meta.get('classes', []))
    counts = np.bincount(sem_seg.ravel(), minlength=len(classes))
    shares = [(i, n / sem_seg.size) for i, n in enumerate(counts) if n]
    summary = f'{sem_seg.shape[0]}x{sem_seg.shape[1]} label map; pixels per class: ' + ', '.join(
        f'{classes[i] if i < len(classes) else i} {share:.1%}'
        for i, share in sorted(shares, key=lambda s: -s[1]))
    return classes, dict(sem_seg=sem_seg), outputs['visualization'], summary


def infer_image(image: str,
                config: str,
                checkpoint: str,
                device: str = 'cpu',
                score_thr: float = 0.3,
                cfg_options: Optional[dict] = None) -> ImageInferenceResult:
    """Run a trained model on one image with its toolbox's inferencer and draw the result.

    Args:
        image (str): Image file.
        config (str): Config file of a classifier, detector or segmentor.
        checkpoint (str): Its checkpoint (loaded weights-only; the class names come from
            its ``meta.dataset_meta``, as the toolboxes' runners save them).
        device (str): Where to run, e.g. 'cpu' or 'cuda:0'. Defaults to 'cpu'.
        score_thr (float): Detection only: the lowest score kept and drawn. Defaults to 0.3
            (mmdet's).
        cfg_options (dict, optional): Config overrides, as ``--cfg-options``.

    Returns:
        ImageInferenceResult: The task, the prediction, the drawn picture and a one-line
        summary.

    Raises:
        FileNotFoundError: If the image, the config or the checkpoint does not exist.
        ValueError: If the model is not a classifier, detector or segmentor.
    """
    for what, path in (('image', image), ('checkpoint', checkpoint)):
        if not osp.isfile(path):
            raise FileNotFoundError(f'{what} not found: {path}')
    cfg = load_config(config, cfg_options)
    task = detect_task(cfg)
    # mmpretrain's inferencer builds its pipeline in the current default scope, which may be
    # another toolbox's in this process (mmdet's and mmseg's inferencers set theirs).
    with DefaultScope.overwrite_default_scope(task.scope):
        if task.name == 'classification':
            outputs = _classify(cfg, checkpoint, image, device)
        elif task.name == 'detection':
            outputs = _detect(cfg, checkpoint, image, device, score_thr)
        else:
            outputs = _segment(cfg, checkpoint, image, device)
    classes, prediction, visualization, summary = outputs
    model_type = cfg.model['type']
    model_type = model_type if isinstance(model_type, str) else model_type.__name__
    return ImageInferenceResult(task, model_type, classes, prediction, visualization,
                                f'{task.name} ({task.scope} {model_type}): {summary}')


__all__ = ['IMAGE_TASKS', 'ImageInferenceResult', 'ImageTask', 'detect_task', 'infer_image']
