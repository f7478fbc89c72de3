"""Convert a pretrained ViT checkpoint (mmpretrain, timm, Hugging Face) into an InfViT one.

InfViT has the body of a plain ViT (CLS token, learned positions, pre-norm blocks, final
LayerNorm) with separate q/k/v/out projections, so a ViT's weights map onto it one to one:
a packed ``qkv`` projection is split into its q, k and v thirds, the Hugging Face names are
renamed, and for the InfSA attention types the decay rho is added at its initial value
(InfSA has it, a ViT has not). With ``attn_type='softmax'`` the result computes exactly what
the source ViT computes.

Three source layouts are recognised by their key names:

- ``mmpretrain``: ``VisionTransformer`` / DeiT classifiers (``backbone.layers.{i}.attn.qkv``,
  ``ffn.layers.*``, ``ln1``; heads ``head.layers.head`` or ``head.fc``), also without the
  ``backbone.`` prefix;
- ``timm``: ``VisionTransformer`` (``blocks.{i}.attn.qkv``, ``mlp.fc1``, ``norm``, ``head``);
- ``huggingface``: ``ViTModel`` / ``ViTForImageClassification`` as ``save_pretrained`` writes
  them (``[vit.]encoder.layer.{i}.attention.attention.query``, ``layernorm``, ``pooler``,
  ``classifier``), and the module names of transformers 5 (``[vit.]layers.{i}.attention.q_proj``).

Width, depth, MLP width, patch and image size are read from the shapes; what the weights do
not hold (heads, LayerNorm epsilon) comes from the arguments, a Hugging Face ``config.json``
beside the weights, or the source library's default.

This module sits in :mod:`mmlinear.apis` because it builds the target model: rho's initial
value is taken from :class:`~mmlinear.models.layers.InfSAAttention` itself, and the result is
checked key by key against an :class:`~mmlinear.models.InfViT` on the meta device.
"""
import json
import os.path as osp
import pickle
import re
from collections import OrderedDict
from typing import Dict, List, NamedTuple, Optional, Pattern, Tuple

import torch
from torch import Tensor

from mmlinear.models import InfViT
from mmlinear.models.layers import InfSAAttention
from mmlinear.utils.atomic_write import atomic_output
from mmlinear.utils.checkpoint_conversion import (check_key_layout, load_state_dict_file,
                                                  strip_key_prefixes)

#: The attention types a ViT can be converted to ('none' has no attention to load).
CONVERTIBLE_ATTN_TYPES = ('linear', 'pure', 'softmax')
#: The head width of the standard ViT family, which gives the default head count.
VIT_HEAD_DIMS = 64
#: File names of Hugging Face weights in a model folder, in the order they are looked for.
HF_WEIGHT_FILES = ('model.safetensors', 'pytorch_model.bin')
#: Where training scripts nest the state dict in a torch checkpoint.
STATE_DICT_WRAPPERS = ('state_dict', 'model', 'module')


class ViTLayout(NamedTuple):
    """The key layout of one library's ViT.

    Attributes:
        name (str): The layout's name ('mmpretrain', 'timm', 'huggingface').
        signature (Pattern): Matches a key that only this layout has.
        description (str): The layout and its typical keys, for error messages.
        rules (tuple): ``(pattern, target)`` pairs: a source key that fully matches
            ``pattern`` becomes ``pattern.sub(target, key)``; a target with ``{qkv}`` is a
            packed (3C, ...) projection split into ``q``, ``k`` and ``v``.
        dropped (Pattern | None): Source keys with no counterpart in an InfViT classifier,
            left out on purpose (Hugging Face's pooler and mask token).
        layer_norm_eps (float): The library's LayerNorm epsilon for ViTs.
    """
    name: str
    signature: Pattern
    description: str
    rules: Tuple[Tuple[Pattern, str], ...]
    dropped: Optional[Pattern]
    layer_norm_eps: float


def _rules(*pairs: Tuple[str, str]) -> Tuple[Tuple[Pattern, str], ...]:
    return tuple((re.compile(pattern), target) for pattern, target in pairs)


_WB = r'(weight|bias)'
_BLOCK = r'backbone.blocks.\1'
_MMPRETRAIN = r'(?:backbone\.)?'
_HF = r'(?:vit\.)?'

