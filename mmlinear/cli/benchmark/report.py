"""The benchmark's numbers: fitted scaling exponents, the machine, and the written results
(``results.json``, ``results.csv``, ``results.md`` and ``scaling.png``)."""
import csv
import json
import math
import os
import os.path as osp
import platform
import time
from typing import Dict, List, Sequence, Tuple

from .cases import OK, num_tokens, series_key
from .plotting import plot_scaling

CSV_FIELDS = ('model', 'resolution', 'tokens', 'batch', 'dtype', 'mode', 'device', 'status',
              'median_ms', 'throughput_img_s', 'peak_mem_mb', 'predicted_mem_mb', 'band_rows',
              'energy_j_per_img', 'energy_source', 'warmup', 'repeats', 'note')
# Added to the CSV when the rows have compiled times (``--compile``).
COMPILE_CSV_FIELDS = ('compiled_median_ms', 'compiled_over_eager', 'compile_s')


def fit_exponent(tokens: Sequence[float],
                 values: Sequence[float],
                 last: int = 3) -> Tuple[float, List[float]]:
    """Least-squares slope of log(value) against log(tokens) over the largest ``last`` points.

    Args:
        tokens (Sequence[float]): Token counts (positive).
        values (Sequence[float]): Times or memory, same length; points whose value is not
            positive (or None: a failed case) are left out.
        last (int): How many of the largest token counts to fit. Defaults to 3.

    Returns:
        tuple[float, list[float]]: The exponent (nan with fewer than two distinct points) and
        the token counts used.
    """
    if len(tokens) != len(values):
        raise ValueError(f'tokens and values differ in length: {len(tokens)} vs {len(values)}')
    if last < 2:
        raise ValueError(f'last must be >= 2 to fit a slope, got {last}')
    points = sorted((t, v) for t, v in zip(tokens, values) if t > 0 and v and v > 0)[-last:]
    if len({t for t, _ in points}) < 2:
        return float('nan'), [t for t, _ in points]
    xs = [math.log(t) for t, _ in points]
    ys = [math.log(v) for _, v in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx)**2 for x in xs)
    return slope, [t for t, _ in points]


def summarize_fits(rows: List[dict], last: int) -> List[dict]:
    """Fitted time and memory exponents per series, with the token counts used.

    Args:
        rows (list[dict]): Result rows.
        last (int): Fit over this many largest completed resolutions.

    Returns:
        list[dict]: Per series (sorted): ``model``, ``batch``, ``dtype``, ``mode``,
        ``time_exponent``, ``memory_exponent``, ``fit_tokens``.
    """
    fits = []
    for key in sorted({series_key(r) for r in rows}, key=lambda k: [str(v) for v in k]):
        done = [r for r in rows if series_key(r) == key and r['status'] == OK]
        tokens = [r['tokens'] for r in done]
        time_exp, used = fit_exponent(tokens, [r['median_ms'] for r in done], last)
        mem_exp, _ = fit_exponent(tokens, [r['peak_mem_mb'] for r in done], last)
        fits.append(
            dict(
                model=key[0],
                batch=key[1],
                dtype=key[2],
                mode=key[3],
                time_exponent=time_exp,
                memory_exponent=mem_exp,
                fit_tokens=used))
    return fits


def format_exponent(exponent: float) -> str:
    """An exponent for tables and the console; nan (a single point) as 'n/a (one point)'."""
    return 'n/a (one point)' if math.isnan(exponent) else f'{exponent:.2f}'


def fit_line(fit: dict) -> str:
    """The console line of one series' fit."""
    return (f'{fit["model"]} b{fit["batch"]} {fit["dtype"]} {fit["mode"]}: time exponent '
            f'{format_exponent(fit["time_exponent"])}, memory exponent '
            f'{format_exponent(fit["memory_exponent"])} (fitted over N = {fit["fit_tokens"]})')


