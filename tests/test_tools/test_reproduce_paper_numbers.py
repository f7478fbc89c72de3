"""The papers' numbers where users look: each read from the file ``tools/reproduce.py`` prints
it from (the model index's ``Results`` after a run, or the experiment's ``docs`` page that
``--list`` names), marked there as the paper's, and the other pages that quote it agree."""
import os.path as osp
import re

import pytest
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT

import mmlinear.cli.reproduce as registry

reproduce = load_tool('reproduce', osp.join(REPO_ROOT, 'tools'))
EXPERIMENTS = registry.load_experiments()


def read(path: str) -> str:
    """A page's text with its line breaks and runs of spaces made single spaces."""
    with open(osp.join(REPO_ROOT, path)) as f:
        return ' '.join(f.read().split())


def docs_of(experiment_id: str) -> str:
    return read(EXPERIMENTS[experiment_id]['docs'])


#: (experiment, line ``reproduce.py`` prints from the model index): paper numbers of a config.
PRINTED = [
    ('veca-dense-probes', '  linear-probe_veca-base-frozen_8xb2-40k_voc12aug-512x512: '
     'PASCAL VOC 2012 mIoU 87.07'),
    ('infsa-imagenet-v2', '  infvit-4l-linear_16xb64_in1k_test-imagenet-v2: '
     'ImageNet-V2 Top 1 Accuracy 79.8'),
    # The baselines the papers compare against, beside their own models.
    ('weightformer-imagenet', '  deit-s_8xb128_in1k: ImageNet-1k Top 1 Accuracy 79.8'),
    ('weightformer-imagenet',
     '  convnext-s-isotropic_8xb128-accum4_in1k: ImageNet-1k Top 1 Accuracy 79.7'),
    ('veca-imagenet-probe',
     '  veca-base_linear-probe_8xb2048-coslr-90e_in1k: ImageNet-1k Top 1 Accuracy 81.93'),
    ('veca-imagenet-probe',
     '  dinov3-vitb16_linear-probe_8xb2048-coslr-90e_in1k: ImageNet-1k Top 1 Accuracy 83.56'),
]

#: (experiment, text of its docs page, whitespace made single): paper numbers without a config.
#: Each text includes the words that mark it as the paper's.
IN_DOCS = [
    ('infsa-imagenet-v2', 'Reported by the paper (not reproduced here): | model | ImageNet-1K '
     'top-1 | ImageNet-V2 top-1 | |---|---|---| | Linear-InfViT-4L | 84.7 | **79.8** | | the best '
     'baseline it compares (unnamed) | | 76.8 |'),
    ('infsa-energy', '| throughput (img/s) | 17.19 | **230.95** | 13.4x |'),
    ('infsa-energy', '| energy (J per image) | 11.63 | **0.87** | 13.4x |'),
    ('infsa-attention-quality', '| MoRF-AOC (higher is better) | **42.6** | 71.7 | 76.0 |'),
    ('infsa-attention-quality', '| bbox PR-AUC | **56.2** | 72.4 | 76.1 |'),
    ('weightformer-imagenet', 'DeiT-T / -S / -B 72.2 / **79.8** / 81.8, isotropic ConvNeXt-S '
     '/ -B **79.7** / 82.0'),
    ('veca-imagenet-probe', '| task | metric | VECA-B (paper) | DINOv3-B teacher (paper) | ours '
     '| |---|---|---|---|---| | ImageNet-1K | top-1 % | 81.93 | 83.56 |'),
]


def test_the_list_states_the_papers_numbers_beside_their_experiments():
    """Once each, in the claims under their experiments."""
    listed = ' '.join(run_tool_main(reproduce, '--list').stdout.split())
    assert listed.count('claim infvit-imagenet-v2 (abstract): ImageNet-V2 matched-frequency '
                        'top-1 79.8 (Linear-InfViT-4L) against 76.8 for the best baseline '
                        'compared') == 1
    for quoted in ('MoRF-AOC 42.6 (softmax ViT), 71.7 (Pure InfSA), 76.0 (Linear InfSA)',
                   'box PR-AUC 56.2 (softmax ViT), 72.4 (Pure InfSA), 76.1 (Linear InfSA)'):
        assert listed.count(quoted) == 1, quoted