LAYOUTS: Tuple[ViTLayout, ...] = (
    ViTLayout(
        name='mmpretrain',
        signature=re.compile(_MMPRETRAIN + r'layers\.\d+\.attn\.qkv\.weight'),
        description='mmpretrain VisionTransformer / DeiT ([backbone.]layers.{i}.attn.qkv, '
        'ffn.layers.*, ln1)',
        rules=_rules(
            (_MMPRETRAIN + r'(cls_token|pos_embed)', r'backbone.\1'),
            (_MMPRETRAIN + r'patch_embed\.projection\.' + _WB,
             r'backbone.patch_embed.projection.\1'),
            (_MMPRETRAIN + r'layers\.(\d+)\.(ln1|ln2)\.' + _WB, _BLOCK + r'.\2.\3'),
            (_MMPRETRAIN + r'layers\.(\d+)\.attn\.qkv\.' + _WB, _BLOCK + r'.attn.{qkv}_proj.\2'),
            (_MMPRETRAIN + r'layers\.(\d+)\.attn\.proj\.' + _WB, _BLOCK + r'.attn.out_proj.\2'),
            (_MMPRETRAIN + r'layers\.(\d+)\.ffn\.layers\.0\.0\.' + _WB, _BLOCK + r'.ffn.fc1.\2'),
            (_MMPRETRAIN + r'layers\.(\d+)\.ffn\.layers\.1\.' + _WB, _BLOCK + r'.ffn.fc2.\2'),
            (_MMPRETRAIN + r'ln1\.' + _WB, r'backbone.final_norm.\1'),
            (r'head\.(fc|layers\.head|layers\.pre_logits)\.' + _WB, r'head.\1.\2'),
        ),
        dropped=None,
        layer_norm_eps=1e-6),  # VisionTransformer's norm_cfg=dict(type='LN', eps=1e-6)
    ViTLayout(
        name='timm',
        signature=re.compile(r'blocks\.\d+\.attn\.qkv\.weight'),
        description='timm VisionTransformer (blocks.{i}.attn.qkv, mlp.fc1, norm, head)',
        rules=_rules(
            (r'(cls_token|pos_embed)', r'backbone.\1'),
            (r'patch_embed\.proj\.' + _WB, r'backbone.patch_embed.projection.\1'),
            (r'blocks\.(\d+)\.norm1\.' + _WB, _BLOCK + r'.ln1.\2'),
            (r'blocks\.(\d+)\.norm2\.' + _WB, _BLOCK + r'.ln2.\2'),
            (r'blocks\.(\d+)\.attn\.qkv\.' + _WB, _BLOCK + r'.attn.{qkv}_proj.\2'),
            (r'blocks\.(\d+)\.attn\.proj\.' + _WB, _BLOCK + r'.attn.out_proj.\2'),
            (r'blocks\.(\d+)\.mlp\.(fc1|fc2)\.' + _WB, _BLOCK + r'.ffn.\2.\3'),
            (r'norm\.' + _WB, r'backbone.final_norm.\1'),
            (r'head\.' + _WB, r'head.fc.\1'),
        ),
        dropped=None,
        layer_norm_eps=1e-6),  # timm's ViT: partial(nn.LayerNorm, eps=1e-6)
    ViTLayout(
        name='huggingface',
        signature=re.compile(_HF + r'(encoder\.layer\.\d+\.attention\.attention\.query|'
                             r'layers\.\d+\.attention\.q_proj)\.weight'),
        description='Hugging Face ViTModel / ViTForImageClassification '
        '([vit.]encoder.layer.{i}.attention.attention.query, layernorm, classifier)',
        rules=_rules(
            (_HF + r'embeddings\.cls_token', r'backbone.cls_token'),
            (_HF + r'embeddings\.position_embeddings', r'backbone.pos_embed'),
            (_HF + r'embeddings\.patch_embeddings\.projection\.' + _WB,
             r'backbone.patch_embed.projection.\1'),
            # The layout save_pretrained writes (the hub's checkpoints)...
            (_HF + r'encoder\.layer\.(\d+)\.layernorm_before\.' + _WB, _BLOCK + r'.ln1.\2'),
            (_HF + r'encoder\.layer\.(\d+)\.layernorm_after\.' + _WB, _BLOCK + r'.ln2.\2'),
            (_HF + r'encoder\.layer\.(\d+)\.attention\.attention\.query\.' + _WB,
             _BLOCK + r'.attn.q_proj.\2'),
            (_HF + r'encoder\.layer\.(\d+)\.attention\.attention\.key\.' + _WB,
             _BLOCK + r'.attn.k_proj.\2'),
            (_HF + r'encoder\.layer\.(\d+)\.attention\.attention\.value\.' + _WB,
             _BLOCK + r'.attn.v_proj.\2'),
            (_HF + r'encoder\.layer\.(\d+)\.attention\.output\.dense\.' + _WB,
             _BLOCK + r'.attn.out_proj.\2'),
            (_HF + r'encoder\.layer\.(\d+)\.intermediate\.dense\.' + _WB, _BLOCK + r'.ffn.fc1.\2'),
            (_HF + r'encoder\.layer\.(\d+)\.output\.dense\.' + _WB, _BLOCK + r'.ffn.fc2.\2'),
            # ...and the module names of transformers 5 (torch.save of model.state_dict()).
            (_HF + r'layers\.(\d+)\.layernorm_before\.' + _WB, _BLOCK + r'.ln1.\2'),
            (_HF + r'layers\.(\d+)\.layernorm_after\.' + _WB, _BLOCK + r'.ln2.\2'),
            (_HF + r'layers\.(\d+)\.attention\.(q|k|v)_proj\.' + _WB, _BLOCK + r'.attn.\2_proj.\3'),
            (_HF + r'layers\.(\d+)\.attention\.o_proj\.' + _WB, _BLOCK + r'.attn.out_proj.\2'),
            (_HF + r'layers\.(\d+)\.mlp\.(fc1|fc2)\.' + _WB, _BLOCK + r'.ffn.\2.\3'),
            (_HF + r'layernorm\.' + _WB, r'backbone.final_norm.\1'),
            (r'classifier\.' + _WB, r'head.fc.\1'),
        ),
        # ViTModel's pooler (dense + tanh on the CLS token) feeds no classifier, and the
        # mask token serves masked-image pretraining only.
        dropped=re.compile(_HF + r'(pooler\.dense\.(weight|bias)|embeddings\.mask_token)'),
        layer_norm_eps=1e-12),  # ViTConfig.layer_norm_eps
)


