"""The FLOPs the pages quote are the counts ``get_flops.py`` gives (``count_flops`` on fake
tensors: exact and machine-independent), so a change of a model that moves its cost fails here
until the pages say the new figure.

Three checks: every row of the FLOPs table in docs/benchmarks.md; every sentence of
:data:`CLAIMS`, rendered from the counts, is in its page; and every ``<number> GFLOPs`` (M, T,
P) that a page writes is one of those sentences or a figure quoted from a paper or a reference
implementation (:data:`QUOTED`).
"""
import functools
import glob
import os.path as osp
import re
from typing import Callable, List, Tuple

import pytest
from conftest import REPO_ROOT as ROOT

from mmlinear.apis import build_backbone, count_flops, count_params

PAGES = sorted(
    osp.relpath(p, ROOT) for p in [osp.join(ROOT, 'README.md')] +
    glob.glob(osp.join(ROOT, 'configs', '*', 'README.md')) +
    glob.glob(osp.join(ROOT, 'docs', '*.md')))
UNITS = {'M': 1e6, 'G': 1e9, 'T': 1e12, 'P': 1e15}
FLOPS_FIGURE = re.compile(r'(\d[\d,]*(?:\.\d+)?) ?([MGTP])FLOPs')


@functools.lru_cache(maxsize=None)
def backbone(preset: str, active_cores: int = None):
    model = build_backbone(preset)
    model.eval()  # not chained: mmpretrain's ViT.train returns None
    if active_cores is not None:
        model.active_cores = active_cores
    return model


@functools.lru_cache(maxsize=None)
def flops(preset: str, resolution: int, active_cores: int = None) -> int:
    return count_flops(backbone(preset, active_cores), resolution)


def figure(value: float, unit: str, decimals: int) -> str:
    return f'{value / UNITS[unit]:,.{decimals}f}'


# (page, sentence with {} for each figure, figures: (preset, resolution, unit, decimals)).
CLAIMS: List[Tuple[str, str, List[Tuple[str, int, str, int]]]] = [
    ('docs/benchmarks.md', '{} GFLOPs at 224 for Linear', [('infvit-4l-linear', 224, 'G', 2)]),
    ('docs/benchmarks.md', 'and {} for Pure and softmax', [('infvit-4l-pure', 224, 'G', 2)]),
    ('docs/benchmarks.md', '{} TFLOPs at this size', [('infvit-4l-linear', 9216, 'T', 1)]),
    ('docs/benchmarks.md', 'their FLOPs are {} PFLOPs', [('infvit-4l-pure', 9216, 'P', 2)]),
    ('docs/benchmarks.md', 'now costs **{} GFLOPs** at 224 x 224', [('infvit-4l-linear', 224, 'G',
                                                                     2)]),
    ('docs/design.md', '{} GFLOPs for Linear and {} for Pure / softmax',
     [('infvit-4l-linear', 224, 'G', 2), ('infvit-4l-pure', 224, 'G', 2)]),
    ('configs/infvit/README.md', '{} GFLOPs at 224 for Linear', [('infvit-4l-linear', 224, 'G', 2)
                                                                 ]),
    ('configs/infvit/README.md', 'and {} for Pure and softmax', [('infvit-4l-pure', 224, 'G', 2)]),
    ('configs/infvit/README.md', '{} TFLOPs against {} PFLOPs for softmax / Pure',
     [('infvit-4l-linear', 9216, 'T', 1), ('infvit-4l-softmax', 9216, 'P', 2)]),
    ('configs/veca/README.md', 'FLOPs: {} GFLOPs at 512 px and {} at 1024 px',
     [('veca-small', 512, 'G', 2), ('veca-small', 1024, 'G', 2)]),
    ('configs/weightformer/README.md', 'WeightFormer-T at 1024 x 1024 is {} GFLOPs',
     [('weightformer-t', 1024, 'G', 1)]),
    ('configs/weightformer/README.md', "DeiT-T's is {} GFLOPs at the same size", [('deit-t-sdpa',
                                                                                   1024, 'G', 1)]),
]