def markdown_tables(rows: List[dict], fits: List[dict]) -> str:
    """Latency / peak-memory table (series x resolution) and the fitted exponents, markdown;
    and compiled against eager time when the rows have it (``--compile``).

    Args:
        rows (list[dict]): Result rows.
        fits (list[dict]): The series' fits, in table order.

    Returns:
        str: Two (three with compiled times) markdown tables separated by blank lines.
    """
    resolutions = sorted({r['resolution'] for r in rows}, key=num_tokens)
    lines = [
        '| model | dtype | mode | batch | ' + ' | '.join(f'{r}px ({num_tokens(r):,} tok)'
                                                         for r in resolutions) + ' |',
        '|---|---|---|---|' + '---|' * len(resolutions)
    ]
    for fit in fits:
        key = series_key(fit)
        cells = []
        for resolution in resolutions:
            row = next((r for r in rows if r['resolution'] == resolution and series_key(r) == key),
                       None)
            if row is None:
                cells.append('')
            elif row['status'] == OK:
                cells.append(f'{row["median_ms"]:,.0f} ms / {row["peak_mem_mb"]:,.0f} MB')
            else:
                cells.append(row['status'] + (f' ({row["note"]})' if row['note'] else ''))
        lines.append(f'| {fit["model"]} | {fit["dtype"]} | {fit["mode"]} | {fit["batch"]} | ' +
                     ' | '.join(cells) + ' |')
    lines += [
        '', '| model | dtype | mode | batch | time exponent | memory exponent | '
        'fitted over N = |', '|---|---|---|---|---|---|---|'
    ]
    for fit in fits:
        lines.append(f'| {fit["model"]} | {fit["dtype"]} | {fit["mode"]} | {fit["batch"]} | '
                     f'{format_exponent(fit["time_exponent"])} | '
                     f'{format_exponent(fit["memory_exponent"])} | '
                     f'{", ".join(f"{t:,}" for t in fit["fit_tokens"])} |')
    compiled = [r for r in rows if r.get('compiled_median_ms') is not None]
    if compiled:
        lines += [
            '', '| model | dtype | mode | batch | resolution | eager | compiled | '
            'compiled / eager | first compiled call |', '|---|---|---|---|---|---|---|---|---|'
        ]
        for r in compiled:
            lines.append(f'| {r["model"]} | {r["dtype"]} | {r["mode"]} | {r["batch"]} | '
                         f'{r["resolution"]}px | {r["median_ms"]:,.1f} ms | '
                         f'{r["compiled_median_ms"]:,.1f} ms | {r["compiled_over_eager"]:.2f} | '
                         f'{r["compile_s"]:,.1f} s |')
    return '\n'.join(lines + streamed_table(rows) + energy_lines(rows)) + '\n'


def energy_lines(rows: List[dict]) -> List[str]:
    """Joules per image of the measured rows (lines of a markdown table), or the one line
    that says why the machine could not tell (none without measured rows).

    Args:
        rows (list[dict]): Result rows.

    Returns:
        list[str]: The lines, preceded by a blank line.
    """
    measured = [r for r in rows if r.get('energy_j_per_img') is not None]
    if not measured:
        reasons = sorted({r['energy_source'] for r in rows if r.get('energy_source')})
        return ['', f'Energy per image: not available ({"; ".join(reasons)}).'] if reasons else []
    lines = [
        '', '| model | dtype | mode | batch | resolution | energy per image | counter |',
        '|---|---|---|---|---|---|---|'
    ]
    for r in measured:
        lines.append(f'| {r["model"]} | {r["dtype"]} | {r["mode"]} | {r["batch"]} | '
                     f'{r["resolution"]}px | {r["energy_j_per_img"]:.3g} J | '
                     f'{r["energy_source"]} |')
    return lines


def streamed_table(rows: List[dict]) -> List[str]:
    """Streamed against whole-image rows of the same case, with the memory model's
    prediction beside the measured peak (lines of a markdown table; none without streamed
    rows).

    Args:
        rows (list[dict]): Result rows.

    Returns:
        list[str]: The table's lines, preceded by a blank line.
    """
    streamed = [r for r in rows if r['mode'] == 'streamed' and r['status'] == OK]
    if not streamed:
        return []
    lines = [
        '', '| model | dtype | batch | resolution | band (patch rows) | whole | streamed | '
        'streamed / whole (time) | streamed / whole (memory) | predicted peak | '
        'predicted / measured |', '|---|---|---|---|---|---|---|---|---|---|---|'
    ]
    for r in streamed:
        whole = next((w for w in rows if w['mode'] == 'forward' and w['status'] == OK and (
            w['model'], w['dtype'], w['batch'],
            w['resolution']) == (r['model'], r['dtype'], r['batch'], r['resolution'])), None)
        shown = f'{r["median_ms"] / 1e3:,.1f} s / {r["peak_mem_mb"]:,.0f} MB'
        whole_shown, time_ratio, mem_ratio = 'not run', '', ''
        if whole is not None:
            whole_shown = f'{whole["median_ms"] / 1e3:,.1f} s / {whole["peak_mem_mb"]:,.0f} MB'
            time_ratio = f'{r["median_ms"] / whole["median_ms"]:.2f}'
            mem_ratio = f'{r["peak_mem_mb"] / whole["peak_mem_mb"]:.2f}'
        predicted = r.get('predicted_mem_mb')
        lines.append(f'| {r["model"]} | {r["dtype"]} | {r["batch"]} | {r["resolution"]}px | '
                     f'{r["band_rows"]} | {whole_shown} | {shown} | {time_ratio} | {mem_ratio} | '
                     f'{predicted:,.0f} MB | {predicted / r["peak_mem_mb"]:.2f} |')
    return lines


