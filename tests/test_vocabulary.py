"""docs/design.md, section 3 ("One vocabulary"): no retired name in the library, the tools,
the configs or the docs, outside the deprecation shims that keep old spellings working for one
release (their lines are listed in ``SHIM_LINES``) and the docs' table of retired spellings
(between ``RETIRED_TABLE`` markers)."""
import re
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

from conftest import REPO_ROOT

ROOT = Path(REPO_ROOT)
#: Where the vocabulary holds: folders searched recursively, and single files.
SEARCHED = ('mmlinear', 'tools', 'configs', 'docs', 'README.md', 'Makefile')
SUFFIXES = {'.py', '.md', '.yml', '.yaml', '.json', '.cpp', '.hpp', '.cu', '.cuh', '.h', ''}

#: Retired name -> what replaced it. Each pattern is a regular expression.
RETIRED: Dict[str, str] = {
    r'\bchunk_rows\b|--chunk-rows\b':
    'band_rows (the backbone\'s band height)',
    r'\bBandView\b|\bband_view\b':
    'ChannelView (mmlinear.apis.channel_view)',
    r'\badapt_input_bands\b':
    'adapt_input_channels',
    r'\b\d+-band\b|\binput bands\b|\bbands \(channels\)|\bmodel_bands\b|\bBGR_BANDS\b':
    'channels: a band is a band of rows only',
    r'\bnum_cores\b|\b_num_cores\b':
    'active_cores (K), max_cores (M) or num_extra_tokens (E)',
    r'\bLinearInfSASummary\b|\badd_queries\b|\badd_keys\b|\.pooled_inputs\(':
    'LinearInfSAQuerySums / LinearInfSAKeyPool (add, result)',
}
#: The (B, n) token mask is key_padding_mask in the attention ops and layers.
TOKEN_MASK_FOLDERS = ('mmlinear/ops', 'mmlinear/models/layers')
BARE_PADDING_MASK = r'(?<![a-z_])padding_mask\b'

#: The deprecation shims: (file, the stripped line) where a retired spelling must appear.
SHIM_LINES = {
    ('mmlinear/apis/band_view.py', '"""Deprecated: :class:`BandView` is '
     ':class:`~mmlinear.apis.channel_view.ChannelView` (a band is'),
    ('mmlinear/apis/band_view.py',
     "__getattr__ = renamed_attributes(globals(), dict(BandView='ChannelView'))"),
    ('mmlinear/models/layers/__init__.py',
     "__getattr__ = renamed_attributes(globals(), dict(adapt_input_bands='adapt_input_channels'))"),
    ('mmlinear/models/layers/patch_embed.py',
     "__getattr__ = renamed_attributes(globals(), dict(adapt_input_bands='adapt_input_channels'))"),
    ('mmlinear/models/streaming/streamed_backbone.py',
     "@renamed_arguments(chunk_rows='band_rows')"),
    ('mmlinear/models/streaming/streamed_backbone.py',
     'aligns them; deprecated spelling ``chunk_rows``).'),
    ('mmlinear/models/streaming/streamed_backbone.py',
     '``chunk_rows``); taller than the grid means one band. A backbone may round it'),
    ('mmlinear/models/streaming/band_planner.py',
     "RENAMED_TEST_KEYS = dict(chunk_rows='band_rows')"),
    ('mmlinear/models/segmentors/streamed_encoder_decoder.py',
     "deprecated spelling ``chunk_rows``), ``head_rows`` (rows of the head's finest level per"),
    ('mmlinear/models/detectors/streamed_two_stage.py',
     "rows; deprecated spelling ``chunk_rows``), ``head_rows`` (rows of a pyramid level per"),
    ('mmlinear/apis/large_image_plan.py', "@renamed_arguments(chunk_rows='band_rows')"),
    ('mmlinear/apis/large_image_plan.py', 'deprecated spelling ``chunk_rows``).'),
    ('mmlinear/apis/large_image_segmentation.py', "@renamed_arguments(chunk_rows='band_rows')"),
    ('mmlinear/apis/large_image_segmentation.py', 'deprecated spelling ``chunk_rows``).'),
    ('mmlinear/apis/large_image_detection.py', "@renamed_arguments(chunk_rows='band_rows')"),
    ('mmlinear/apis/large_image_detection.py', 'deprecated spelling ``chunk_rows``).'),
    ('mmlinear/ops/linear_infsa.py', "@renamed_arguments(padding_mask='key_padding_mask')"),
    ('mmlinear/ops/linear_infsa.py', '(deprecated spelling ``padding_mask``).'),
    ('tools/analysis_tools/benchmark.py', "'--chunk-rows',"),
}
RETIRED_TABLE = ('<!-- retired spellings: start -->', '<!-- retired spellings: end -->')


