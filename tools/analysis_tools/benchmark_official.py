"""Latency of mmlinear's WeightFormer-S and VECA-S against their official implementations.

Both implementations run in one process, on the same weights and the same input, timed in
alternation (:func:`mmlinear.cli.benchmark.interleaved_ms`: one call of each per round, the
order reversed every other round), so that a shared machine's load falls on both alike. The
official code is not part of mmlinear: pass the path of a local copy of its repository.

What is compared (the same output on both sides, batch 1, eval mode, inference mode):

- WeightFormer-S (github.com/LeapLabTHU/WeightFormer, ``model/wfm.py``): the official
  ``wfm_small`` model's ``forward_features`` (17 blocks, the final norm and the token mean,
  (1, 384); the classifier is left out) against ``mmlinear.WeightFormer(arch='s',
  out_type='avg_featmap')``, the same (1, 384).
- VECA-S (github.com/alansong1322/VECA, ``veca/model.py``, family 'small', all 64 cores):
  the official ``VECA.forward`` (core 0 and the patch tokens after the final norm) against
  ``mmlinear.VECA(arch='small').forward_tokens`` (the same two outputs).

The official model is built with its own constructor and random weights; its state dict is
then checked against mmlinear's key layout (the released checkpoints' keys, which both
converters of ``tools/model_converters`` keep) and loaded into the mmlinear model. Before
timing, the outputs of both are compared in float32 and the run stops unless they agree
(the float64 agreement is checked by the tests of the models; float32 leaves rounding
differences of order 1e-5). Under bfloat16 autocast the difference to the float32 official
output is printed for both implementations.

Example:
    python tools/analysis_tools/benchmark_official.py \\
        --weightformer-repo PATH/TO/WeightFormer --veca-repo PATH/TO/VECA \\
        --resolutions 896 2048 --dtypes float32 bfloat16 --threads 2
"""
import argparse
import contextlib
import importlib.util
import os
import os.path as osp
import statistics
import sys
from functools import partial
from types import ModuleType
from typing import Callable, Dict, Hashable, List, NamedTuple, Optional, Sequence

import torch
from torch import Tensor, nn

from mmlinear.cli.benchmark import interleaved_ms, machine_info
from mmlinear.ops import BACKEND_VARIABLE, cpu_choices
from mmlinear.ops.cpu_dispatch import requested_backend
from mmlinear.utils.checkpoint_conversion import check_key_layout

MODELS = ('weightformer', 'veca')
DTYPES = {'float32': torch.float32, 'bfloat16': torch.bfloat16}
#: Where each official model lives inside its repository.
OFFICIAL_FILES = {'weightformer': ('model', 'wfm.py'), 'veca': ('veca', 'model.py')}
#: The arguments the official ``wfm_small`` gives its ``VisionTransformer``.
OFFICIAL_WEIGHTFORMER_S = dict(patch_size=16, embed_dim=384, depth=17)
#: Largest allowed |mmlinear - official| in float32, relative to max(1, max |official|).
FLOAT32_TOLERANCE = 1e-3


class Pair(NamedTuple):
    """One model in both implementations, ready to call on an image batch.

    Attributes:
        name (str): 'WeightFormer-S' or 'VECA-S'.
        official (Callable): Image batch -> the compared outputs (a tuple of tensors).
        ours (Callable): The same for mmlinear.
    """
    name: str
    official: Callable[[Tensor], tuple]
    ours: Callable[[Tensor], tuple]


