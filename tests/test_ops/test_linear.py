"""mmlinear.ops.linear / Linear: a linear layer with its activation, whose CPU inference runs
the backend measured fastest (mmlinear.ops.cpu_dispatch), and its PyTorch reference
wherever a gradient, float64, a dispatch mode or an export needs it."""
import importlib

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from mmlinear.ops import (ACTIVATIONS, BACKEND_VARIABLE, Linear, activate, cpu_choices,
                          forget_choices, linear, linear_reference)
from mmlinear.ops.cpu_dispatch import MEASURE_ROUNDS, choose, onednn_available

BACKENDS = ['auto', 'pytorch', 'onednn']
# The module (``mmlinear.ops.linear`` as an attribute is the function).
linear_module = importlib.import_module('mmlinear.ops.linear')


@pytest.fixture(autouse=True)
def fresh_choices(monkeypatch):
    """Every test measures (or is told) its own choices."""
    monkeypatch.delenv(BACKEND_VARIABLE, raising=False)
    forget_choices()
    yield
    forget_choices()


def inputs(*leading, out=80, dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(*leading, 48, generator=g).to(dtype)
    weight = (torch.randn(out, 48, generator=g) / 7).to(dtype)
    bias = torch.randn(out, generator=g).to(dtype)
    return x, weight, bias


def test_the_reference_is_f_linear_then_the_activation():
    x, weight, bias = inputs(5)
    y = F.linear(x, weight, bias)
    assert torch.equal(linear_reference(x, weight, bias), y)
    assert torch.equal(linear_reference(x, weight, bias, 'gelu'), F.gelu(y))
    u, g = y.chunk(2, dim=-1)  # the first half feeds the SiLU (VECA's released fc1)
    assert torch.equal(linear_reference(x, weight, bias, 'swiglu'), F.silu(u) * g)


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('activation', ACTIVATIONS)
@pytest.mark.parametrize('leading', [(5, ), (2, 7)])
@pytest.mark.parametrize('with_bias', [True, False])
def test_inference_matches_the_reference_on_every_backend(monkeypatch, backend, activation, leading,
                                                          with_bias):
    monkeypatch.setenv(BACKEND_VARIABLE, backend)
    x, weight, bias = inputs(*leading)
    bias = bias if with_bias else None
    expected = linear_reference(x, weight, bias, activation)
    with torch.no_grad():
        out = linear(x, weight, bias, activation)
    assert out.shape == expected.shape
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('backend', BACKENDS)
@pytest.mark.parametrize('activation', ACTIVATIONS)
def test_bfloat16_and_autocast_match_the_reference(monkeypatch, backend, activation):
    monkeypatch.setenv(BACKEND_VARIABLE, backend)
    x, weight, bias = inputs(6)
    with torch.no_grad():
        bf16 = linear(*(t.bfloat16() for t in (x, weight, bias)), activation)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            autocast = linear(x, weight, bias, activation)
            expected = linear_reference(x, weight, bias, activation)
    assert bf16.dtype == autocast.dtype == expected.dtype == torch.bfloat16
    for out in (bf16, autocast):
        torch.testing.assert_close(out.float(), expected.float(), atol=6e-2, rtol=3e-2)


@pytest.mark.parametrize('backend', ['auto', 'onednn'])
def test_bfloat16_runs_the_reference_where_onednn_has_no_bfloat16(monkeypatch, backend):
    # As on a CPU without AVX-512, where oneDNN refuses to create a bfloat16 primitive.
    monkeypatch.setenv(BACKEND_VARIABLE, backend)
    monkeypatch.setattr(torch.ops.mkldnn, '_is_mkldnn_bf16_supported', lambda: False)

    def refused(*args, **kwargs):
        raise AssertionError('oneDNN was called in bfloat16')

    monkeypatch.setattr(linear_module, '_onednn_linear', refused)
    forget_choices()
    x, weight, bias = (t.bfloat16() for t in inputs(6))
    with torch.no_grad():
        out = linear(x, weight, bias, 'gelu')
        with torch.autocast('cpu', dtype=torch.bfloat16):
            autocast = linear(x.float(), weight.float(), bias.float(), 'gelu')
    assert torch.equal(out, linear_reference(x, weight, bias, 'gelu'))
    assert autocast.dtype == torch.bfloat16
    assert onednn_available(torch.float32) == onednn_available()


@pytest.mark.parametrize('backend', BACKENDS)
def test_a_transposed_weight_is_read_as_it_is(monkeypatch, backend):
    monkeypatch.setenv(BACKEND_VARIABLE, backend)
    x, weight, bias = inputs(6)
    stored = weight.t().contiguous()  # (in, out), as the dynamic linear layer keeps it
    with torch.no_grad():
        out = linear(x, stored.t(), bias, 'gelu')
    torch.testing.assert_close(out, F.gelu(x @ stored + bias), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize('activation', ACTIVATIONS)
def test_when_a_gradient_is_needed_it_is_the_reference_exactly(monkeypatch, activation):
    monkeypatch.setenv(BACKEND_VARIABLE, 'onednn')
    x, weight, bias = inputs(3, 5)
    x.requires_grad_()
    out = linear(x, weight, bias, activation)
    assert torch.equal(out, linear_reference(x, weight, bias, activation))
    out.sum().backward()
    assert x.grad is not None


def test_float64_and_a_flop_counter_take_the_reference_without_a_measurement(monkeypatch):
    monkeypatch.setenv(BACKEND_VARIABLE, 'onednn')
    x, weight, bias = inputs(4)
    with torch.no_grad():
        out = linear(x.double(), weight.double(), bias.double(), 'gelu')
        assert torch.equal(out, linear_reference(x.double(), weight.double(), bias.double(),
                                                 'gelu'))
        with FlopCounterMode(display=False) as counter:
            linear(x, weight, bias)
    assert counter.get_total_flops() == 2 * 4 * 48 * 80


def test_mixed_dtypes_get_pytorchs_own_error():
    x, weight, bias = inputs(4)
    with torch.no_grad(), pytest.raises(RuntimeError):
        linear(x, weight.double(), bias)


@pytest.mark.skipif(not onednn_available(), reason='no oneDNN in this PyTorch')
def test_the_choice_is_measured_once_per_kind_whatever_the_row_count():
    x, weight, bias = inputs(3000)
    with torch.no_grad():
        linear(x[:3], weight, bias, 'gelu')
        linear(x, weight, bias, 'gelu')  # a whole image after a band: the same backend
        linear(x, weight, bias)
    choices = cpu_choices()
    assert set(choices) == {('linear', 'gelu', torch.float32, 48, 80, True),
                            ('linear', None, torch.float32, 48, 80, True)}
    assert set(choices.values()) <= {'pytorch', 'onednn'}


def test_choose_times_every_candidate_in_rounds_and_keeps_the_result():
    calls = {'pytorch': 0, 'onednn': 0}
    builds = []

    def make_candidates():
        builds.append(1)

        def count(name):
            calls[name] += 1

        return {name: (lambda name=name: count(name)) for name in calls}

    first = choose('key', tuple(calls), make_candidates)
    assert first in calls
    assert calls == {'pytorch': 1 + MEASURE_ROUNDS, 'onednn': 1 + MEASURE_ROUNDS}
    assert choose('key', tuple(calls), make_candidates) == first
    assert len(builds) == 1 and cpu_choices() == {'key': first}


def test_the_environment_overrides_the_measurement(monkeypatch):

    def make_candidates():
        raise AssertionError('a requested backend is not measured')

    monkeypatch.setenv(BACKEND_VARIABLE, 'onednn')
    assert choose('key', ('pytorch', 'onednn'), make_candidates) == 'onednn'
    assert choose('key', ('pytorch', ), make_candidates) == 'pytorch'
    monkeypatch.setenv(BACKEND_VARIABLE, ' PyTorch ')
    assert choose('key', ('pytorch', 'onednn'), make_candidates) == 'pytorch'


def test_a_bad_backend_value_names_the_choices(monkeypatch):
    monkeypatch.setenv(BACKEND_VARIABLE, 'mkl')
    x, weight, bias = inputs(2)
    with torch.no_grad(), pytest.raises(ValueError, match=r"'mkl'.*'auto', 'pytorch', 'onednn'"):
        linear(x, weight, bias)


def test_bad_activations_name_the_allowed_ones(monkeypatch):
    x, weight, bias = inputs(2)
    monkeypatch.setenv(BACKEND_VARIABLE, 'onednn')  # the fused gate says so too
    with torch.no_grad(), pytest.raises(ValueError, match='even out_features'):
        linear(x, weight[:5], bias[:5], 'swiglu')
    with pytest.raises(ValueError, match='one of'):
        linear(x, weight, bias, 'relu')
    with pytest.raises(ValueError, match='even'):
        activate(torch.randn(2, 5), 'swiglu')
    with pytest.raises(ValueError, match='even out_features'):
        Linear(4, 5, activation='swiglu')


def test_the_layer_keeps_the_linear_state_dict_and_halves_for_swiglu():
    layer = Linear(48, 80, activation='swiglu')
    assert isinstance(layer, torch.nn.Linear)
    assert set(layer.state_dict()) == {'weight', 'bias'}
    x = torch.randn(3, 48)
    with torch.no_grad():
        out = layer(x)
    assert out.shape == (3, 40)
    torch.testing.assert_close(out, linear_reference(x, layer.weight, layer.bias, 'swiglu'))
    assert 'activation=swiglu' in repr(layer)
