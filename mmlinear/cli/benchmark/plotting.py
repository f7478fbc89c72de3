"""The benchmark's figure: latency and peak memory against patch tokens, log-log."""
import math
from typing import List

from .cases import OK, series_key


def plot_scaling(rows: List[dict], fits: List[dict], path: str, title: str) -> None:
    """Log-log time and peak memory against tokens, one line per series, saved as a PNG.

    Args:
        rows (list[dict]): Result rows (see ``planner.run_grid``); only completed ones drawn.
        fits (list[dict]): One fit per series (see ``report.summarize_fits``); its exponents
            label the lines.
        path (str): The PNG to write.
        title (str): The figure's title.
    """
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    # Only what differs between the series goes into the labels.
    varying = {name: len({f[name] for f in fits}) > 1 for name in ('dtype', 'mode', 'batch')}
    for fit in fits:
        key = series_key(fit)
        done = sorted((r for r in rows if r['status'] == OK and series_key(r) == key),
                      key=lambda r: r['tokens'])
        if not done:
            continue
        label = fit['model'] + (f' {fit["dtype"]}' if varying['dtype'] else '') \
            + (f' {fit["mode"]}' if varying['mode'] else '') \
            + (f' b{fit["batch"]}' if varying['batch'] else '')
        tokens = [r['tokens'] for r in done]
        for ax, name, exp in ((axes[0], 'median_ms', fit['time_exponent']),
                              (axes[1], 'peak_mem_mb', fit['memory_exponent'])):
            suffix = '' if math.isnan(exp) else f' (slope {exp:.2f})'
            ax.plot(tokens, [r[name] for r in done], marker='o', ms=3, label=label + suffix)
    for ax, ylabel in ((axes[0], 'median latency (ms)'), (axes[1], 'peak memory (MB)')):
        ax.set_xscale('log')
        ax.set_yscale('log')
        ax.set_xlabel('patch tokens N')
        ax.set_ylabel(ylabel)
        ax.grid(True, which='both', alpha=.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
