"""StreamedEncoderDecoder's 'streamed' test mode takes the decode head's context window, and
equals mmseg's 'whole' mode of the same head."""
import os.path as osp
import warnings

import numpy as np
import torch
from conftest import REPO_ROOT
from mmengine.config import Config
from mmseg.apis import inference_model, init_model

CONFIG = osp.join(REPO_ROOT, 'configs', 'demo', 'upernet_infvit-demo-linear_shapes-ade.py')


def test_streamed_mode_pools_the_heads_window_as_whole_mode_does():
    cfg = Config.fromfile(CONFIG)
    cfg.model.backbone.init_cfg = None
    cfg.merge_from_dict({
        'model.type': 'mmlinear.StreamedEncoderDecoder',
        'model.test_cfg': dict(mode='streamed', head_rows=8),
        'model.decode_head.context_window': 4,
    })
    image = np.random.default_rng(0).integers(0, 256, (176, 144, 3), dtype=np.uint8)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        model = init_model(cfg, None, device='cpu')
        streamed = inference_model(model, image).seg_logits.data
        model.test_cfg.mode = 'whole'
        whole = inference_model(model, image).seg_logits.data
        model.decode_head.context_window = None
        whole_map = inference_model(model, image).seg_logits.data
    scale = whole.abs().max().item()
    assert scale > 0.01
    torch.testing.assert_close(streamed, whole, rtol=0, atol=1e-4 * scale)
    assert (whole_map - whole).abs().max() > 1e-3 * scale