#: Environment variables that cap the instruction set of the CPU kernels below the CPU's own
#: (ATen's vectorised kernels and the extension's, oneDNN's, MKL's): set, they make this CPU
#: run the kernels of a lesser one, so a figure measured under them names them.
KERNEL_ISA_VARIABLES = ('ATEN_CPU_CAPABILITY', 'ONEDNN_MAX_CPU_ISA', 'MKL_ENABLE_INSTRUCTIONS')


def kernel_isa() -> str:
    """The instruction set the CPU kernels run, as a figure should name it.

    Returns:
        str: ATen's CPU capability (e.g. 'AVX512', 'AVX2'), and the caps of
        :data:`KERNEL_ISA_VARIABLES` that are set, e.g. 'AVX2 (ONEDNN_MAX_CPU_ISA=AVX2)'.
    """
    import torch
    caps = [f'{name}={os.environ[name]}' for name in KERNEL_ISA_VARIABLES if os.environ.get(name)]
    capability = torch.backends.cpu.get_cpu_capability()
    return f'{capability} ({", ".join(caps)})' if caps else capability


def machine_info(device: str) -> dict:
    """The machine, software and load the numbers were measured on.

    Args:
        device (str): 'cpu' or 'cuda' (the GPU's name is added for 'cuda').

    Returns:
        dict: ``date``, ``python``, ``torch``, ``cpu``, ``kernel_isa`` (:func:`kernel_isa`),
        ``cpu_count``, ``load_average`` and possibly ``gpu``.
    """
    import torch
    info = dict(
        date=time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime()),
        python=platform.python_version(),
        torch=torch.__version__,
        cpu=platform.processor() or platform.machine(),
        kernel_isa=kernel_isa(),
        cpu_count=os.cpu_count(),
        load_average=list(os.getloadavg()))
    try:
        with open('/proc/cpuinfo') as f:
            info['cpu'] = next(
                line.split(':', 1)[1].strip() for line in f if line.startswith('model name'))
    except (OSError, StopIteration):
        pass
    if device == 'cuda' and torch.cuda.is_available():
        info['gpu'] = torch.cuda.get_device_name()
    return info


def write_outputs(out: str, rows: List[dict], fits: List[dict], settings: Dict, info: Dict) -> None:
    """Write ``results.json``, ``results.csv``, ``results.md`` and ``scaling.png``.

    Args:
        out (str): The folder (created if needed).
        rows (list[dict]): Result rows.
        fits (list[dict]): The series' fits.
        settings (dict): The run's settings, stored in the JSON; its ``device``, ``threads``
            and ``fit_last`` go into the figure's title.
        info (dict): :func:`machine_info`.
    """
    os.makedirs(out, exist_ok=True)
    with open(osp.join(out, 'results.json'), 'w') as f:
        json.dump(dict(settings=settings, machine=info, results=rows, fits=fits), f, indent=1)
    with open(osp.join(out, 'results.csv'), 'w', newline='') as f:
        compiled = any('compiled_median_ms' in r for r in rows)
        writer = csv.DictWriter(
            f,
            fieldnames=CSV_FIELDS + (COMPILE_CSV_FIELDS if compiled else ()),
            extrasaction='ignore')
        writer.writeheader()
        writer.writerows(rows)
    with open(osp.join(out, 'results.md'), 'w') as f:
        f.write(markdown_tables(rows, fits))
    title = (f'{settings["device"]}, {info.get("cpu", "")} ({settings["threads"]} threads), '
             f'{info["date"]}; slope = least squares over the largest {settings["fit_last"]} '
             'points')
    plot_scaling(rows, fits, osp.join(out, 'scaling.png'), title)