class ConvertedViT(NamedTuple):
    """The result of :func:`convert_vit_checkpoint`.

    Attributes:
        state_dict (OrderedDict[str, Tensor]): ``backbone.*`` (InfViT) and, when the source
            has a classifier, ``head.*`` (the mmpretrain head named in ``meta['head']``).
        meta (dict): What builds the model the weights load into (see
            :func:`convert_vit_checkpoint`); plain Python values only, so that weights-only
            loading reads it.
    """
    state_dict: 'OrderedDict[str, Tensor]'
    meta: dict


def find_weight_file(path: str) -> str:
    """The weight file of ``path``: the file itself, or in a Hugging Face model folder the
    first of ``HF_WEIGHT_FILES``.

    Raises:
        FileNotFoundError: If there is no such file or folder, or the folder holds no weights.
    """
    if osp.isfile(path):
        return path
    if not osp.isdir(path):
        raise FileNotFoundError(f'source checkpoint not found: {path}')
    for name in HF_WEIGHT_FILES:
        if osp.isfile(osp.join(path, name)):
            return osp.join(path, name)
    raise FileNotFoundError(f'the folder {path} holds none of {", ".join(HF_WEIGHT_FILES)} '
                            '(sharded checkpoints are not supported)')


def read_hf_config(weight_file: str) -> dict:
    """The Hugging Face ``config.json`` beside ``weight_file``, or ``{}`` without one."""
    config_file = osp.join(osp.dirname(osp.abspath(weight_file)), 'config.json')
    if not osp.isfile(config_file):
        return {}
    with open(config_file, encoding='utf-8') as f:
        try:
            config = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f'{config_file} is not valid JSON: {e}') from e
    return config if isinstance(config, dict) else {}


