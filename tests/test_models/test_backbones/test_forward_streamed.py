"""BasePlainBackbone.forward_streamed: the whole-image forward, band by band (InfViT,
WeightFormer, VECA)."""
import os

import numpy as np
import pytest
import torch

from mmlinear.models.backbones import VECA, InfViT, WeightFormer
from mmlinear.models.streaming.image_rows import ImageRows
from mmlinear.models.utils import pixel_padding_mask


def max_relative_error(actual, expected):
    return ((actual - expected).abs().max() / expected.abs().max()).item()


def randomised(model, seed=0):
    """``model`` in eval mode with every parameter moved off its initial value (LayerNorms
    included), so no term of the streamed path can vanish by accident."""
    torch.manual_seed(seed)
    model.init_weights()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model.eval()


def infvit(dtype=torch.float64, **kwargs):
    kwargs = dict(dict(arch='test', img_size=48, patch_size=8, out_indices=(0, 1)), **kwargs)
    return randomised(InfViT(**kwargs)).to(dtype)


def weightformer(dtype=torch.float64, **kwargs):
    """Five blocks: two dynamic ones (1 and 4), three static."""
    arch = dict(embed_dims=32, num_layers=5, feedforward_channels=64)
    kwargs = dict(dict(arch=arch, patch_size=8, out_indices=(1, 4)), **kwargs)
    return randomised(WeightFormer(**kwargs)).to(dtype)


def veca(dtype=torch.float64, **kwargs):
    kwargs = dict(dict(arch='test', patch_size=8, out_indices=(0, 1)), **kwargs)
    return randomised(VECA(**kwargs)).to(dtype)


def image(shape=(2, 3, 77, 61), dtype=torch.float64, seed=1):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def assert_streamed_equals_whole(model, x, mask=None, tol=1e-12, **kwargs):
    with torch.no_grad():
        expected = model(x, mask)
    streamed = model.forward_streamed(x, mask, **kwargs)
    assert len(streamed) == len(expected)
    for got, want in zip(streamed, expected):
        assert got.shape == want.shape and got.dtype == want.dtype
        assert max_relative_error(got, want) <= tol
    return streamed


@pytest.mark.parametrize('out_type', ['featmap', 'cls_token', 'avg_featmap', 'raw'])
@pytest.mark.parametrize('band_rows', [1, 3, 100])
@pytest.mark.parametrize('masked', [False, True])
def test_linear_infvit_streamed_equals_forward_in_float64(out_type, band_rows, masked):
    """One patch row, a height that does not divide the 10-row grid, and more than the grid;
    an odd image (77 x 61, partial patches) whose position table is interpolated from 6 x 6;
    with a padding mask the positions are those of each image's valid region."""
    model = infvit(out_type=out_type)
    mask = pixel_padding_mask([(77, 61), (45, 30)], (77, 61)) if masked else None
    assert_streamed_equals_whole(model, image(), mask, band_rows=band_rows)


@pytest.mark.parametrize('policy', ['interpolate', 'tile'])
@pytest.mark.parametrize('band_rows', [1, 3])
@pytest.mark.parametrize('masked', [False, True])
def test_infvit_streamed_equals_forward_for_each_position_policy(policy, band_rows, masked):
    """A 10 x 8 grid on a 6 x 6 table (not a multiple of its period): each policy's band rows
    are those of its whole table, with and without a padding mask."""
    model = infvit(out_type='featmap', pos_extrapolation=policy)
    mask = pixel_padding_mask([(77, 61), (45, 30)], (77, 61)) if masked else None
    assert_streamed_equals_whole(model, image(), mask, band_rows=band_rows)


def test_linear_infvit_streamed_equals_forward_in_float32():
    model = infvit(torch.float32, arch='infvit-demo', out_type='featmap', out_indices=(1, 3))
    x = image((1, 3, 130, 98), torch.float32)
    assert_streamed_equals_whole(model, x, tol=1e-5, band_rows=4)


