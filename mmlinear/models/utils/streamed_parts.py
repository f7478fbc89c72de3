"""The parts a model needs to run over bands of rows: an mmlinear backbone that streams its
map and the simple pyramid neck (shared by streamed segmentation and detection)."""
from typing import Tuple

from torch import nn

from ..backbones.base_plain_backbone import BasePlainBackbone
from ..necks import SimpleFeaturePyramid


def streamed_parts(model: nn.Module, task: str) -> Tuple[BasePlainBackbone, SimpleFeaturePyramid]:
    """The backbone and neck of ``model``, checked.

    Args:
        model (nn.Module): An mmseg / mmdet model with ``backbone`` and ``neck``.
        task (str): What the caller does, for the errors ('segmentation', 'detection').

    Returns:
        tuple[BasePlainBackbone, SimpleFeaturePyramid]: The backbone and the neck.

    Raises:
        TypeError: Another backbone (or one whose ``out_type`` is not 'featmap'), or another
            neck, naming what is supported.
    """
    backbone = getattr(model, 'backbone', None)
    if not isinstance(backbone, BasePlainBackbone) or backbone.out_type != 'featmap':
        got = type(backbone).__name__
        if isinstance(backbone, BasePlainBackbone):
            got += f' with out_type={backbone.out_type!r}'
        raise TypeError(f"streamed {task} needs an mmlinear backbone with out_type='featmap' "
                        f'(InfViT, WeightFormer, VECA), got {got}')
    neck = getattr(model, 'neck', None)
    if not isinstance(neck, SimpleFeaturePyramid):
        raise TypeError(f'streamed {task} needs the mmlinear SimpleFeaturePyramid neck, got '
                        f'{type(neck).__name__}')
    return backbone, neck
