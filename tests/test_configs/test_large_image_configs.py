"""The high-resolution configs (HRF fundus photographs, LoveDA remote sensing) test in the
'streamed' whole-image mode, and that mode equals mmseg's 'whole' on their models."""
import os.path as osp
import warnings

import numpy as np
import pytest
import torch
from conftest import REPO_ROOT
from mmengine.config import Config
from mmseg.apis import inference_model, init_model

CONFIGS = [
    'weightformer/upernet_weightformer-s_4xb4-40k_hrf-256x256.py',
    'weightformer/upernet_weightformer-s_4xb4-80k_loveda-512x512.py',
]


@pytest.mark.parametrize('name', CONFIGS)
def test_streamed_test_mode_equals_whole(name):
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', name))
    assert cfg.model.type == 'mmlinear.StreamedEncoderDecoder'
    assert cfg.model.test_cfg.mode == 'streamed'
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = init_model(cfg, None, device='cpu')
        image = np.random.default_rng(0).integers(0, 256, (144, 208, 3), dtype=np.uint8)
        streamed = inference_model(model, image).seg_logits.data
        model.test_cfg.mode = 'whole'
        whole = inference_model(model, image).seg_logits.data
    scale = whole.abs().max().item()
    assert scale > 0.01
    torch.testing.assert_close(streamed, whole, rtol=0, atol=1e-4 * scale)