@pytest.mark.parametrize('out_type', ['featmap', 'avg_featmap'])
@pytest.mark.parametrize('band_rows', [1, 3, 100])
@pytest.mark.parametrize('masked', [False, True])
@pytest.mark.parametrize('size', [(77, 61), (69, 45)])
def test_weightformer_streamed_equals_forward_in_float64(out_type, band_rows, masked, size):
    """Grids of 10 x 8 and 9 x 6 (an odd last row, left out of the 2 x 2 pooling); band
    heights are rounded to even rows internally, one row asked for included."""
    model = weightformer(out_type=out_type)
    mask = pixel_padding_mask([size, (45, 30)], size) if masked else None
    assert_streamed_equals_whole(model, image((2, 3, *size)), mask, band_rows=band_rows)


def test_weightformer_streamed_equals_forward_in_float32():
    model = weightformer(torch.float32, out_type='featmap', out_indices=(0, 4))
    x = image((1, 3, 150, 98), torch.float32)
    assert_streamed_equals_whole(model, x, tol=1e-5, band_rows=4)


@pytest.mark.parametrize('out_type', ['featmap', 'cls_token'])
@pytest.mark.parametrize('band_rows', [1, 3, 100])
@pytest.mark.parametrize('masked', [False, True])
def test_veca_streamed_equals_forward_in_float64(out_type, band_rows, masked):
    """The cores move between blocks; the patches' RoPE angles are those of each image's
    valid grid under a mask."""
    model = veca(out_type=out_type, active_cores=16)
    mask = pixel_padding_mask([(77, 61), (45, 30)], (77, 61)) if masked else None
    assert_streamed_equals_whole(model, image(), mask, band_rows=band_rows)


@pytest.mark.parametrize('policy', ['interpolate', 'tile', 'extend'])
@pytest.mark.parametrize('band_rows', [1, 3])
@pytest.mark.parametrize('masked', [False, True])
def test_veca_streamed_equals_forward_for_each_position_policy(policy, band_rows, masked):
    """A 10 x 8 grid on a 6 x 6 training grid (not a multiple of its period): each policy's
    band coordinates are those of its whole grid, with and without a padding mask."""
    model = veca(out_type='featmap', active_cores=16, img_size=48, pos_extrapolation=policy)
    mask = pixel_padding_mask([(77, 61), (45, 30)], (77, 61)) if masked else None
    assert_streamed_equals_whole(model, image(), mask, band_rows=band_rows)


def test_veca_budget_and_output_projection_stream_too():
    """``active_cores`` per call as forward takes it; the last output through the head's
    projection to ``out_channels``."""
    model = veca(out_channels=48, out_type='featmap')
    x = image()
    with torch.no_grad():
        expected = model(x, active_cores=8)
    streamed = model.forward_streamed(x, band_rows=4, active_cores=8)
    assert streamed[-1].shape == (2, 48, 10, 8)
    for got, want in zip(streamed, expected):
        assert max_relative_error(got, want) <= 1e-12
    with pytest.raises(ValueError, match=r'active_cores must be one of \(8, 16'):
        model.forward_streamed(x, band_rows=4, active_cores=12)


def test_veca_streamed_equals_forward_in_float32():
    model = veca(torch.float32, arch='small', out_type='featmap', out_indices=(3, 11))
    x = image((1, 3, 130, 98), torch.float32)
    assert_streamed_equals_whole(model, x, tol=1e-5, band_rows=4)


@pytest.mark.parametrize(
    'options',
    [dict(tie_qk=True),
     dict(rho_mode='per_layer'),
     dict(qkv_bias=False),
     dict(attn_type='none')])
def test_streamed_forward_covers_the_attention_options(options):
    assert_streamed_equals_whole(infvit(**options), image(), band_rows=2)


