"""VECA distillation from a frozen teacher, as an mmpretrain-style model (the paper's
feature-distillation set-up; docs/design.md lists where it departs from the reference code)."""
from typing import Dict, List, Optional, Tuple

import torch
from mmengine.logging import MMLogger
from mmengine.model import BaseModel
from mmengine.runner.checkpoint import CheckpointLoader
from torch import Tensor, nn

from mmlinear.registry import MODELS
from mmlinear.utils.checkpoint_conversion import strip_key_prefixes

# Prefixes a teacher state dict may carry, possibly stacked (``module.teacher.``): a DDP
# wrapper, a classifier, our distiller.
TEACHER_KEY_PREFIXES = ('module.', 'backbone.', 'teacher.')

# Where a teacher keeps its patch projection (a Conv2d): timm models through mmpretrain's
# TIMMBackbone, timm models themselves, mmpretrain / mmcv ``PatchEmbed``.
TEACHER_PATCH_PROJECTIONS = ('timm_model.patch_embed.proj', 'patch_embed.proj',
                             'patch_embed.projection')


def teacher_width(teacher: nn.Module) -> int:
    """The token width of a teacher backbone: ``embed_dims`` (mmpretrain backbones), else the
    wrapped timm model's ``num_features`` (``TIMMBackbone``).

    Raises:
        ValueError: If neither is found; ``teacher_dims`` must then be given.
    """
    if isinstance(getattr(teacher, 'embed_dims', None), int):
        return teacher.embed_dims
    timm_model = getattr(teacher, 'timm_model', None)
    if isinstance(getattr(timm_model, 'num_features', None), int):
        return timm_model.num_features
    raise ValueError(f'cannot tell the token width of the teacher {type(teacher).__name__}; '
                     f'give teacher_dims explicitly')


def teacher_patch_projection(teacher: nn.Module) -> Tuple[str, nn.Conv2d]:
    """The teacher's patch projection and its attribute path.

    Raises:
        ValueError: If none of :data:`TEACHER_PATCH_PROJECTIONS` is a ``Conv2d`` of the
            teacher (then ``init_patch_embed_from_teacher`` cannot be used).
    """
    for path in TEACHER_PATCH_PROJECTIONS:
        module = teacher
        for name in path.split('.'):
            module = getattr(module, name, None)
            if module is None:
                break
        if isinstance(module, nn.Conv2d):
            return path, module
    raise ValueError(f'init_patch_embed_from_teacher: the teacher {type(teacher).__name__} has '
                     f'no Conv2d patch projection at any of {list(TEACHER_PATCH_PROJECTIONS)}; '
                     f'set init_patch_embed_from_teacher=False')


def check_teacher_outputs(teacher: nn.Module) -> None:
    """Reject mmpretrain ``VisionTransformer``-style teacher settings that would not give the
    distillation targets: every token (CLS first) of the last layer, after the final norm.

    mmpretrain 1.2.0 applies ``ln1`` (the final norm) only after the last layer and only with
    ``final_norm=True``; ``out_type='raw'`` then returns all tokens of an output index. Its
    ``pre_norm`` (CLIP-style norm before the blocks) is part of the teacher and needs nothing.

    Raises:
        ValueError: Naming the setting to change.
    """
    out_type = getattr(teacher, 'out_type', 'raw')
    if out_type != 'raw':
        raise ValueError(f"the teacher must return all tokens: set out_type='raw' "
                         f'(got {out_type!r})')
    if getattr(teacher, 'final_norm', True) is not True:
        raise ValueError('the targets are the teacher tokens after its final norm: set '
                         'final_norm=True in the teacher config')
    if getattr(teacher, 'cls_token', True) is None:
        raise ValueError('the teacher needs a CLS token (the global target): set '
                         'with_cls_token=True')
    layers, out_indices = getattr(teacher, 'layers', None), getattr(teacher, 'out_indices', None)
    if layers is not None and out_indices is not None and \
            max(out_indices) != len(layers) - 1:
        raise ValueError(f'the teacher must output its last layer (the final norm follows '
                         f'it): set out_indices=-1, got {list(out_indices)}')


