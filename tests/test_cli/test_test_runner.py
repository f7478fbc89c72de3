"""mmlinear.cli.test_runner.resized_pipeline: a test pipeline's sizing gives way to one resize
(the test loop of tools/analysis_tools/resolution_sweep.py)."""
import pytest

from mmlinear.cli import resized_pipeline


def test_pipeline_sizing_gives_way_to_one_resize():
    pipeline = [
        dict(type='LoadImageFromFile'),
        dict(type='ResizeEdge', scale=256),
        dict(type='CenterCrop', crop_size=224),
        dict(type='LoadAnnotations'),
        dict(type='PackInputs'),
    ]
    assert [t['type'] for t in resized_pipeline(pipeline, 96)
            ] == ['LoadImageFromFile', 'Resize', 'LoadAnnotations', 'PackInputs']
    assert resized_pipeline(pipeline, 96)[1]['scale'] == (96, 96)
    with pytest.raises(ValueError, match='no LoadImageFromFile'):
        resized_pipeline([dict(type='PackInputs')], 96)
