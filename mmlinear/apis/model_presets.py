"""Named backbone presets and config files, built the same way by every analysis tool.

The benchmark, FLOP counter, attention visualiser and elastic sweep all take a model as either
a preset name of ``BACKBONE_PRESETS`` (the three mmlinear backbones, InfViT-4L's body with
each token mixer of the InfSA paper's efficiency comparison, and the softmax ViT baselines of
matching width and depth, taken from mmpretrain so that the baseline is the toolbox's own ViT
with PyTorch's scaled-dot-product attention) or the path of a config file,
whose ``model.backbone`` (or ``model``) is built. The tools that need a whole classifier
(attention quality, the elastic sweep of a classifier config) build it with
:func:`build_classifier`.
"""
import copy
import os.path as osp
from typing import TYPE_CHECKING, Dict, Optional, Sequence, Tuple, Union

from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope
from torch import nn

from mmlinear.models import VECA, InfViT, WeightFormer
from mmlinear.models.layers import ATTN_TYPES

if TYPE_CHECKING:
    from mmengine.model import BaseModel


def _zoo_presets(backbone: type, prefix: str, archs: Sequence[str]) -> Dict[str, dict]:
    """Presets ``<prefix><arch>`` of a backbone, each naming an entry of its ``arch_zoo``.

    The architecture is referred to by its name, never restated, so a preset cannot drift
    from the backbone's own table.
    """
    missing = [arch for arch in archs if arch not in backbone.arch_zoo]
    if missing:
        raise KeyError(f'{backbone.__name__}.arch_zoo has no {", ".join(missing)}')
    return {
        f'{prefix}{arch}': dict(type=f'mmlinear.{backbone.__name__}', arch=arch)
        for arch in archs
    }


def _mmpretrain_vit(arch: Union[str, dict]) -> dict:
    return dict(type='mmpretrain.VisionTransformer', arch=arch, img_size=224, patch_size=16)