@MODELS.register_module()
class VECADistiller(BaseModel):
    """Distil a frozen teacher's final tokens into a VECA student.

    The teacher sees the same pre-processed batch as the student. Its targets are the CLS
    token and the patch tokens (``teacher_num_register_tokens`` register tokens after the CLS
    dropped) of the last layer after the final norm. The student's global token (core 0) and
    patch tokens, projected to the teacher width by its ``output_proj`` (the student's
    ``out_channels`` defaults to the teacher width, as the reference), are matched with
    :class:`VECADistillLoss`. The teacher is frozen: no gradients, always in eval mode.

    With ``init_patch_embed_from_teacher`` (the reference's ``init_patch_from_dinov3``, on in
    the distillation configs) :meth:`init_weights` copies the teacher's patch projection
    (weight and bias) into the student's ``patch_embed.proj`` once the teacher's weights are
    loaded, when the two have the same shape (same width, input channels and patch size; the
    DINOv3 ViT-B/16 teacher and VECA-B), and logs the copy; otherwise the student keeps its own
    initialisation and a line in the log says why. A teacher without a bias gives the student
    a zero bias. A checkpoint loaded afterwards (``load_from``, e.g. stage 2 starting from
    stage 1) replaces the copy, as in the reference.

    ``mode='tensor'`` returns the student tokens. ``mode='predict'`` raises a
    ValueError: distillation has no predictions to score, so the configs set no val/test loop;
    the student is evaluated by the downstream configs (linear probe, fine-tune, Mask R-CNN,
    UperNet) after extracting it with ``state_dict`` prefix ``student.``.

    Args:
        student (dict): Config of the VECA backbone (``type='mmlinear.VECA'``); it must have
            ``forward_tokens``.
        teacher (dict): Config of any backbone returning the teacher tokens (B, T, D) with the
            CLS token first, e.g. mmpretrain ``VisionTransformer`` with ``out_type='raw'``
            and ``final_norm=True``, or ``mmpretrain.TIMMBackbone`` for timm's DINOv3.
        teacher_ckpt (str, optional): Checkpoint loaded into the teacher by
            :meth:`init_weights` (``module.``, ``backbone.`` and ``teacher.`` prefixes
            stripped, extra keys such as a head ignored, missing keys an error).
            Defaults to None (use the teacher's own ``init_cfg``).
        teacher_num_register_tokens (int): Register tokens following the teacher's CLS token
            (4 for DINOv3, 0 for mmpretrain ViTs). Defaults to 0.
        teacher_dims (int, optional): Width of the teacher tokens. Defaults to None
            (read from the teacher). The student's ``out_channels`` defaults to it.
        init_patch_embed_from_teacher (bool): Start the student's patch projection as a copy
            of the teacher's when their shapes match (see above). Defaults to False.
        loss (dict): Config of the loss. Defaults to ``mmlinear.VECADistillLoss``.
        data_preprocessor (dict, optional): Defaults to mmpretrain's
            ``ClsDataPreprocessor``.
        init_cfg (dict, optional): Initialisation config. Defaults to None.
    """

    def __init__(self,
                 student: dict,
                 teacher: dict,
                 teacher_ckpt: Optional[str] = None,
                 teacher_num_register_tokens: int = 0,
                 teacher_dims: Optional[int] = None,
                 init_patch_embed_from_teacher: bool = False,
                 loss: dict = dict(type='mmlinear.VECADistillLoss'),
                 data_preprocessor: Optional[dict] = None,
                 init_cfg: Optional[dict] = None) -> None:
        data_preprocessor = dict(data_preprocessor or {})
        data_preprocessor.setdefault('type', 'mmpretrain.ClsDataPreprocessor')
        super().__init__(data_preprocessor=data_preprocessor, init_cfg=init_cfg)
        if not isinstance(teacher_num_register_tokens, int) or teacher_num_register_tokens < 0:
            raise ValueError(f'teacher_num_register_tokens must be an int >= 0, got '
                             f'{teacher_num_register_tokens!r}')
        self.teacher = MODELS.build(teacher)
        check_teacher_outputs(self.teacher)
        self.teacher.requires_grad_(False)
        self.teacher.eval()
        self.teacher_ckpt = teacher_ckpt
        self.teacher_num_register_tokens = teacher_num_register_tokens
        teacher_dims = teacher_dims or teacher_width(self.teacher)
        # As the reference, the student's output projection maps to the teacher width
        # (Identity when they agree), so it lives in the student's state dict (`output_proj`).
        student = dict(student)
        student.setdefault('out_channels', teacher_dims)
        self.student = MODELS.build(student)
        if not hasattr(self.student, 'forward_tokens'):
            raise TypeError(f'the student must be a VECA backbone with forward_tokens, got '
                            f'{type(self.student).__name__}')
        if self.student.out_channels != teacher_dims:
            raise ValueError(f'the student outputs {self.student.out_channels} channels but '
                             f'the teacher {teacher_dims}: set the student out_channels to '
                             f'{teacher_dims}')
        self.loss_module = MODELS.build(loss)
        if not isinstance(init_patch_embed_from_teacher, bool):
            raise TypeError(f'init_patch_embed_from_teacher must be True or False, got '
                            f'{init_patch_embed_from_teacher!r}')
        self.init_patch_embed_from_teacher = init_patch_embed_from_teacher
        if init_patch_embed_from_teacher:
            teacher_patch_projection(self.teacher)  # fail at build time, not after init

    def train(self, mode: bool = True) -> 'VECADistiller':
        """Switch the student's mode; the teacher stays in eval mode."""
        super().train(mode)
        self.teacher.eval()
        return self

    def init_weights(self) -> None:
        """Initialise as configured, load ``teacher_ckpt`` into the teacher, then (with
        ``init_patch_embed_from_teacher``) copy the teacher's patch projection into the
        student."""
        super().init_weights()
        if self.teacher_ckpt is not None:
            self._load_teacher(self.teacher_ckpt)
        if self.init_patch_embed_from_teacher:
            self.copy_teacher_patch_embed()

    @torch.no_grad()
    def copy_teacher_patch_embed(self) -> bool:
        """Copy the teacher's patch projection into ``student.patch_embed.proj`` if the
        shapes match, and log what was done.

        Returns:
            bool: Whether the projection was copied.
        """
        logger = MMLogger.get_current_instance()
        path, source = teacher_patch_projection(self.teacher)
        target = self.student.patch_embed.proj
        if source.weight.shape != target.weight.shape:
            logger.info(
                f'init_patch_embed_from_teacher: skipped, student.patch_embed.proj kept its '
                f'own initialisation: the teacher\'s teacher.{path} has weight shape '
                f'{tuple(source.weight.shape)}, the student\'s {tuple(target.weight.shape)}')
            return False
        target.weight.copy_(source.weight)
        if target.bias is not None:
            if source.bias is None:
                target.bias.zero_()
            else:
                target.bias.copy_(source.bias)
        logger.info(f'init_patch_embed_from_teacher: copied teacher.{path} (weight '
                    f'{tuple(source.weight.shape)}) into student.patch_embed.proj')
        return True

    def _load_teacher(self, path: str) -> None:
        checkpoint = CheckpointLoader.load_checkpoint(path, map_location='cpu')
        state = checkpoint.get('state_dict', checkpoint)
        state = strip_key_prefixes(state, TEACHER_KEY_PREFIXES)
        missing, unexpected = self.teacher.load_state_dict(state, strict=False)
        if missing:
            raise KeyError(f'teacher checkpoint {path} lacks {len(missing)} teacher weights, '
                           f'e.g. {missing[:5]}')
        if unexpected:
            MMLogger.get_current_instance().info(
                f'teacher checkpoint {path}: ignored {len(unexpected)} keys, '
                f'e.g. {unexpected[:5]}')

    @torch.no_grad()
    def teacher_targets(self, inputs: Tensor) -> Tuple[Tensor, Tensor]:
        """The teacher's final-normed CLS and patch tokens.

        Args:
            inputs (Tensor): (B, 3, H, W) pre-processed images.

        Returns:
            tuple[Tensor, Tensor]: CLS (B, D_t) and patch tokens (B, N, D_t), registers
            dropped.
        """
        outs = self.teacher(inputs)
        tokens = outs[-1] if isinstance(outs, (tuple, list)) else outs
        if tokens.dim() != 3:
            raise ValueError(f'the teacher must return tokens (B, T, D), got shape '
                             f'{tuple(tokens.shape)}')
        return tokens[:, 0], tokens[:, 1 + self.teacher_num_register_tokens:]

    def extract_feat(self, inputs: Tensor) -> Dict[str, object]:
        """The student's distillation outputs.

        Args:
            inputs (Tensor): (B, 3, H, W) pre-processed images.

        Returns:
            dict: ``global`` (B, D_t), ``patches`` (B, N, D_t) after the student's output
            projection, and ``hw_shape`` (Hp, Wp).
        """
        return self.student.forward_tokens(inputs)

    def loss(self, inputs: Tensor, data_samples: Optional[List] = None) -> Dict[str, Tensor]:
        """Distillation losses of a batch (labels in ``data_samples`` are unused).

        Returns:
            dict[str, Tensor]: ``loss_global``, ``loss_patch_cos``, ``loss_patch_mse``.

        Raises:
            ValueError: If the teacher and student patch grids differ.
        """
        teacher_cls, teacher_patches = self.teacher_targets(inputs)
        student = self.extract_feat(inputs)
        num_student, num_teacher = student['patches'].shape[1], teacher_patches.shape[1]
        if num_student != num_teacher:
            height, width = student['hw_shape']
            raise ValueError(
                f'the teacher gives {num_teacher} patch tokens (CLS and '
                f'{self.teacher_num_register_tokens} register tokens dropped) but the student '
                f'grid {height}x{width} has {num_student}: both need 16-px patches on the same '
                f'input; check the teacher patch_size and teacher_num_register_tokens')
        return self.loss_module(student['global'], student['patches'], teacher_cls, teacher_patches)

    def forward(self, inputs: Tensor, data_samples: Optional[List] = None, mode: str = 'tensor'):
        """``mode='loss'``: the loss dict; ``'tensor'``: :meth:`extract_feat`.

        Raises:
            ValueError: For ``mode='predict'`` (distillation has nothing to predict) and any
                other mode.
        """
        if mode == 'loss':
            return self.loss(inputs, data_samples)
        if mode == 'tensor':
            return self.extract_feat(inputs)
        if mode == 'predict':
            raise ValueError(
                "VECADistiller has no predictions (mode='predict'): distillation configs "
                'set no val/test loop; evaluate the student with a downstream config')
        raise ValueError(f"unknown mode {mode!r}; allowed: 'loss', 'tensor'")
