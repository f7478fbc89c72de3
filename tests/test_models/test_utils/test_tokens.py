"""The patch-grid rule shared by the backbones, the FLOP counts and the saliency maps."""
import pytest
from torch import nn

from mmlinear.apis import count_patch_tokens
from mmlinear.models.backbones import VECA
from mmlinear.models.utils import patch_grid, patch_size_of


def test_partial_patches_count_as_whole_ones():
    backbone = VECA(arch='test', patch_size=8)
    assert patch_grid(backbone, (77, 61)) == (10, 8)
    assert patch_grid(backbone, (64, 64)) == (8, 8)
    assert backbone.grid_shape((1, 3, 77, 61)) == (10, 8)
    assert count_patch_tokens(backbone, 77) == 100


def test_mmpretrain_vit_patch_size_is_read_from_its_projection_stride():
    from mmpretrain.models import VisionTransformer
    vit = VisionTransformer(arch='deit-tiny', img_size=64, patch_size=16)
    assert not hasattr(vit, 'patch_size')
    assert patch_size_of(vit) == 16
    assert patch_grid(vit, (65, 64)) == (5, 4)
    assert count_patch_tokens(vit, 224) == 196


def test_a_module_without_a_patch_size_is_refused_by_name():
    with pytest.raises(TypeError, match='Linear has neither a patch_size'):
        patch_size_of(nn.Linear(2, 2))