class Row(NamedTuple):
    """One line of the result table."""
    model: str
    resolution: int
    dtype: str
    official_ms: float
    ours_ms: float
    paired_ratio: float
    ours_diff: float
    official_diff: float

    @property
    def ratio(self) -> float:
        """mmlinear / official of the medians."""
        return self.ours_ms / self.official_ms


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Latency of mmlinear WeightFormer-S / VECA-S against the official code, '
        'timed side by side on the same weights.')
    parser.add_argument(
        '--weightformer-repo',
        help='a local copy of github.com/LeapLabTHU/WeightFormer (holds model/wfm.py)')
    parser.add_argument(
        '--veca-repo', help='a local copy of github.com/alansong1322/VECA (holds veca/model.py)')
    parser.add_argument('--resolutions', type=int, nargs='+', default=[896, 2048])
    parser.add_argument('--dtypes', nargs='+', default=['float32', 'bfloat16'])
    parser.add_argument('--threads', type=int, default=2, help='torch intra-op threads')
    parser.add_argument(
        '--warmup',
        type=int,
        default=0,
        help='untimed rounds per case besides the one that measures the output difference')
    parser.add_argument('--repeats', type=int, default=5, help='timed rounds per case')
    args = parser.parse_args(argv)
    check_args(args, parser.error)
    return args


def check_args(args: argparse.Namespace, error: Callable[[str], None]) -> None:
    """Report the first invalid option through ``error`` (argparse's: exit code 2)."""
    if not args.weightformer_repo and not args.veca_repo:
        error('give --weightformer-repo, --veca-repo or both')
    bad_dtypes = [d for d in args.dtypes if d not in DTYPES]
    if bad_dtypes:
        error(f'--dtypes must be among {list(DTYPES)}, got {bad_dtypes}')
    bad_sizes = [r for r in args.resolutions if r < 16 or r % 16]
    if bad_sizes:
        # The official models drop a partial last patch; multiples of 16 compare like with like.
        error(f'--resolutions must be multiples of 16 (the patch size), got {bad_sizes}')
    for option in ('threads', 'repeats'):
        if getattr(args, option) < 1:
            error(f'--{option} must be at least 1, got {getattr(args, option)}')
    if args.warmup < 0:
        error(f'--warmup must be at least 0, got {args.warmup}')


def official_file(model: str, repo: str) -> str:
    """The official model file of ``model`` inside the repository copy ``repo``.

    Raises:
        FileNotFoundError: If ``repo`` does not hold it (naming the file looked for).
    """
    path = osp.join(repo, *OFFICIAL_FILES[model])
    if not osp.isfile(path):
        raise FileNotFoundError(f'{repo} does not hold the official {model} code: '
                                f'{osp.join(*OFFICIAL_FILES[model])} not found in it')
    return path


def import_official(model: str, repo: str) -> ModuleType:
    """Import the official model module of ``model`` from a repository copy.

    WeightFormer's ``model/wfm.py`` imports only torch and timm and is loaded on its own (its
    package ``__init__`` pulls in the training configuration); VECA's ``veca`` package is
    imported with ``repo`` on ``sys.path``, as its code imports ``veca.config``.
    """
    path = official_file(model, repo)
    if model == 'veca':
        sys.path.insert(0, osp.abspath(repo))
        import veca.model
        return veca.model
    name = 'official_weightformer'
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # timm's @register_model looks the module up by name while the file runs.
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def load_official_weights(ours: nn.Module, official: nn.Module, what: str) -> None:
    """Load the official model's weights into ours, after checking the key layout."""
    state = official.state_dict()
    check_key_layout(state, ours.state_dict(), what)
    ours.load_state_dict(state)


def weightformer_pair(repo: str, resolutions: Sequence[int]) -> Pair:
    """WeightFormer-S: the official ``forward_features`` and our 'avg_featmap' output.

    The official patch embedding (timm's) accepts only the size it was built for, so one
    official model per resolution is built, all holding the same weights. They are built
    with the official ``VisionTransformer`` class and ``wfm_small``'s arguments: the official
    ``wfm_small`` goes through a timm builder call that timm 1.0 no longer accepts.
    """
    from mmlinear.models.backbones.weightformer import WeightFormer
    wfm = import_official('weightformer', repo)
    officials = {
        r: wfm.VisionTransformer(img_size=r, num_classes=0, **OFFICIAL_WEIGHTFORMER_S).eval()
        for r in resolutions
    }
    first = officials[resolutions[0]]
    for other in officials.values():
        other.load_state_dict(first.state_dict())
    ours = WeightFormer(arch='s', out_type='avg_featmap').eval()
    load_official_weights(ours, first, 'the WeightFormer-S layout')
    return Pair('WeightFormer-S', lambda x: (officials[x.shape[-1]].forward_features(x), ),
                lambda x: ours(x))


