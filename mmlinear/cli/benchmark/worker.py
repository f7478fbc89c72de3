"""Measuring one benchmark case, in a fresh Python process per case
(:func:`mmlinear.utils.fresh_process.run_in_fresh_process`, the launcher of every benchmark).

A fresh process per case keeps the peak memory of one case from leaking into the next:

- CPU: after the model is built and its weights are resident, the process resets the kernel's
  resident-set high-water mark (``/proc/self/clear_refs``) and reads its RSS; the reported
  peak is ``VmHWM - RSS`` after the timed runs, i.e. the input, the activations and every
  temporary, but not the weights. Where ``clear_refs`` is unavailable, ``ru_maxrss`` minus the
  RSS after construction is used (``mem_method`` in the result says which;
  :mod:`mmlinear.utils.peak_memory`).
- CUDA: ``torch.cuda.max_memory_allocated`` minus the allocation after construction.

The energy of the timed runs (not the warm-up) comes from the hardware's counters where they
can be read (:mod:`.energy`: RAPL on the CPU, NVML on CUDA), as joules per image; where they
cannot, the result says why.

Allocation failures are results (status ``'OOM'``), not errors; on the CPU ``mem_limit_gb``
caps the worker's data segment (``RLIMIT_DATA``) so that a large case fails cleanly instead of
pushing the machine into swap or the OOM killer.

With ``compile`` the same model is then timed again through ``torch.compile(fullgraph=True)``
(inductor) in the same process, after the eager runs, so the two times share the machine's
state; the first compiled call (compilation included) is reported apart.
"""
import json
import os.path as osp
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Optional, Tuple

from mmlinear.utils.fresh_process import WorkerFailed, print_result, run_in_fresh_process
from mmlinear.utils.peak_memory import cpu_peak, is_oom, limit_data_segment, reset_cpu_peak
from mmlinear.utils.timing import time_ms
from .cases import OK, REFUSED, image_hw
from .energy import energy_meter


def _streamed_forward(model: Any, case: dict, shape: Tuple[int, int, int,
                                                           int]) -> Tuple[Callable, float, int]:
    """The streamed forward of a case, its predicted peak memory (MiB) and its band height
    (patch rows).

    The image is one tensor (``stream_input='tensor'``) or a raw file read by rows
    (``'file'``, written a few rows at a time into a temporary folder, so it never is in
    memory); the band height is the case's ``band_rows`` (None: the model's default) and the
    buffer its ``stream_buffer``.
    """
    import tempfile

    import torch

    from .raw_image import RawImageFile
    buffer = case.get('stream_buffer', 'memory')
    if case.get('stream_input', 'tensor') == 'file':
        with tempfile.TemporaryDirectory(prefix='mmlinear_bench_') as folder:
            # Open, the file stays readable once its folder is gone.
            source = RawImageFile.write_random(osp.join(folder, 'image.f32'), shape)
    else:
        source = torch.randn(*shape)
    in_memory = isinstance(source, torch.Tensor)
    band_rows = model.pick_band_rows(shape, case.get('band_rows'), None, buffer, in_memory)
    predicted = model.predict_streamed_memory(
        shape, band_rows=band_rows, buffer=buffer, input_in_memory=in_memory)

    def run_model(forward: Callable = model) -> Tuple[Any, ...]:
        return model.forward_streamed(source, band_rows=band_rows, buffer=buffer, progress=False)

    return run_model, predicted.total_bytes / 2**20, band_rows


def segmentor_config(model: str) -> Optional[Any]:
    """The config of ``model`` when it is a file of an mmseg segmentor (a model with a
    ``decode_head``), else None (a preset or a backbone's config)."""
    if not (model.endswith('.py') and osp.isfile(model)):
        return None
    from mmengine.config import Config

    import mmlinear  # noqa: F401  (registers the ``mmlinear::`` config scope)
    cfg = Config.fromfile(model)
    return cfg if 'decode_head' in cfg.model else None


def _build_segmentor(cfg: Any, case: dict) -> Any:
    """The segmentor of a config, with random weights (nothing pretrained is loaded)."""
    from mmseg.apis import init_model
    if case['mode'] not in ('forward', 'streamed'):
        raise ValueError(f"a segmentor is measured in modes 'forward' (mmseg's whole-image "
                         f"inference) and 'streamed' (segment_large_image), not "
                         f"{case['mode']!r}")
    cfg.model.backbone.init_cfg = None
    return init_model(cfg, None, device=case['device'])