def load_vit_state_dict(weight_file: str) -> Dict[str, Tensor]:
    """Read a state dict (``.safetensors`` or a ``torch.save`` file) without DDP prefixes.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: If it cannot be read or holds no state dict of tensors.
    """
    try:
        state = load_state_dict_file(weight_file, STATE_DICT_WRAPPERS)
    except pickle.UnpicklingError as e:
        raise ValueError(str(e)) from e
    return strip_key_prefixes(state, ('module.', ))


def detect_layout(state: Dict[str, Tensor]) -> ViTLayout:
    """The layout whose signature key ``state`` has.

    Raises:
        ValueError: Naming the known layouts and some of the source's keys, if none matches.
    """
    found = [layout for layout in LAYOUTS if any(layout.signature.fullmatch(k) for k in state)]
    if len(found) != 1:
        known = '\n'.join(f'  - {layout.description}' for layout in LAYOUTS)
        what = 'matches none' if not found else 'matches several'
        raise ValueError(f'the source {what} of the ViT layouts vit2infvit reads:\n{known}\n'
                         f'its first keys are {list(state)[:8]}')
    return found[0]


def rename_keys(state: Dict[str, Tensor],
                layout: ViTLayout) -> Tuple['OrderedDict[str, Tensor]', List[str]]:
    """Map ``state`` onto InfViT classifier keys by ``layout``'s rules.

    Returns:
        tuple: The renamed state dict (packed q/k/v split) and the dropped source keys.

    Raises:
        ValueError: Listing the source keys that no rule maps (layer scale, qk-norm,
            register or distillation tokens, pooling norms have no place in InfViT).
    """
    out: 'OrderedDict[str, Tensor]' = OrderedDict()
    dropped, unknown = [], []
    for key, value in state.items():
        rule = next(((p, t) for p, t in layout.rules if p.fullmatch(key)), None)
        if rule is None:
            (dropped if layout.dropped and layout.dropped.fullmatch(key) else unknown).append(key)
            continue
        target = rule[0].sub(rule[1], key)
        if '{qkv}' not in target:
            out[target] = value
            continue
        if value.shape[0] % 3:
            raise ValueError(f'{key} of shape {tuple(value.shape)} is not a packed q/k/v '
                             'projection (its first dimension is not divisible by 3)')
        # timm and mmpretrain pack the projections as (q, k, v) along the output dimension.
        for name, part in zip('qkv', value.chunk(3, dim=0)):
            out[target.format(qkv=name)] = part.contiguous()
    if unknown:
        raise ValueError(
            f'the source ({layout.description}) has keys that InfViT has no place for: '
            f'{unknown[:12]}{" ..." if len(unknown) > 12 else ""}; layer scale, qk-norm, '
            'register or distillation tokens, a pre-norm and a norm after pooling are not part '
            'of InfViT')
    return out, dropped


def _num_layers(state: Dict[str, Tensor]) -> int:
    indices = {
        int(m.group(1))
        for m in (re.match(r'backbone\.blocks\.(\d+)\.', k) for k in state) if m
    }
    if not indices:
        raise ValueError('the source has no transformer blocks')
    return max(indices) + 1


def _required(state: Dict[str, Tensor], key: str, layout: ViTLayout) -> Tensor:
    if key not in state:
        raise ValueError(f'the source ({layout.description}) has no tensor for InfViT\'s '
                         f'{key} (InfViT needs a class token, a position table that covers '
                         'it, the patch embedding and the blocks)')
    return state[key]


def resolve_num_heads(embed_dims: int, num_heads: Optional[int], config: dict) -> int:
    """The head count: ``num_heads``, else the Hugging Face config's, else C / 64.

    Raises:
        ValueError: If the count is not positive or does not divide the width.
    """
    if num_heads is None:
        num_heads = config.get('num_attention_heads')
    if num_heads is None:
        if embed_dims % VIT_HEAD_DIMS:
            raise ValueError(f'the width {embed_dims} is not a multiple of {VIT_HEAD_DIMS}, '
                             'the head width of the ViT family, so the head count cannot be '
                             'inferred: pass --num-heads H (H must divide the width)')
        return embed_dims // VIT_HEAD_DIMS
    if not isinstance(num_heads, int) or num_heads < 1 or embed_dims % num_heads:
        raise ValueError(f'num_heads must be a positive divisor of the width {embed_dims}, '
                         f'got {num_heads!r}')
    return num_heads


