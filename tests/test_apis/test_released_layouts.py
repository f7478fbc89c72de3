"""The WeightFormer and VECA conversions (mmlinear.apis.weightformer_conversion,
mmlinear.apis.veca_conversion) on the released checkpoints' own layouts
(tests/data/released_layouts: every key, shape and dtype of each released model as the
official code builds it): every layout converts and loads strictly into our preset."""
import pytest
import torch
from released_layouts import (TEACHER_WIDTH, VECA_ARCHS, WEIGHTFORMER_ARCHS, assert_loads_strictly,
                              fake_state, read_layout, veca_holder, weightformer_classifier)

from mmlinear.apis import veca_conversion, weightformer_conversion
from mmlinear.models import VECA, WeightFormer


@pytest.mark.parametrize('name', sorted(WEIGHTFORMER_ARCHS))
def test_released_weightformer_layout_loads_into_the_preset_classifier(name):
    layout = read_layout(name)
    arch = WEIGHTFORMER_ARCHS[name]
    state = fake_state(layout, device='meta')
    preset = WeightFormer.arch_zoo[arch]
    inferred = weightformer_conversion.infer_arch(state)
    assert inferred == {key: preset[key] for key in inferred}
    converted = weightformer_conversion.convert(state)
    assert list(converted) == [
        weightformer_conversion.HEAD_MAP.get(key, f'backbone.{key}') for key in state
    ]
    with torch.device('meta'):
        model = weightformer_classifier(arch)
    assert_loads_strictly(model, converted)
    assert sum(v.numel() for v in converted.values()) == layout['num_parameters']


@pytest.mark.parametrize('name', sorted(VECA_ARCHS))
def test_released_veca_layout_loads_into_the_preset_backbone(name):
    layout = read_layout(name)
    arch = VECA_ARCHS[name]
    state = fake_state(layout, device='meta')
    # The head count comes from the checkpoint's config, as the converter reads it.
    model_args = veca_conversion.infer_model_args(state, layout['release']['config'])
    preset = VECA.arch_zoo[arch]
    assert model_args['arch'] == {key: preset[key] for key in model_args['arch']}
    width = preset['embed_dims']
    assert model_args['out_channels'] == (None if width == TEACHER_WIDTH else TEACHER_WIDTH)
    converted = veca_conversion.convert(state, model_args)
    assert list(converted) == [f'backbone.{key}' for key in state]
    with torch.device('meta'):
        holder = veca_holder(arch, model_args['out_channels'])
    assert_loads_strictly(holder, converted)
    assert sum(v.numel() for v in converted.values()) == layout['num_parameters']