def veca_pair(repo: str) -> Pair:
    """VECA-S with all 64 cores: the official ``forward`` and our ``forward_tokens``."""
    from mmlinear.models.backbones.veca import VECA
    official_model = import_official('veca', repo)
    from veca.config import MultiResFinetuneConfig, normalize_nested_settings
    cfg = MultiResFinetuneConfig(model_family='small')
    normalize_nested_settings(cfg)
    cfg.init_patch_from_dinov3 = False  # random weights: no download
    official = official_model.VECA(cfg).eval()
    ours = VECA(arch='small', active_cores=cfg.num_query_tokens).eval()
    load_official_weights(ours, official, 'the VECA-S layout')

    def run_ours(x: Tensor) -> tuple:
        tokens = ours.forward_tokens(x)
        return tokens['global'], tokens['patches']

    return Pair('VECA-S', official, run_ours)


def max_abs_diff(outputs: Sequence[Tensor], references: Sequence[Tensor]) -> float:
    """The largest |output - reference| over matching tensors, in float32."""
    return max(float((o.float() - r.float()).abs().max()) for o, r in zip(outputs, references))


def check_agreement(pair: Pair, x: Tensor) -> tuple:
    """Compare both float32 outputs on ``x``; return the official ones.

    Raises:
        AssertionError: If they differ by more than ``FLOAT32_TOLERANCE`` relative to the
            largest official value (at least 1).
    """
    official, ours = pair.official(x), pair.ours(x)
    shapes = [tuple(t.shape) for t in official], [tuple(t.shape) for t in ours]
    if shapes[0] != shapes[1]:
        raise AssertionError(f'{pair.name}: output shapes differ, official {shapes[0]} vs '
                             f'mmlinear {shapes[1]}')
    diff = max_abs_diff(ours, official)
    scale = max(1., max(float(t.abs().max()) for t in official))
    print(f'{pair.name} {x.shape[-1]} px float32: max |mmlinear - official| = {diff:.2e} '
          f'(max |official| {scale:.2f})')
    if not diff <= FLOAT32_TOLERANCE * scale:
        raise AssertionError(f'{pair.name}: the outputs do not agree ({diff:.2e} > '
                             f'{FLOAT32_TOLERANCE} x {scale:.2f}); not timing it')
    return official


def precision(dtype: str) -> contextlib.AbstractContextManager:
    """Autocast to ``dtype`` on the CPU, or nothing for float32."""
    if dtype == 'float32':
        return contextlib.nullcontext()
    return torch.autocast('cpu', dtype=DTYPES[dtype])


def run_in(dtype: str, fn: Callable[[Tensor], tuple], x: Tensor) -> tuple:
    """``fn(x)`` under the :func:`precision` of ``dtype``."""
    with precision(dtype):
        return fn(x)


def measure(pair: Pair, resolution: int, dtypes: Sequence[str], warmup: int,
            repeats: int) -> List[Row]:
    """Check the agreement at ``resolution``, then time both at every dtype.

    The calls that measure each dtype's output difference are the first, untimed round;
    ``warmup`` more rounds follow before the ``repeats`` timed ones.
    """
    x = torch.randn(1, 3, resolution, resolution, generator=torch.Generator().manual_seed(0))
    reference = check_agreement(pair, x)
    rows = []
    for dtype in dtypes:
        # Autocast is entered per call, as around a model's forward: inside one autocast
        # region, the casts of the weights would be cached from one call to the next.
        official, ours = (partial(run_in, dtype, fn, x) for fn in (pair.official, pair.ours))
        official_diff = max_abs_diff(official(), reference)
        ours_diff = max_abs_diff(ours(), reference)
        times = interleaved_ms([official, ours], warmup, repeats)
        official_ms, ours_ms = (statistics.median(t) for t in times)
        paired = statistics.median(o / r for r, o in zip(*times))
        rows.append(
            Row(pair.name, resolution, dtype, official_ms, ours_ms, paired, ours_diff,
                official_diff))
        print(
            f'{pair.name} {resolution} px {dtype}: official {official_ms:.1f} ms, mmlinear '
            f'{ours_ms:.1f} ms ({ours_ms / official_ms:.2f}x)',
            flush=True)
    return rows