def infer_backbone_config(state: Dict[str, Tensor], layout: ViTLayout, attn_type: str,
                          num_heads: Optional[int], layer_norm_eps: Optional[float],
                          hf_config: dict) -> dict:
    """The InfViT arguments of renamed weights (``type`` included, so that the registry
    builds it).

    Raises:
        ValueError: If a shape does not fit a ViT (non-square patches or position grid, a
            position table without the class token) or a setting cannot be honoured.
    """
    projection = _required(state, 'backbone.patch_embed.projection.weight', layout)
    embed_dims, in_channels, patch_h, patch_w = projection.shape
    if patch_h != patch_w:
        raise ValueError(f'the patch embedding has non-square {patch_h}x{patch_w} patches; '
                         'InfViT takes square ones')
    _required(state, 'backbone.cls_token', layout)
    num_tokens = _required(state, 'backbone.pos_embed', layout).shape[1]
    side = int(round((num_tokens - 1)**0.5))
    if side * side != num_tokens - 1:
        raise ValueError(f'the position table has {num_tokens} entries, which is not a class '
                         'token plus a square grid (a table without the class token, as timm '
                         'no_embed_class writes it, or a non-square grid cannot be converted)')
    if hf_config.get('hidden_act', 'gelu') != 'gelu':
        raise ValueError(f'the Hugging Face config has hidden_act={hf_config["hidden_act"]!r}; '
                         'InfViT\'s MLP uses the exact GELU (\'gelu\')')
    if layer_norm_eps is None:
        layer_norm_eps = hf_config.get('layer_norm_eps', layout.layer_norm_eps)
    feedforward = _required(state, 'backbone.blocks.0.ffn.fc1.weight', layout).shape[0]
    return dict(
        type='mmlinear.InfViT',
        arch=dict(
            embed_dims=int(embed_dims),
            num_layers=_num_layers(state),
            num_heads=resolve_num_heads(int(embed_dims), num_heads, hf_config),
            feedforward_channels=int(feedforward)),
        attn_type=attn_type,
        img_size=side * int(patch_h),
        patch_size=int(patch_h),
        in_channels=int(in_channels),
        qkv_bias='backbone.blocks.0.attn.q_proj.bias' in state,
        final_norm='backbone.final_norm.weight' in state,
        layer_norm_eps=float(layer_norm_eps),
        out_type='cls_token')


def infer_head_config(state: Dict[str, Tensor], embed_dims: int) -> Optional[dict]:
    """The mmpretrain head that the converted ``head.*`` keys load into, or None.

    ``head.fc`` is a ``LinearClsHead``; ``head.layers.head`` (with an optional
    ``head.layers.pre_logits``) is mmpretrain's ``VisionTransformerClsHead``. Both classify
    the CLS token after the final norm, as the source models do.
    """
    if 'head.fc.weight' in state:
        num_classes = state['head.fc.weight'].shape[0]
        return dict(type='LinearClsHead', num_classes=int(num_classes), in_channels=embed_dims)
    if 'head.layers.head.weight' in state:
        pre_logits = state.get('head.layers.pre_logits.weight')
        return dict(
            type='VisionTransformerClsHead',
            num_classes=int(state['head.layers.head.weight'].shape[0]),
            in_channels=embed_dims,
            hidden_dim=None if pre_logits is None else int(pre_logits.shape[0]))
    return None


def add_initial_rho(state: 'OrderedDict[str, Tensor]', backbone: dict) -> None:
    """Add each block's ``attn.rho_logit`` at the value a new InfSA attention starts with
    (softmax attention has no rho)."""
    if backbone['attn_type'] == 'softmax':
        return
    arch = backbone['arch']
    attention = InfSAAttention(arch['embed_dims'], arch['num_heads'], backbone['attn_type'])
    for index in range(arch['num_layers']):
        state[f'backbone.blocks.{index}.attn.rho_logit'] = attention.rho_logit.detach().clone()