def searched_files() -> Iterator[Path]:
    for name in SEARCHED:
        path = ROOT / name
        files = sorted(path.rglob('*')) if path.is_dir() else [path]
        for file in files:
            if file.is_file() and file.suffix in SUFFIXES and '__pycache__' not in file.parts:
                yield file


def lines_outside_the_retired_table(text: str) -> Iterator[Tuple[int, str]]:
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() in RETIRED_TABLE:
            inside = line.strip() == RETIRED_TABLE[0]
        elif not inside:
            yield number, line


def retired_uses() -> Tuple[List[str], set]:
    """Every use of a retired name outside the shims, and the shim lines seen."""
    patterns = dict(RETIRED)
    found, shims_seen = [], set()
    for file in searched_files():
        relative = file.relative_to(ROOT).as_posix()
        token_masks = relative.startswith(TOKEN_MASK_FOLDERS) and file.suffix == '.py'
        try:
            text = file.read_text(encoding='utf-8')
        except UnicodeDecodeError:
            continue
        for number, line in lines_outside_the_retired_table(text):
            checks = dict(patterns)
            if token_masks:
                checks[BARE_PADDING_MASK] = 'key_padding_mask for the (B, n) token mask'
            for pattern, replacement in checks.items():
                if re.search(pattern, line):
                    if (relative, line.strip()) in SHIM_LINES:
                        shims_seen.add((relative, line.strip()))
                    else:
                        found.append(f'{relative}:{number}: {line.strip()!r} (use {replacement})')
    return found, shims_seen


def test_no_retired_name_outside_the_deprecation_shims():
    found, shims_seen = retired_uses()
    assert not found, 'retired names (docs/design.md, section 3):\n' + '\n'.join(found)
    # A shim that is gone (or reworded) must leave the allowlist too.
    assert shims_seen == SHIM_LINES, sorted(SHIM_LINES - shims_seen)


def test_the_check_finds_a_retired_name(tmp_path, monkeypatch):
    """The grep is not vacuous: a retired name in a searched file is reported."""
    (tmp_path / 'mmlinear' / 'ops').mkdir(parents=True)
    (tmp_path / 'mmlinear' / 'ops' /
     'op.py').write_text('def f(x, padding_mask=None, chunk_rows=1):\n    return x\n')
    (tmp_path / 'docs').mkdir()
    (tmp_path / 'docs' / 'page.md'
     ).write_text(f'{RETIRED_TABLE[0]}\n`num_cores`\n{RETIRED_TABLE[1]}\na 4-band GeoTIFF\n')
    monkeypatch.setitem(globals(), 'ROOT', tmp_path)
    found, _ = retired_uses()
    assert [entry.split(' (use')[0] for entry in found] == [
        "mmlinear/ops/op.py:1: 'def f(x, padding_mask=None, chunk_rows=1):'",
        "mmlinear/ops/op.py:1: 'def f(x, padding_mask=None, chunk_rows=1):'",
        "docs/page.md:4: 'a 4-band GeoTIFF'",
    ]
