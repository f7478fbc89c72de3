"""Every block of a plain backbone follows :class:`PlainBlock`, down to its signatures."""
import inspect

import pytest
import torch

from mmlinear.models.layers import (InfViTBlock, PatchRope, PlainBlock, Rope2D, VECABlock,
                                    WeightFormerBlock)
from mmlinear.models.streaming import TokenStream

C, HEADS, HIDDEN = 16, 2, 32
#: Each block with its inputs: tokens (one extra token for InfViT, two cores for VECA, on a
#: 2 x 2 grid) and the named arguments its backbone passes.
CASES = {
    'infvit': (lambda: InfViTBlock(C, HEADS, HIDDEN), 1, lambda: dict(num_extra_tokens=1)),
    'weightformer_static':
    (lambda: WeightFormerBlock(C, HIDDEN, dynamic=False), 0, lambda: dict(hw_shape=(2, 2))),
    'weightformer_dynamic':
    (lambda: WeightFormerBlock(C, HIDDEN, dynamic=True), 0, lambda: dict(hw_shape=(2, 2))),
    'veca': (lambda: VECABlock(C, HEADS, HIDDEN), 2, lambda: dict(
        active_cores=2,
        core_rope=Rope2D(C // HEADS)(torch.tensor([[[0.5, -0.5], [-0.2, 0.1]]])),
        patch_rope=PatchRope(Rope2D(C // HEADS).eval(), (2, 2)))),
}
BLOCK_CLASSES = (InfViTBlock, WeightFormerBlock, VECABlock)


def check_signature(method, spec) -> None:
    """``method`` takes ``spec``'s positional parameters (names, kinds, defaults, in order)
    and its keyword-only ones; what stands for ``**block_inputs`` in ``spec`` is keyword-only
    parameters in ``method``."""
    spec_params = list(inspect.signature(spec).parameters.values())
    params = list(inspect.signature(method).parameters.values())
    positional = [p for p in spec_params if p.kind is p.POSITIONAL_OR_KEYWORD]
    assert [(p.name, p.kind, p.default) for p in params[:len(positional)]] == \
        [(p.name, p.kind, p.default) for p in positional]
    named = params[len(positional):]
    assert all(p.kind is p.KEYWORD_ONLY for p in named), named
    for p in spec_params:
        if p.kind is p.KEYWORD_ONLY:
            assert (p.name, p.default) in [(q.name, q.default) for q in named]
    if not any(p.kind is p.VAR_KEYWORD for p in spec_params):
        assert len(named) == sum(p.kind is p.KEYWORD_ONLY for p in spec_params)


@pytest.mark.parametrize('block_class', BLOCK_CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize('member', ['forward', 'interactions', 'forward_streamed'])
def test_methods_have_the_protocol_signatures(block_class, member):
    # A method of the instance (not a staticmethod): it may depend on the block's options.
    assert inspect.isfunction(inspect.getattr_static(block_class, member))
    check_signature(getattr(block_class, member), getattr(PlainBlock, member))


@pytest.mark.parametrize('block_class', BLOCK_CLASSES, ids=lambda c: c.__name__)
def test_stream_passes_is_a_property(block_class):
    assert isinstance(inspect.getattr_static(block_class, 'stream_passes'), property)


@pytest.mark.parametrize('case', list(CASES))
def test_blocks_follow_the_protocol(case):
    make, num_extra, named = CASES[case]
    torch.manual_seed(0)
    block = make().eval()
    assert isinstance(block, PlainBlock)
    assert isinstance(block.stream_passes, int) and block.stream_passes >= 1
    assert isinstance(block.interactions(4, num_extra), int)
    x = torch.randn(1, num_extra + 4, C)
    mask = torch.tensor([[False, False, False, True]])
    out = block(x, mask, **named())
    out_with_weights, weights = block(x, mask, need_weights=True, **named())
    assert out.shape == x.shape
    torch.testing.assert_close(out_with_weights, out)
    if case.startswith('weightformer'):
        assert weights is None  # no attention, so no weights
    else:
        assert isinstance(weights, torch.Tensor)


@pytest.mark.parametrize('case', list(CASES))
def test_forward_and_forward_streamed_take_the_same_named_arguments(case):
    """One set of named arguments (the backbone's one ``_block_inputs``) serves both paths,
    and the streamed block in bands of one row equals the whole one."""
    make, num_extra, named = CASES[case]
    torch.manual_seed(0)
    block = make().eval()
    x = torch.randn(1, num_extra + 4, C, dtype=torch.float64)
    block.double()
    mask = torch.tensor([[False, False, False, True]])
    with torch.no_grad():
        whole = block(x, mask, **named())
        stream = TokenStream(
            1, (2, 2),
            C,
            x.dtype,
            x.device,
            mask,
            band_rows=1,
            align=2 if case == 'weightformer_dynamic' else 1)
        stream.extra = x[:, :num_extra] if num_extra else None
        stream.write(0, 2, x[:, num_extra:])
        block.forward_streamed(stream, **named())
    torch.testing.assert_close(stream.read(0, 2), whole[:, num_extra:])
    if num_extra:
        torch.testing.assert_close(stream.extra, whole[:, :num_extra])