# InfViT's arch_zoo names already start with 'infvit-'.
_INFVIT_ARCHS = _zoo_presets(InfViT, '', ('infvit-4l', 'infvit-24l', 'infvit-demo', 'infvit-test'))
# The attentions of every InfViT architecture's presets.
_INFSA_ATTNS = ('linear', 'pure', 'softmax')
# Backbone options of the comparison's other mixers, where their defaults do not serve it.
# Linformer's projections are per position: with its defaults (the 197 tokens of 224 px,
# k = 197 // 4 = 49) it refuses 1024 px, the comparison's size. Its projections here cover
# the 4,097 tokens of 1024 px with the same k, so it runs at both sizes and costs per token
# what the 224-px model does (1.5 M parameters more, in the projections' unused columns at
# 224 px).
_COMPARISON_OPTIONS = {
    'linformer':
    dict(mixer_cfg=dict(max_tokens=1 + (1024 // 16)**2, proj_len=(1 + (224 // 16)**2) // 4))
}

BACKBONE_PRESETS: Dict[str, dict] = {
    **{
        f'{name}-{attn}': dict(preset, attn_type=attn)
        for name, preset in _INFVIT_ARCHS.items()
        for attn in _INFSA_ATTNS
    },
    # InfViT-4L's body with each other token mixer of the InfSA paper's efficiency comparison
    # ('infvit-4l-none', 'infvit-4l-elu_linear', ..., 'infvit-4l-agent': the attn_type verbatim),
    # so that all nine are timed in the same body.
    **{
        f'infvit-4l-{attn}':
        dict(_INFVIT_ARCHS['infvit-4l'], attn_type=attn, **_COMPARISON_OPTIONS.get(attn, {}))
        for attn in ATTN_TYPES if attn not in _INFSA_ATTNS
    },
    **_zoo_presets(WeightFormer, 'weightformer-', ('t', 's', 'b', 'test')),
    **_zoo_presets(VECA, 'veca-', ('small', 'splus', 'base', 'large')),
    # Softmax baselines: mmpretrain's ViT, whose attention is F.scaled_dot_product_attention,
    # with the width and depth of an InfViT architecture.
    'vit-4l-sdpa':
    _mmpretrain_vit(dict(InfViT.arch_zoo['infvit-4l'])),
    'vit-test-sdpa':
    _mmpretrain_vit(dict(InfViT.arch_zoo['infvit-test'])),
    'deit-t-sdpa':
    _mmpretrain_vit('deit-tiny'),
    'deit-s-sdpa':
    _mmpretrain_vit('deit-small'),
    # ViT-B/16, VECA-B's width, depth and MLP cost (its SwiGLU's 3 x 2048 matches 2 x 3072):
    # the softmax block VECA's attention-block FLOPs are set against (DINOv3-B's shape, less
    # its four register tokens).
    'vit-b-sdpa':
    _mmpretrain_vit('base'),
}


def backbone_config(model: str) -> Tuple[dict, str]:
    """The backbone config of a preset name or a config file, and the scope to build it in.

    Args:
        model (str): A key of ``BACKBONE_PRESETS`` or the path of a config file (``.py``)
            whose ``model.backbone`` (or ``model`` when it has no backbone) is taken.

    Returns:
        tuple[dict, str]: A copy of the backbone config and the default scope
        ('mmpretrain' for presets, the config's ``default_scope`` otherwise).

    Raises:
        ValueError: If ``model`` is neither a preset nor an existing config file.
    """
    if model in BACKBONE_PRESETS:
        return copy.deepcopy(BACKBONE_PRESETS[model]), 'mmpretrain'
    if model.endswith('.py') and osp.isfile(model):
        import mmlinear  # noqa: F401  (registers the ``mmlinear::`` config scope)
        cfg = Config.fromfile(model)
        model_cfg = cfg.model.get('backbone', cfg.model)
        return copy.deepcopy(dict(model_cfg)), cfg.get('default_scope', 'mmpretrain')
    raise ValueError(f'unknown model {model!r}: give a config file path or one of the '
                     f'presets {", ".join(BACKBONE_PRESETS)}')


def build_backbone(model: str,
                   overrides: Optional[dict] = None,
                   checkpoint: Optional[str] = None) -> nn.Module:
    """Build a preset or a config's backbone, initialised and optionally loaded.

    Args:
        model (str): A key of ``BACKBONE_PRESETS`` or a config file path.
        overrides (dict, optional): Keys replaced in the backbone config, e.g.
            ``dict(out_type='featmap')``.
        checkpoint (str, optional): A checkpoint of the backbone or of a whole model (its
            ``backbone.`` keys are taken). Without it the weights are random.

    Returns:
        nn.Module: The backbone.
    """
    cfg, scope = backbone_config(model)
    cfg.update(overrides or {})
    init_default_scope(scope)
    backbone = MODELS.build(cfg)
    if hasattr(backbone, 'init_weights'):
        backbone.init_weights()
    if checkpoint:
        from mmengine.runner import CheckpointLoader
        state = CheckpointLoader.load_checkpoint(checkpoint, map_location='cpu')
        state = state.get('state_dict', state)
        if any(key.startswith('backbone.') for key in state):
            # A whole model's checkpoint: keep the backbone, drop neck and head.
            state = {
                key[len('backbone.'):]: value
                for key, value in state.items() if key.startswith('backbone.')
            }
        backbone.load_state_dict(state, strict=True)
    return backbone


IMAGENET_MEAN = (123.675, 116.28, 103.53)
IMAGENET_STD = (58.395, 57.12, 57.375)


def input_normalization(model: str) -> Tuple[Sequence[float], Sequence[float]]:
    """The RGB mean and std (0-255 scale) a model expects.

    Args:
        model (str): A preset (ImageNet statistics) or a config file (its
            ``data_preprocessor`` / ``model.data_preprocessor`` mean and std, else ImageNet).

    Returns:
        tuple[Sequence[float], Sequence[float]]: mean and std.
    """
    if model in BACKBONE_PRESETS:
        return IMAGENET_MEAN, IMAGENET_STD
    import mmlinear  # noqa: F401  (registers the ``mmlinear::`` config scope)
    cfg = Config.fromfile(model)
    pre = cfg.model.get('data_preprocessor') or cfg.get('data_preprocessor') or {}
    return tuple(pre.get('mean', IMAGENET_MEAN)), tuple(pre.get('std', IMAGENET_STD))


def build_classifier(config: Union[str, Config], checkpoint: Optional[str] = None) -> 'BaseModel':
    """An mmpretrain classifier from a config, initialised or loaded, in eval mode.

    Args:
        config (str | Config): A config file path or a loaded config whose ``model`` is a
            classifier (it has a ``head``).
        checkpoint (str, optional): A checkpoint of the whole classifier, loaded strictly.
            Without it the weights are random.

    Returns:
        BaseModel: The classifier, whose ``data_preprocessor`` is the config's.

    Raises:
        ValueError: If the config's model has no classification head.
    """
    cfg = Config.fromfile(config) if isinstance(config, str) else config.copy()
    if 'head' not in cfg.model:
        raise ValueError(f'{cfg.filename} has no classification head; the perturbation metrics '
                         f'need a classifier config (mmpretrain ImageClassifier)')
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    # As mmengine's Runner: a top-level data_preprocessor (mmpretrain's convention) is the
    # model's unless the model sets its own; without it the inputs would not be normalised.
    if cfg.get('data_preprocessor') is not None:
        cfg.model.setdefault('data_preprocessor', cfg.data_preprocessor)
    model = MODELS.build(cfg.model)
    model.init_weights()
    if checkpoint:
        from mmengine.runner import load_checkpoint
        load_checkpoint(model, checkpoint, map_location='cpu', strict=True)
    model.eval()
    return model