def format_table(rows: Sequence[Row]) -> str:
    """A markdown table of the results, one line per model, resolution and dtype.

    ``ratio`` is mmlinear / official of the median latencies; ``paired`` the median of the
    per-round ratios (robust to a load that changes between rounds); the two ``diff``
    columns the largest difference of each implementation's outputs, at that dtype, from
    the official float32 outputs.
    """
    lines = [
        '| model | px | dtype | official ms | mmlinear ms | ratio | paired | diff mmlinear '
        '| diff official |',
        '|---|---|---|---|---|---|---|---|---|',
    ]
    for row in rows:
        lines.append(f'| {row.model} | {row.resolution} | {row.dtype} | {row.official_ms:.1f} | '
                     f'{row.ours_ms:.1f} | {row.ratio:.2f}x | {row.paired_ratio:.2f}x | '
                     f'{row.ours_diff:.1e} | {row.official_diff:.1e} |')
    return '\n'.join(lines)


def format_dtype_ratios(rows: Sequence[Row]) -> List[str]:
    """For each model and resolution timed in float32 and another dtype, that dtype's
    latency over float32's, for both implementations."""
    float32 = {(r.model, r.resolution): r for r in rows if r.dtype == 'float32'}
    lines = []
    for row in rows:
        base = float32.get((row.model, row.resolution))
        if row.dtype != 'float32' and base is not None:
            lines.append(f'{row.model} {row.resolution} px: {row.dtype} / float32 = '
                         f'{row.ours_ms / base.ours_ms:.2f}x (mmlinear), '
                         f'{row.official_ms / base.official_ms:.2f}x (official)')
    return lines


def format_cpu_choices(choices: Dict[Hashable, str]) -> str:
    """One line per CPU backend mmlinear's layers chose in this run (``mmlinear.ops``'s
    measurement at first use), so that a table says which library its figures ran."""
    lines = [f'CPU backends chosen ({BACKEND_VARIABLE}={requested_backend()}):']
    for key, backend in sorted(choices.items(), key=str):
        lines.append(f'  {key}: {backend}')
    return '\n'.join(lines if choices else lines + ['  none (no dispatched layer ran)'])


def format_load(label: str) -> str:
    """``label`` and the 1 / 5 / 15-minute load averages."""
    return f'{label}: load average ' + ' / '.join(f'{v:.2f}' for v in os.getloadavg())


def build_pairs(args: argparse.Namespace) -> List[Pair]:
    """The models asked for, official weights loaded into ours."""
    pairs = []
    if args.weightformer_repo:
        pairs.append(weightformer_pair(args.weightformer_repo, args.resolutions))
    if args.veca_repo:
        pairs.append(veca_pair(args.veca_repo))
    return pairs


def main(argv: Optional[Sequence[str]] = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    start_load = format_load('start')
    info = machine_info('cpu')
    print(f'{start_load}; torch {torch.__version__}, {args.threads} threads; {info["cpu"]}, '
          f'kernels {info["kernel_isa"]}')
    try:
        pairs = build_pairs(args)
    except FileNotFoundError as e:
        print(f'error: {e}', file=sys.stderr)
        sys.exit(1)
    rows: List[Row] = []
    with torch.inference_mode():
        for pair in pairs:
            for resolution in args.resolutions:
                rows += measure(pair, resolution, args.dtypes, args.warmup, args.repeats)
    print()
    print(format_table(rows))
    print()
    for line in format_dtype_ratios(rows):
        print(line)
    print(format_cpu_choices(cpu_choices()))
    print(start_load)
    print(format_load('end'))


if __name__ == '__main__':
    main()
