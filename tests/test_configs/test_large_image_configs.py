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

# Each config with the (H, W) its test pipeline resizes to: the dataset's own image size.
CONFIGS = [
    ('weightformer/upernet_weightformer-s_4xb4-40k_hrf-256x256.py', (2336, 3504)),
    ('weightformer/upernet_weightformer-s_4xb4-80k_loveda-512x512.py', (1024, 1024)),
]


@pytest.mark.parametrize('name, own_size', CONFIGS)
def test_streamed_test_mode_equals_whole(name, own_size):
    """The configs as they are, except that the small test image is kept at its own size,
    as the Resize keeps the dataset's images (scaling 144 x 208 up to HRF's 3504 x 2336
    would only make the comparison slow)."""
    cfg = Config.fromfile(osp.join(REPO_ROOT, 'configs', name))
    assert cfg.model.type == 'mmlinear.StreamedEncoderDecoder'
    assert cfg.model.test_cfg.mode == 'streamed'
    resize = next(t for t in cfg.test_pipeline if t.type == 'Resize')
    assert tuple(resize.scale) == own_size and resize.keep_ratio
    image = np.random.default_rng(0).integers(0, 256, (144, 208, 3), dtype=np.uint8)
    resize.scale = image.shape[:2]
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = init_model(cfg, None, device='cpu')
        streamed = inference_model(model, image).seg_logits.data
        model.test_cfg.mode = 'whole'
        whole = inference_model(model, image).seg_logits.data
    scale = whole.abs().max().item()
    assert scale > 0.01
    torch.testing.assert_close(streamed, whole, rtol=0, atol=1e-4 * scale)