class RecordingProgress:
    """Stands in for BandProgress: records the total, and the rows counted when each part
    of the run begins."""
    runs = []

    def __init__(self, total, enabled=None, label=''):
        self.total, self.done, self.starts = total, 0, []
        RecordingProgress.runs.append(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        pass

    def describe(self, description):
        self.starts.append((description, self.done))

    def advance(self, steps=1, description=None):
        self.done += steps


@pytest.mark.parametrize('build', [
    infvit, lambda: infvit(attn_type='none'), weightformer, veca,
    lambda: veca(out_type='featmap', out_indices=(1, ))
])
@pytest.mark.parametrize('band_rows', [1, 3])
def test_progress_counts_every_pass_of_every_layer_in_patch_rows(monkeypatch, build, band_rows):
    """The bar's total is the grid's rows times the passes the blocks declare, and each block
    starts exactly where the rows its predecessors counted end: a block whose declared passes
    differ from the passes it makes moves the next block's start."""
    monkeypatch.setattr('mmlinear.models.streaming.streamed_backbone.BandProgress',
                        RecordingProgress)
    RecordingProgress.runs.clear()
    model = build()
    model.forward_streamed(image((1, 3, 77, 61)), band_rows=band_rows)
    (bar, ) = RecordingProgress.runs
    rows = 10  # ceil(77 / 8)
    expected_starts, done = [('embedding', 0)], rows
    for index, block in enumerate(model.blocks):
        expected_starts.append((f'block {index + 1}/{model.num_layers}', done))
        done += block.stream_passes * rows
    assert bar.starts == expected_starts
    assert bar.done == bar.total == done


def test_native_grid_and_attached_mask():
    """At the table's own grid no interpolation happens; a mask attached to the tensor by the
    data preprocessors is found as forward finds it."""
    model = infvit(out_type='featmap')
    x = image((2, 3, 48, 48))
    assert_streamed_equals_whole(model, x, band_rows=2)
    x.padding_mask = pixel_padding_mask([(48, 48), (20, 41)], (48, 48))
    with torch.no_grad():
        expected = model(x)
    streamed = model.forward_streamed(x, band_rows=2)
    assert max_relative_error(streamed[-1], expected[-1]) <= 1e-12


def test_array_like_input_read_by_rows(tmp_path):
    """A numpy memmap is read a band at a time and gives the tensor's result."""
    model = infvit(torch.float32, out_type='featmap')
    x = image((1, 3, 77, 61), torch.float32)
    path = tmp_path / 'image.f32'
    array = np.memmap(path, dtype=np.float32, mode='w+', shape=tuple(x.shape))
    array[:] = x.numpy()
    array.flush()
    source = np.memmap(path, dtype=np.float32, mode='r', shape=tuple(x.shape))
    with torch.no_grad():
        expected = model(x)
    streamed = model.forward_streamed(source, band_rows=3)
    assert max_relative_error(streamed[-1], expected[-1]) <= 1e-5


def test_disk_buffer_leaves_no_file_behind(tmp_path):
    """The residual stream and the dense outputs live in anonymous mapped files: the folder
    stays empty while the outputs are in use, and after a failing call too."""
    model = infvit(out_type='raw')
    streamed = assert_streamed_equals_whole(
        model, image(), band_rows=3, buffer='disk', buffer_dir=str(tmp_path))
    assert os.listdir(tmp_path) == []
    assert streamed[0].sum().isfinite()  # still readable
    broken = torch.full((2, 3, 77, 61), float('nan'), dtype=torch.float64)
    with pytest.raises(TypeError, match='floating-point'):
        model.forward_streamed(
            broken.to(torch.int64), band_rows=3, buffer='disk', buffer_dir=str(tmp_path))
    # A failure in the middle of the block loop (here: the head) leaves nothing either.
    model.final_norm.register_forward_hook(lambda *args:
                                           (_ for _ in ()).throw(RuntimeError('head failed')))
    with pytest.raises(RuntimeError, match='head failed'):
        model.forward_streamed(image(), band_rows=3, buffer='disk', buffer_dir=str(tmp_path))
    assert os.listdir(tmp_path) == []


def test_bfloat16_model_streams_through_a_disk_buffer(tmp_path):
    """numpy has no bfloat16: the mapped buffer holds its bits as int16."""
    model = infvit(torch.bfloat16, out_type='featmap')
    x = image((1, 3, 40, 40), torch.bfloat16)
    with torch.no_grad():
        expected = model(x)[-1].float()
    streamed = model.forward_streamed(x, band_rows=2, buffer='disk', buffer_dir=str(tmp_path))
    assert streamed[-1].dtype == torch.bfloat16
    assert max_relative_error(streamed[-1].float(), expected) <= 2e-2


@pytest.mark.parametrize('attn_type,reason', [('pure', 'no fixed-size summary'),
                                              ('softmax', 'no fixed-size summary'),
                                              ('performer', 'baseline without a streamed path'),
                                              ('nystromformer', 'baseline without'),
                                              ('agent', 'baseline without')])
def test_attention_without_a_streamed_path_is_refused(attn_type, reason):
    model = infvit(attn_type=attn_type)
    with pytest.raises(
            ValueError,
            match=f"{reason}.*cannot stream; attn_type values that "
            "stream: 'linear', 'none'"):
        model.forward_streamed(image(), band_rows=2)


@pytest.mark.parametrize('band_rows', [0, -1, 2.5, True])
def test_bad_band_height_is_refused(band_rows):
    with pytest.raises(ValueError, match='band_rows must be an integer >= 1'):
        infvit().forward_streamed(image(), band_rows=band_rows)


def test_the_retired_band_height_keyword_warns_and_gives_the_same_result():
    model = weightformer()
    x = torch.randn(1, 3, 40, 48, dtype=torch.float64)
    with pytest.warns(FutureWarning, match="'chunk_rows' is deprecated .* use 'band_rows'"):
        old = model.forward_streamed(x, chunk_rows=2, progress=False)
    for got, expected in zip(old, model.forward_streamed(x, band_rows=2, progress=False)):
        assert torch.equal(got, expected)
    with pytest.warns(FutureWarning, match="'chunk_rows' is deprecated .* use 'band_rows'"):
        memory = model.predict_streamed_memory(x.shape, chunk_rows=2)
    assert memory == model.predict_streamed_memory(x.shape, band_rows=2)


def test_bad_input_is_refused():
    model = infvit()
    with pytest.raises(ValueError, match="unknown buffer 'ssd'; allowed: 'memory', 'disk'"):
        model.forward_streamed(image(), band_rows=2, buffer='ssd')
    with pytest.raises(ValueError, match=r'expected images of shape \(B, 3, H, W\)'):
        model.forward_streamed(image((2, 4, 32, 32)), band_rows=2)
    with pytest.raises(ValueError, match='at least one patch'):
        model.forward_streamed(image((1, 3, 7, 32)), band_rows=2)
    with pytest.raises(TypeError, match='bool'):
        model.forward_streamed(image(), torch.zeros(2, 77, 61), band_rows=2)
    with pytest.raises(RuntimeError, match=r'\.eval\(\)'):
        model.train().forward_streamed(image(), band_rows=2)


def test_memory_model_counts_stream_outputs_input_and_band():
    """The parts follow from the shapes: B * N * C values for the stream and each dense
    output, the band pass's workspace per band token, and the image when it is a tensor."""
    model = infvit(torch.float32, out_type='featmap')  # C = 32, MLP 64, 8 x 8 patches
    memory = model.predict_streamed_memory((2, 3, 77, 61), band_rows=3)
    tokens = 2 * 10 * 8
    assert memory.stream_bytes == tokens * 32 * 4
    assert memory.output_bytes == 2 * tokens * 32 * 4  # two out_indices
    assert memory.input_bytes == 2 * 3 * 77 * 61 * 4
    assert memory.band_bytes == 2 * 3 * 8 * (2 * 64 + 4 * 32 + 2 * 3 * 64) * 4
    assert memory.total_bytes == sum(memory[:4]) and memory.band_rows == 3
    on_disk = model.predict_streamed_memory((2, 3, 77, 61),
                                            band_rows=3,
                                            buffer='disk',
                                            input_in_memory=False)
    assert on_disk.stream_bytes == on_disk.output_bytes == on_disk.input_bytes == 0
    cls = infvit(torch.float32, out_type='cls_token')
    assert cls.predict_streamed_memory((2, 3, 77, 61), band_rows=3).output_bytes == 0


def live_tensor_peak(fn):
    """The most bytes of CPU tensors alive at once while ``fn`` runs (the profiler's
    allocation and free events, in the order they happened; what was alive before is not
    counted)."""
    with torch.profiler.profile(
            activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == '[memory]']
    alive = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        alive += event.nbytes()
        peak = max(peak, alive)
    assert peak > 0, 'the profiler recorded no allocation'
    return peak


@pytest.mark.parametrize('build', [infvit, weightformer, veca])
@pytest.mark.parametrize('compute_dtype', [None, torch.bfloat16])
def test_memory_model_covers_every_live_tensor(build, compute_dtype):
    """What the prediction counts beyond the image is at least every tensor the streamed
    forward holds at once (recorded by the profiler), in float32 and under bf16 autocast,
    whose prediction is smaller (its linear layers' outputs are bf16)."""
    model = build(torch.float32, out_type='featmap')
    x = image((1, 3, 1024, 1024), torch.float32)  # 128 x 128 patches
    autocast = torch.autocast('cpu', dtype=torch.bfloat16, enabled=compute_dtype is not None)
    with torch.no_grad(), autocast:
        predicted = model.predict_streamed_memory(x.shape, band_rows=32)
        held = live_tensor_peak(lambda: model.forward_streamed(x, band_rows=32))
    assert predicted == model.predict_streamed_memory(
        x.shape, band_rows=32, compute_dtype=compute_dtype)  # the context's autocast
    assert held <= predicted.total_bytes - predicted.input_bytes
    if compute_dtype is not None:
        full = model.predict_streamed_memory(x.shape, band_rows=32)
        assert predicted.band_bytes < full.band_bytes
        assert predicted.stream_bytes == full.stream_bytes  # the stream stays float32


#: Two blocks at the width of the S presets (WeightFormer's second block is dynamic), where the
#: per-token terms weigh as they do in the released models.
S_WIDTH = {
    InfViT: dict(embed_dims=384, num_layers=2, num_heads=6, feedforward_channels=1536),
    WeightFormer: dict(embed_dims=384, num_layers=2, feedforward_channels=1536),
    VECA: dict(embed_dims=384, num_layers=2, num_heads=6, feedforward_channels=1024),
}


@pytest.mark.parametrize('backbone, options', [(InfViT, {}), (InfViT, dict(context_window=8)),
                                               (WeightFormer, {}), (VECA, {})])
@pytest.mark.parametrize('compute_dtype', [None, torch.bfloat16])
def test_memory_model_per_band_token_follows_the_code(backbone, options, compute_dtype):
    """What the model counts per band token is between what the code holds per band token
    and twice that. The code's figure is measured, not counted: the growth of the
    profiler's live peak from a band of 8 patch rows to one of 16 (each in its own autocast
    context, after a first run that leaves every cache warm), per token added. Adding a
    per-token tensor to a block without counting it fails the lower bound; a count that
    drifts far above what the code holds fails the upper one (measured here: 1.2 to 1.8
    times)."""
    model = randomised(
        backbone(arch=S_WIDTH[backbone], patch_size=16, out_type='featmap', **options)).float()
    x = image((1, 3, 32 * 16, 8 * 16), torch.float32)  # 32 x 8 patches

    def live_peak(band_rows):
        with torch.no_grad(), torch.autocast(
                'cpu', dtype=torch.bfloat16, enabled=compute_dtype is not None):
            return live_tensor_peak(lambda: model.forward_streamed(x, band_rows=band_rows))

    live_peak(8)
    held = (live_peak(16) - live_peak(8)) / (8 * 8)
    counted = (model.predict_streamed_memory(x.shape, band_rows=16,
                                             compute_dtype=compute_dtype).band_bytes -
               model.predict_streamed_memory(x.shape, band_rows=8,
                                             compute_dtype=compute_dtype).band_bytes) / (8 * 8)
    assert held <= counted <= 2 * held


@pytest.mark.parametrize('build', [infvit, weightformer, veca])
@pytest.mark.parametrize('compute_dtype', [None, torch.bfloat16])
def test_memory_model_covers_the_patch_embedding_of_a_band(build, compute_dtype):
    """Embedding a band (its rows read and padded, its patches gathered and projected) holds
    no more than the model's band pass, in float32 and under bf16 autocast: nothing that
    grows with the band beyond what the model counts, as a CPU library's convolution can
    take (oneDNN's bf16 kernel on a Xeon with AMX: about 400 bytes per pixel). With 16 x 16
    patches of 3 bands (768 pixel values per token) the pixels outweigh each test backbone's
    band activations, so without the model's pixel term this fails."""
    model = build(torch.float32, patch_size=16, out_type='featmap')
    x = image((1, 3, 512, 1000), torch.float32)  # the last patch column is partial
    rows = 16
    autocast = torch.autocast('cpu', dtype=torch.bfloat16, enabled=compute_dtype is not None)
    with torch.no_grad(), autocast:
        predicted = model.predict_streamed_memory(x.shape, band_rows=rows)
        held = live_tensor_peak(
            lambda: model.patch_embed.project(model._embed_band_pixels(ImageRows(x, 3), 0, rows)))
    assert held <= predicted.band_bytes


def test_autocast_narrows_the_prediction_of_float32_weights_only():
    """Autocast leaves float64 computations in float64, so their prediction stays whole."""
    shape = (1, 3, 256, 256)
    for dtype, narrowed in ((torch.float32, True), (torch.float64, False)):
        model = weightformer(dtype)
        plain = model.predict_streamed_memory(shape, band_rows=4)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            under_autocast = model.predict_streamed_memory(shape, band_rows=4)
        assert (under_autocast.band_bytes < plain.band_bytes) == narrowed


def test_memory_limit_picks_the_tallest_band_that_fits():
    model = infvit(out_type='featmap')
    shape = (2, 3, 77, 61)
    sizes = {r: model.predict_streamed_memory(shape, band_rows=r).total_bytes for r in (1, 4, 5)}
    limit = (sizes[4] + sizes[5]) / 2 / 2**30
    assert model.pick_band_rows(shape, None, limit, 'memory', True) == 4
    assert model.pick_band_rows(shape, 2, limit, 'memory', True) == 2  # band_rows caps it
    streamed = assert_streamed_equals_whole(model, image(shape), mem_limit_gb=limit)
    assert streamed[-1].shape == (2, 32, 10, 8)
    with pytest.raises(ValueError, match=r'needs 0\.\d\d GB \(input .*, limit 1e-06 GB'):
        model.forward_streamed(image(shape), mem_limit_gb=1e-6)


def test_without_band_height_or_limit_the_band_fits_the_default_workspace():
    model = infvit(out_type='featmap')
    model.default_band_bytes = model.predict_streamed_memory((2, 3, 77, 61), band_rows=6).band_bytes
    assert model.pick_band_rows((2, 3, 77, 61), None, None, 'memory', True) == 6
    assert_streamed_equals_whole(model, image())


@pytest.mark.parametrize('build', [infvit, weightformer, veca])
def test_streamed_under_bf16_autocast_stays_at_bf16_rounding_of_forward(build):
    """Under CPU bf16 autocast both paths round their products to bfloat16 (in different
    places: the summaries are summed in float32 band by band); they agree to bf16 rounding."""
    model = build(torch.float32, out_type='featmap')
    x = image(dtype=torch.float32)
    with torch.no_grad(), torch.autocast('cpu', dtype=torch.bfloat16):
        expected = model(x)
        streamed = model.forward_streamed(x, band_rows=2)
    for got, want in zip(streamed, expected):
        assert max_relative_error(got.float(), want.float()) <= 3e-2