@pytest.mark.parametrize('experiment_id, line', PRINTED)
def test_the_registry_prints_the_papers_number_of_a_config(experiment_id, line):
    assert line in registry.reported_results(EXPERIMENTS[experiment_id])


@pytest.mark.parametrize('experiment_id, text', IN_DOCS)
def test_the_docs_page_the_registry_names_holds_the_papers_number(experiment_id, text):
    assert text in docs_of(experiment_id)


def test_the_baselines_are_printed_after_their_papers_models_and_marked_as_the_papers():
    """The reported lines of a comparison: the paper's models, then its baselines, under the
    heading that marks them as the paper's numbers."""
    imagenet = registry.reported_results(EXPERIMENTS['weightformer-imagenet'])
    assert imagenet[0] == 'reported by the paper (model index; not reproduced here):'
    assert [line.split(':')[0].strip() for line in imagenet[1:]] == [
        'weightformer-t_8xb256-amp_in1k', 'weightformer-s_8xb256-amp_in1k',
        'weightformer-b_8xb256_in1k-448px', 'deit-s_8xb128_in1k',
        'convnext-s-isotropic_8xb128-accum4_in1k'
    ]
    probes = registry.reported_results(EXPERIMENTS['veca-imagenet-probe'])
    assert probes[0] == imagenet[0] and len(probes) == 3
    # The docs page's ImageNet table: the baselines' rows under the paper's column.
    table = docs_of('weightformer-imagenet')
    header = table.index('| model | resolution | params (ours, measured) | MACs (ours, '
                         'measured) | top-1 (paper) | top-1 (ours) |')
    for row in ('| DeiT-S (baseline) | 224 | 22,050,664 | 4.599 G | 79.8 | not trained |',
                '| isotropic ConvNeXt-S (baseline) | 224 | 22,309,480 | 4.286 G | 79.7 | not '
                'trained |'):
        assert header < table.index(row) < header + 1000, row


def test_energy_and_attention_quality_tables_are_marked_as_the_papers():
    benchmarks = docs_of('infsa-energy')
    table = benchmarks.index('| throughput (img/s) | 17.19 |')
    assert 'Reported by the InfSA paper (one A100 40 GB, 1024 x 1024 images' in \
        benchmarks[table - 300:table]
    quality = docs_of('infsa-attention-quality')
    table = quality.index('| MoRF-AOC (higher is better) | **42.6** |')
    assert 'Reported by the InfSA paper, on ImageNet validation images' in \
        quality[table - 300:table]
    weightformer = docs_of('weightformer-imagenet')
    quote = weightformer.index('DeiT-T / -S / -B 72.2 / **79.8**')
    assert "read off the paper's Figure 1" in weightformer[quote - 400:quote]


def test_voc_at_64_cores_is_the_metafiles_number_on_every_page_that_quotes_it():
    """The paper's VOC 2012 table gives VECA-B 87.07 at K = 64. Its elasticity figure (Fig. 1d,
    no dataset named) ends at 87.97 at K = 64: a different evaluation, which no page may give
    as the VOC number."""
    voc = next(
        float(line.rsplit(' ', 1)[1])
        for line in registry.reported_results(EXPERIMENTS['veca-dense-probes'])
        if 'PASCAL VOC 2012 mIoU' in line)
    assert voc == 87.07
    pages = [
        EXPERIMENTS['veca-dense-probes']['docs'], 'configs/veca/README.md',
        'configs/veca/linear-probe_veca-base-frozen_8xb2-40k_voc12aug-512x512.py',
        'configs/veca/linear-probe_dinov3-vitb16-frozen_8xb2-40k_voc12aug-512x512.py'
    ]
    for page in pages:
        text = read(page)
        quoted = [
            float(m.group(1))
            for m in re.finditer(r'VOC\b[^0-9]{0,60}?(?:2012[^0-9]{0,40}?)?(\d+\.\d+)', text)
        ]
        assert f'{voc}' in text and all(value == voc for value in quoted), (page, quoted)
        assert not re.search(r'VOC[^.]{0,80}87\.97', text), page