# Derived figures: (page, sentence with {}, the figures' function, decimals).
DERIVED: List[Tuple[str, str, Callable[[], List[float]], int]] = [
    # VECA-B at 512 px, budgets K = 8 and 64 (configs/veca/README.md's budget table).
    ('configs/veca/README.md', 'of the {} GFLOPs between K = 8 and 64',
     lambda: [flops('veca-base', 512, 64) - flops('veca-base', 512, 8)], 1),
]

# Figures a page quotes from a paper or a reference implementation (or an analytic formula
# written beside them), not counted by get_flops.py: (page, the text that follows the figure).
QUOTED = [
    ('docs/benchmarks.md', ' (paper)'),
    ('docs/benchmarks.md', ' (ref. code)'),
    ('docs/benchmarks.md', ' at 512 / 1024 px) are those of the linear'),  # reference code
    ('docs/benchmarks.md', ', and match to the last digit'),  # the 4 C L (K^2 + 2 N K) formula
    ('docs/design.md', ' at 224 px cannot be reproduced'),  # the paper's softmax figure
]


def page_text(page: str) -> str:
    """The page with its line breaks and runs of spaces as single spaces."""
    with open(osp.join(ROOT, page), encoding='utf-8') as f:
        return ' '.join(f.read().split())


def rendered_claims() -> List[Tuple[str, str]]:
    claims = [(page, sentence.format(*(figure(flops(p, r), u, d) for p, r, u, d in figures)))
              for page, sentence, figures in CLAIMS]
    claims += [(page, sentence.format(*(f'{v / 1e9:,.{d}f}' for v in values())))
               for page, sentence, values, d in DERIVED]
    return claims


def flops_table_rows() -> List[List[str]]:
    text = open(osp.join(ROOT, 'docs', 'benchmarks.md'), encoding='utf-8').read()
    section = text.split('## Parameters and FLOPs', 1)[1].split('\n## ', 1)[0]
    rows = [[cell.strip() for cell in line.strip('|').split('|')] for line in section.splitlines()
            if line.startswith('| ')]
    assert rows[0][:6] == [
        'model', 'resolution', 'patch tokens', 'params (M, backbone)', 'GFLOPs', 'GMACs'
    ]
    return rows[1:]


@pytest.mark.parametrize('row', flops_table_rows(), ids=lambda row: f'{row[0]}-{row[1]}')
def test_flops_table_holds_the_counts(row):
    preset, resolution = row[0], int(row[1])
    count = flops(preset, resolution)
    assert row[2] == f'{(-(-resolution // 16))**2:,}'
    assert row[3] == f'{count_params(backbone(preset)) / 1e6:.2f}'
    assert row[4:6] == [figure(count, 'G', 2), figure(count / 2, 'G', 2)]


@pytest.mark.parametrize('page, sentence', rendered_claims(), ids=lambda x: x[:40])
def test_pages_quote_the_counted_flops(page, sentence):
    assert sentence in page_text(page), f'{page} should say: {sentence}'


@pytest.mark.parametrize('page', PAGES)
def test_every_flops_figure_is_counted_or_quoted_from_elsewhere(page):
    text = page_text(page)
    checked = [sentence for p, sentence in rendered_claims() if p == page]
    quoted = [after for p, after in QUOTED if p == page]
    for match in FLOPS_FIGURE.finditer(text):
        after = text[match.end():match.end() + 60]
        inside = any(match.group(0) in sentence and sentence in text for sentence in checked)
        assert inside or any(after.startswith(q) for q in quoted), \
            f'{page}: "{text[max(0, match.start() - 40):match.end() + 40]}" is neither a ' \
            'counted figure (CLAIMS) nor quoted from a paper (QUOTED)'