def convert_vit_state_dict(source: Dict[str, Tensor],
                           attn_type: str = 'linear',
                           num_heads: Optional[int] = None,
                           layer_norm_eps: Optional[float] = None,
                           hf_config: Optional[dict] = None) -> ConvertedViT:
    """Convert a ViT state dict into InfViT weights and the config they need.

    Args:
        source (dict[str, Tensor]): The ViT's state dict, in one of ``LAYOUTS`` (tensors on
            the meta device will do for a check of the shapes).
        attn_type (str): The InfViT attention: 'linear', 'pure' or 'softmax' (which
            reproduces the source). Defaults to 'linear'.
        num_heads (int, optional): Attention heads; by default the Hugging Face config's
            ``num_attention_heads``, else width / 64.
        layer_norm_eps (float, optional): LayerNorm epsilon; by default the Hugging Face
            config's, else the source library's (1e-6 for mmpretrain and timm, 1e-12 for
            Hugging Face).
        hf_config (dict, optional): The Hugging Face ``config.json`` of the weights.

    Returns:
        ConvertedViT: ``state_dict`` with ``backbone.*`` / ``head.*`` keys and ``meta``:
        ``backbone`` (the InfViT config, ``type`` included), ``head`` (the mmpretrain head
        config, or None without a classifier), ``source`` (``layout`` and the
        ``dropped_keys``) and ``converter``.

    Raises:
        ValueError: For an unknown layout, keys InfViT has no place for, shapes that do not
            make a ViT, or a head count that does not divide the width.
    """
    if attn_type not in CONVERTIBLE_ATTN_TYPES:
        raise ValueError(f'attn_type must be one of {CONVERTIBLE_ATTN_TYPES}, got {attn_type!r}')
    layout = detect_layout(source)
    hf_config = hf_config if layout.name == 'huggingface' and hf_config else {}
    state, dropped = rename_keys(source, layout)
    backbone = infer_backbone_config(state, layout, attn_type, num_heads, layer_norm_eps, hf_config)
    add_initial_rho(state, backbone)

    kwargs = {k: v for k, v in backbone.items() if k != 'type'}
    with torch.device('meta'):  # only names and shapes are compared, even for ViT-L
        reference = InfViT(**kwargs, init_cfg=None).state_dict()
    check_key_layout(
        {
            k[len('backbone.'):]: v
            for k, v in state.items() if k.startswith('backbone.')
        }, reference, f'InfViT({kwargs})')
    meta = dict(
        converter='vit2infvit',
        source=dict(layout=layout.name, dropped_keys=dropped),
        backbone=backbone,
        head=infer_head_config(state, backbone['arch']['embed_dims']))
    return ConvertedViT(state, meta)


def convert_vit_checkpoint(src: str,
                           attn_type: str = 'linear',
                           num_heads: Optional[int] = None,
                           layer_norm_eps: Optional[float] = None) -> ConvertedViT:
    """Read the ViT checkpoint ``src`` and convert it with :func:`convert_vit_state_dict`.

    Args:
        src (str): A checkpoint file (``.safetensors`` or a ``torch.save`` file, possibly an
            mmengine checkpoint), or a Hugging Face model folder; a Hugging Face
            ``config.json`` beside the weights is read for the head count and epsilon.
        attn_type, num_heads, layer_norm_eps: As for :func:`convert_vit_state_dict`.

    Returns:
        ConvertedViT: As :func:`convert_vit_state_dict`'s, with ``meta['source']['file']``.

    Raises:
        FileNotFoundError: If ``src`` does not exist or a folder holds no weights.
        ValueError: For an unreadable file, and as :func:`convert_vit_state_dict`.
    """
    weight_file = find_weight_file(src)
    converted = convert_vit_state_dict(
        load_vit_state_dict(weight_file), attn_type, num_heads, layer_norm_eps,
        read_hf_config(weight_file))
    converted.meta['source']['file'] = osp.basename(osp.normpath(src))
    return converted


def save_converted(converted: ConvertedViT, dst: str) -> None:
    """Write ``{'state_dict': ..., 'meta': ...}`` to ``dst`` (mmengine's checkpoint layout,
    readable by weights-only loading) through a temporary file, so that an interrupted write
    leaves no partial checkpoint under ``dst``
    (:func:`mmlinear.utils.atomic_write.atomic_output`)."""
    with atomic_output(dst) as partial:
        torch.save({'state_dict': converted.state_dict, 'meta': converted.meta}, partial)
