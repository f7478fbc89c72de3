"""Forward and backward under autocast stay finite at 2048 x 2048 (16,384 tokens).

At this size a float16 sum over the N x N Pure-InfSA scores or the N Linear-InfSA scores
overflows (float16 tops out at 65,504), so finite results mean that the normalisations run
in float32, as they must. bfloat16 runs everywhere; float16 on CUDA, and on the CPU (where it
is emulated and slow) only with --run-slow.
"""
import pytest
import torch

from mmlinear.models.backbones import VECA, InfViT, WeightFormer
from mmlinear.utils.ext_loader import kernel_ext

DEVICES = ['cpu'] + (['cuda'] if torch.cuda.is_available() else [])
CASES = [(device, dtype) for device in DEVICES for dtype in (torch.bfloat16, torch.float16)]
BACKBONES = {
    'infvit-linear': lambda: InfViT(arch='test', attn_type='linear', out_type='featmap'),
    'infvit-pure': lambda: InfViT(arch='test', attn_type='pure', out_type='featmap'),
    'infvit-softmax': lambda: InfViT(arch='test', attn_type='softmax', out_type='featmap'),
    'weightformer': lambda: WeightFormer(arch='test', out_type='featmap'),
    'veca': lambda: VECA(arch='test', out_type='featmap'),
}


@pytest.mark.parametrize('device,dtype', [
    pytest.param(
        device,
        dtype,
        id=f'{device}-{str(dtype)[6:]}',
        marks=[pytest.mark.slow] if (device, dtype) == ('cpu', torch.float16) else [])
    for device, dtype in CASES
])
# The softmax baseline's N x N scores at 16,384 tokens take most of this test's time on a CPU.
@pytest.mark.parametrize('name', [
    pytest.param(name, marks=[pytest.mark.slow] if name == 'infvit-softmax' else [])
    for name in sorted(BACKBONES)
])
def test_autocast_forward_backward_is_finite_at_2048(name, dtype, device):
    if name == 'infvit-pure' and kernel_ext(torch.device(device)) is None:
        pytest.skip('the Pure-InfSA reference materialises N x N scores (about 20 GB here); '
                    'at 2048 x 2048 it needs the compiled memory-linear kernel')
    torch.manual_seed(0)
    model = BACKBONES[name]().to(device).train()
    images = torch.randn(1, 3, 2048, 2048, device=device)
    with torch.autocast(device_type=device, dtype=dtype):
        features = model(images)[-1]
    assert features.shape[-2:] == (128, 128)
    assert torch.isfinite(features).all()
    # float16 training needs loss scaling (mmengine's AmpOptimWrapper uses a GradScaler):
    # unscaled, the gradients of the first layers underflow to zero.
    scaler = torch.amp.GradScaler(device, enabled=dtype == torch.float16)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler.scale(features.float().square().mean()).backward()
    scaler.unscale_(optimizer)
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    # The gradient reaches the first layer.
    assert model.patch_embed.projection.weight.grad.abs().sum() > 0