def _segmentation(model: Any, case: dict, height: int,
                  width: int) -> Tuple[Callable, Optional[float], Optional[int]]:
    """One image segmented whole: mmseg's ``inference_model`` ('forward') or
    :func:`~mmlinear.apis.segment_large_image` ('streamed'), and the latter's predicted peak
    memory (MiB).

    The image is a random 8-bit (H, W, 3) array in memory (``stream_input='tensor'``; the
    prediction counts it, as the measured peak does) or a ``.npy`` file read by rows
    (``'file'``).
    """
    import tempfile

    import numpy as np
    from mmseg.apis import inference_model

    from mmlinear.apis import plan_large_image, segment_large_image
    rng = np.random.default_rng(0)
    if case.get('stream_input', 'tensor') == 'file':
        with tempfile.TemporaryDirectory(prefix='mmlinear_bench_') as folder:
            # Mapped, the file stays readable once its folder is gone.
            image = np.lib.format.open_memmap(
                osp.join(folder, 'image.npy'), mode='w+', dtype=np.uint8, shape=(height, width, 3))
            for start in range(0, height, 256):
                image[start:start + 256] = rng.integers(0, 256, image[start:start + 256].shape)
    else:
        image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    if case['mode'] == 'forward':
        return lambda forward=None: inference_model(model, image), None, None
    buffer = case.get('stream_buffer', 'memory')
    plan = plan_large_image(model, image, band_rows=case.get('band_rows'), buffer=buffer)

    def run_model(forward: Any = None) -> Any:
        return segment_large_image(model, image, plan=plan, buffer=buffer, progress=False)

    # The array in memory is the caller's, not the model's, but this process's peak holds it.
    in_memory = 0 if isinstance(image, np.memmap) else image.nbytes
    return run_model, (plan.memory.total_bytes + in_memory) / 2**20, plan.band_rows


