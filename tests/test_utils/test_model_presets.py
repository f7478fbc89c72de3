import pytest
import torch

from mmlinear.utils.model_presets import (BACKBONE_PRESETS, IMAGENET_MEAN, backbone_config,
                                          build_backbone, input_normalization)
from mmlinear.utils.progress import ProgressETA


def test_presets_and_configs_build_the_named_backbones():
    assert type(build_backbone('infvit-test-pure')).__name__ == 'InfViT'
    assert build_backbone('infvit-test-pure').attn_type == 'pure'
    vit = build_backbone('vit-test-sdpa')
    assert type(vit).__name__ == 'VisionTransformer' and vit.embed_dims == 32
    # The softmax baseline has InfViT-4L's width and depth.
    assert {k: BACKBONE_PRESETS['vit-4l-sdpa']['arch'][k] for k in ('embed_dims', 'num_layers')} \
        == dict(embed_dims=1024, num_layers=4)
    cfg, scope = backbone_config('configs/demo/infvit-demo-linear_shapes-cls.py')
    assert cfg['type'] == 'mmlinear.InfViT' and cfg['arch'] == 'infvit-demo'
    assert scope == 'mmpretrain'
    assert build_backbone('configs/demo/infvit-demo-linear_shapes-cls.py',
                          dict(attn_type='softmax')).attn_type == 'softmax'
    with pytest.raises(ValueError, match="unknown model 'nope'.*infvit-4l-linear"):
        backbone_config('nope')


def test_whole_model_checkpoints_load_their_backbone(tmp_path):
    source = build_backbone('infvit-test-linear')
    state = {f'backbone.{k}': v for k, v in source.state_dict().items()}
    state['head.fc.weight'] = torch.zeros(3, 32)
    torch.save(dict(state_dict=state), tmp_path / 'model.pth')
    loaded = build_backbone('infvit-test-linear', checkpoint=str(tmp_path / 'model.pth'))
    for key, value in source.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value)


def test_input_normalization():
    assert input_normalization('infvit-test-linear')[0] == IMAGENET_MEAN
    mean, std = input_normalization('configs/demo/infvit-demo-linear_shapes-cls.py')
    assert list(mean) == [127.5] * 3 and list(std) == [127.5] * 3


def test_progress_lines_count_and_estimate():
    assert ProgressETA(3).eta() != ProgressETA(3).eta()  # nan before the first step
    lines = []
    progress = ProgressETA(4, printer=lines.append)
    progress.step('first')
    progress.step('second', remaining_seconds=42)
    assert lines[0].startswith('[1/4] first  (elapsed ')
    assert lines[1].startswith('[2/4] second') and lines[1].endswith('ETA 42 s)')
    progress.start -= 10.  # as if the two steps had taken 10 s: 2 left take as long
    assert progress.eta() == pytest.approx(10., rel=1e-2)
    with pytest.raises(ValueError, match='total must be >= 0'):
        ProgressETA(-1)