def run_case(case: dict) -> dict:
    """Build the model and time it on one input size, in this process.

    Args:
        case (dict): ``model`` (a preset or config file), ``resolution`` (int or [H, W]),
            ``batch``, ``dtype`` ('fp32', 'bf16', 'fp16'), ``mode`` ('forward', 'train',
            'streamed'), ``device`` ('cpu', 'cuda'), ``warmup``, ``repeats``, ``threads`` and
            optionally ``mem_limit_gb`` (CPU only) and ``compile`` (also time the compiled
            model). A segmentor's config (with a ``decode_head``) measures the whole model on
            one image: mmseg's whole-image inference ('forward') or
            :func:`~mmlinear.apis.segment_large_image` ('streamed').

    Returns:
        dict: ``status`` ('ok', 'OOM' or 'refused': the built model raised a ValueError on
        the case's input), ``times_ms`` (one per repeat), ``median_ms``,
        ``peak_mem_mb`` (of the eager runs), ``mem_method``, ``params``, ``energy_source``
        (the counter, or why there is none) and with a counter ``energy_j_per_img`` (of the
        timed eager runs), for an OOM or a refusal ``error`` (its message),
        and with ``compile``: ``compile_s`` (the first compiled call), ``compiled_times_ms`` and
        ``compiled_median_ms``.
    """
    import torch
    from mmengine.logging import MMLogger
    MMLogger.get_instance('mmlinear_benchmark', log_level='WARNING')
    from mmlinear.apis.model_presets import build_backbone

    if case['device'] == 'cpu':
        torch.set_num_threads(case['threads'])
        if case.get('mem_limit_gb'):
            limit_data_segment(case['mem_limit_gb'])
    device = torch.device(case['device'])
    height, width = image_hw(case['resolution'])
    autocast_dtype = {'bf16': torch.bfloat16, 'fp16': torch.float16}.get(case['dtype'])
    result = dict(status=OK, times_ms=[], median_ms=None, peak_mem_mb=None, mem_method=None)
    segmentor_cfg = segmentor_config(case['model'])
    model = None
    try:
        if segmentor_cfg is not None:
            model = _build_segmentor(segmentor_cfg, case)
        else:
            model = build_backbone(case['model']).to(device)
            model.train(case['mode'] == 'train')
        result['params'] = sum(p.numel() for p in model.parameters())
        if device.type == 'cuda':
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            baseline, method = torch.cuda.memory_allocated(), 'cuda max_memory_allocated'
        else:
            baseline, method = reset_cpu_peak()
        result['mem_method'] = method
        shape = (case['batch'], 3, height, width)

        def autocast() -> torch.autocast:
            return torch.autocast(
                device.type,
                dtype=autocast_dtype or torch.float32,
                enabled=autocast_dtype is not None)

        # Band heights are picked and predicted under the autocast the forward runs in.
        if segmentor_cfg is not None:
            with autocast():
                run_model, result['predicted_mem_mb'], result['band_rows'] = _segmentation(
                    model, case, height, width)
        elif case['mode'] == 'streamed':
            with autocast():
                run_model, result['predicted_mem_mb'], result['band_rows'] = _streamed_forward(
                    model, case, shape)
        else:
            x = torch.randn(*shape, device=device)

            def run_model(forward: Callable = model) -> Tuple[Any, ...]:
                return forward(x)

        def iteration(forward: Callable = model) -> None:
            grad = torch.enable_grad() if case['mode'] == 'train' else torch.inference_mode()
            with grad, autocast():
                outs = run_model(forward)
                if case['mode'] == 'train':
                    sum(o.float().sum() for o in outs).backward()
            if case['mode'] == 'train':
                model.zero_grad(set_to_none=True)
            if device.type == 'cuda':
                torch.cuda.synchronize()

        time_ms(iteration, case['warmup'], 0)
        meter, result['energy_source'] = energy_meter(device.type)
        if meter is None:
            result['times_ms'] = time_ms(iteration, 0, case['repeats'])
        else:
            meter.start()
            try:
                result['times_ms'] = time_ms(iteration, 0, case['repeats'])
            finally:
                joules = meter.stop()
            result['energy_j_per_img'] = joules / (case['repeats'] * case['batch'])
        peak = (torch.cuda.max_memory_allocated() if device.type == 'cuda' else cpu_peak(method))
        result['peak_mem_mb'] = max(peak - baseline, 0) / 2**20
        result['median_ms'] = statistics.median(result['times_ms'])
        if case.get('compile'):
            compiled = torch.compile(model, fullgraph=True)
            start = time.perf_counter()
            iteration(compiled)
            result['compile_s'] = time.perf_counter() - start
            result['compiled_times_ms'] = time_ms(lambda: iteration(compiled), case['warmup'],
                                                  case['repeats'])
            result['compiled_median_ms'] = statistics.median(result['compiled_times_ms'])
    except Exception as error:  # noqa: BLE001  (allocation failures and refusals are recorded)
        if is_oom(error):
            result.update(status='OOM', error=str(error).splitlines()[0][:200])
        elif isinstance(error, ValueError) and model is not None:
            # The model was built, so the case's input is what it refuses (Linformer beyond
            # the tokens it was built for, a mixer that does not stream): a result of the
            # case. A ValueError while building is a wrong model and stays an error.
            result.update(status=REFUSED, error=str(error).splitlines()[0][:300])
        else:
            raise
    return result


def launch_case(case: dict, timeout: float) -> dict:
    """Run :func:`run_case` in a fresh interpreter and return its result.

    Args:
        case (dict): See :func:`run_case`.
        timeout (float): Seconds after which the worker is killed.

    Returns:
        dict: The worker's result; ``status`` 'timeout' when it was killed, 'OOM' when it died
        by a signal (the kernel's OOM killer).

    Raises:
        RuntimeError: If the worker failed otherwise, with the end of its stderr.
    """
    code = 'from mmlinear.cli.benchmark.worker import worker_main; worker_main()'
    try:
        return run_in_fresh_process(['-c', code], case, timeout)
    except subprocess.TimeoutExpired:
        return dict(status='timeout', note=f'killed after {timeout:.0f} s')
    except WorkerFailed as failure:
        if failure.returncode < 0:
            return dict(status='OOM', note=f'worker killed by signal {-failure.returncode}')
        raise RuntimeError(f'benchmark worker failed for {case}:\n{failure.stderr[-3000:]}')


def worker_main() -> None:
    """Entry point of the worker process: the case is the JSON in ``sys.argv[1]``; the result
    is printed by :func:`print_result`."""
    print_result(run_case(json.loads(sys.argv[1])))
