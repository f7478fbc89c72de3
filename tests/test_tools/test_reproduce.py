"""tools/reproduce.py: every experiment of the three papers listed, its files real, its
commands printed or run."""
import os
import os.path as osp
import re
import shlex

import modelindex
import pytest
import torch
import yaml
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from mmengine.config import Config

import mmlinear.cli.reproduce as registry
from mmlinear.apis.model_presets import BACKBONE_PRESETS

reproduce = load_tool('reproduce', osp.join(REPO_ROOT, 'tools'))
EXPERIMENTS = registry.load_experiments()
PAPERS = {
    c.name
    for c in modelindex.load(osp.join(REPO_ROOT, 'mmlinear', '.mim', 'model-index.yml')).collections
}


def all_commands(experiment):
    released = experiment.get('released')
    return ((experiment.get('demo') or []) + (experiment.get('paper_scale') or []) +
            [r['made_by'] for r in experiment.get('requires') or []] +
            ([released['convert'], released['config']] if released else []))


@pytest.mark.parametrize('experiment', EXPERIMENTS.values(), ids=list(EXPERIMENTS))
def test_every_experiment_names_files_and_presets_that_exist(experiment):
    assert experiment['paper'] in PAPERS
    assert osp.isfile(osp.join(REPO_ROOT, experiment['docs']))
    assert experiment.get('demo') or experiment.get('paper_scale') or experiment.get(
        'pending') or experiment.get('released')
    if experiment.get('released'):
        # The paper's number it is printed beside.
        assert registry.paper_metric(experiment['released']['config'])
    for command in all_commands(experiment):
        for path in re.findall(r'(?:configs|tools)/\S+\.(?:py|sh)', command):
            assert osp.isfile(osp.join(REPO_ROOT, path)), (experiment['id'], path)
        models = re.search(r'--models ((?:[^-\s]\S*\s*)+)', command)
        for model in (models.group(1).split() if models else []):
            assert model.endswith('.py') or model in BACKBONE_PRESETS, (experiment['id'], model)


@pytest.mark.parametrize('scale', ['demo', 'paper_scale'])
def test_no_two_commands_of_a_scale_share_a_work_folder(scale):
    """Across every experiment: a restarted run resumes only its own weights (the same command
    listed twice is one run)."""
    writers = {}
    for experiment in EXPERIMENTS.values():
        for command in experiment.get(scale) or []:
            command = ' '.join(command.split())
            writers.setdefault(registry.work_folder(command), set()).add(command)
    shared = {folder: commands for folder, commands in writers.items() if len(commands) > 1}
    assert not shared
    # The efficient-attention baselines train the Linear-InfViT config, each into its own
    # folder, beside the benchmark of the nine token mixers.
    folders = [
        registry.work_folder(c) for c in EXPERIMENTS['infsa-efficient-attention']['paper_scale']
    ]
    assert len(set(folders)) == len(folders) == 6
    assert 'work_dirs/infvit-4l-linear_16xb64_in1k' not in folders


def test_a_command_writes_where_its_options_or_its_config_say():
    assert registry.work_folder(
        'bash tools/dist_train.sh configs/a/b.py 8 --work-dir work_dirs/x/ --cfg-options y=1'
    ) == 'work_dirs/x'
    assert registry.work_folder('python tools/get_flops.py --out work_dirs/f/flops.md') == \
        'work_dirs/f/flops.md'
    assert registry.work_folder('python tools/test.py configs/a/b_in1k.py CHECKPOINT') == \
        osp.join('work_dirs', 'b_in1k')
    # A make target: its recipe's --out, with the Makefile's default BENCH_OUT.
    assert registry.work_folder('make bench-9216') == 'work_dirs/bench/linear_9216'
    for silent in ('python tools/misc/make_tiny_datasets.py', 'make no-such-target'):
        with pytest.raises(ValueError, match='writes'):
            registry.work_folder(silent)


def test_a_registry_where_two_runs_share_a_work_folder_is_refused(tmp_path):
    train = 'bash tools/dist_train.sh configs/infvit/infvit-4l-linear_16xb64_in1k.py 16'
    entry = dict(id='a', paper='InfViT', item='x', docs='README.md', paper_scale=[train])
    path = tmp_path / 'experiments.yml'
    # The same command in two experiments is one run: accepted.
    path.write_text(yaml.safe_dump([entry, dict(entry, id='b')]))
    assert list(registry.load_experiments(str(path))) == ['a', 'b']
    # Another attention type trained into the same (default) folder: refused, both named.
    other = f'{train} --cfg-options model.backbone.attn_type=performer'
    path.write_text(yaml.safe_dump([entry, dict(entry, id='b', paper_scale=[other])]))
    with pytest.raises(ValueError) as refused:
        registry.load_experiments(str(path))
    assert 'b: two paper_scale commands write to work_dirs/infvit-4l-linear_16xb64_in1k' in \
        str(refused.value) and 'attn_type=performer' in str(refused.value)


def test_veca_dense_probes_run_vecas_and_dinov3s_probes_on_the_three_datasets():
    commands = EXPERIMENTS['veca-dense-probes']['paper_scale']
    for backbone in ('veca-base', 'dinov3-vitb16'):
        for dataset in ('pascal-context-59', 'voc12aug', 'nyu-depth'):
            config = f'configs/veca/linear-probe_{backbone}-frozen_8xb2-40k_{dataset}-512x512.py'
            assert osp.isfile(osp.join(REPO_ROOT, config))
            assert sum(config in c for c in commands) == 1, config


def test_veca_resolution_sweeps_the_papers_probes_from_256_to_1024():
    """The paper-scale sweep evaluates the checkpoints that the entry's own trainings write
    (VECA-B's and its DINOv3 ViT-B/16 teacher's PASCAL Context probes, both 768 wide), with
    arguments the sweep accepts."""
    *trainings, sweep = EXPERIMENTS['veca-resolution']['paper_scale']
    printed = run_tool_main(reproduce, 'veca-resolution', '--scale', 'paper')
    assert printed.returncode == 0
    assert printed.stdout.splitlines()[:3] == [' '.join(c.split()) for c in trainings + [sweep]]
    configs = [re.search(r'configs/\S+\.py', training).group(0) for training in trainings]
    assert configs[0].startswith('configs/veca/linear-probe_veca-base-frozen_')
    assert configs[1].startswith('configs/veca/linear-probe_dinov3-vitb16-frozen_')
    # The same runs as the dense probes' (one run serves both).
    assert set(trainings) <= set(EXPERIMENTS['veca-dense-probes']['paper_scale'])
    checkpoint_files = re.findall(r'\$\(cat (\S+)\)', sweep)
    assert checkpoint_files == [
        osp.join(registry.work_folder(training), 'last_checkpoint') for training in trainings
    ]
    resolution_sweep = load_tool('resolution_sweep')
    words = shlex.split(re.sub(r'\$\(cat (\S+)\)', r'\1', sweep))
    assert words[:2] == ['python', 'tools/analysis_tools/resolution_sweep.py']
    args = resolution_sweep.parse_args(words[2:])
    assert args.models == configs and args.checkpoints == checkpoint_files
    assert args.resolutions == [256, 384, 512, 768, 1024]
    widths = [
        Config.fromfile(osp.join(REPO_ROOT, c)).model.decode_head.in_channels for c in configs
    ]
    assert widths == [768, 768]


def parse_analysis(command):
    """The options an analysis command runs with, as its tool parses them (a checkpoint read
    from a training's ``last_checkpoint`` stands as that file's path)."""
    words = shlex.split(re.sub(r'\$\(cat (\S+)\)', r'\1', command))
    assert words[0] == 'python' and words[1].startswith('tools/analysis_tools/'), command
    tool = load_tool(osp.splitext(osp.basename(words[1]))[0])
    return tool.parse_args(words[2:])


def test_attention_quality_at_paper_scale_scores_the_papers_three_imagenet_classifiers():
    """Softmax, Pure and Linear InfViT-4L as infsa-imagenet trains them, on ImageNet-1K val
    with its boxes, each checkpoint the one its training writes."""
    commands = EXPERIMENTS['infsa-attention-quality']['paper_scale']
    trainings = [c for c in commands if c.startswith('bash tools/dist_train.sh')]
    assert set(trainings) <= set(EXPERIMENTS['infsa-imagenet']['paper_scale'])
    evaluations = [parse_analysis(c) for c in commands if c not in trainings]
    assert [a.config for a in evaluations] == [
        f'configs/infvit/infvit-4l-{attn}_16xb64_in1k.py' for attn in ('softmax', 'pure', 'linear')
    ]
    checkpoints = [osp.join(registry.work_folder(t), 'last_checkpoint') for t in trainings]
    assert [a.checkpoint for a in evaluations] == checkpoints
    for args in evaluations:
        assert args.images == ['data/imagenet/val'] and args.img_size == 224
        assert args.saliency == 'attention' and args.max_images is None


def test_weightformer_speed_at_paper_scale_times_both_on_a_gpu_up_to_1248(monkeypatch):
    command, = EXPERIMENTS['weightformer-speed-vs-deit']['paper_scale']
    # The tool refuses --device cuda where there is none, as here.
    monkeypatch.setattr(torch.cuda, 'is_available', lambda: True)
    args = parse_analysis(command)
    assert args.models == ['weightformer-t', 'deit-t-sdpa'] and args.device == 'cuda'
    assert args.resolutions[0] == 224 and args.resolutions[-1] == 1248
    assert args.batch_sizes == [1] and args.dtypes == ['fp32'] and args.modes == ['forward']


def test_veca_core_analyses_at_paper_scale_read_veca_b_from_its_pascal_context_probe():
    """The probe is veca-dense-probes' run; the preset takes its backbone keys (the same as
    the probe's frozen VECA-B), beside the DINOv3 ViT-B/16 teacher."""
    training, analysis = EXPERIMENTS['veca-core-analyses']['paper_scale']
    assert training in EXPERIMENTS['veca-dense-probes']['paper_scale']
    assert 'linear-probe_veca-base-frozen_8xb2-40k_pascal-context-59' in training
    args = parse_analysis(analysis)
    assert args.model == 'veca-base' and args.img_size == 512
    assert args.checkpoint == osp.join(registry.work_folder(training), 'last_checkpoint')
    # The teacher's weights where the distillation configs read them.
    teacher = Config.fromfile(
        osp.join(REPO_ROOT, 'configs/_base_/models/veca-distill_dinov3-vitb16.py')).model.teacher
    assert args.teacher == teacher.model_name.split('/')[-1]
    assert args.teacher_checkpoint == teacher.checkpoint_path


def test_the_list_covers_the_three_papers_and_every_experiment():
    listed = run_tool_main(reproduce, '--list')
    assert listed.returncode == 0
    for experiment_id, experiment in EXPERIMENTS.items():
        assert f'{experiment_id}  [{experiment["paper"]}]' in listed.stdout
    assert {e['paper'] for e in EXPERIMENTS.values()} == PAPERS


@pytest.mark.parametrize(
    'experiment', [e for e in EXPERIMENTS.values() if e.get('recorded')],
    ids=[i for i, e in EXPERIMENTS.items() if e.get('recorded')])
def test_every_recorded_figure_is_where_its_experiment_says(experiment):
    assert registry.recorded_problem(experiment) is None


def test_the_list_says_where_each_demo_figure_is_or_why_there_is_none():
    listed = run_tool_main(reproduce, '--list').stdout
    assert 'veca-resolution  [VECA]  runs: demo, paper\n' in listed
    assert '    demo figure: docs/reproduce.md, section "Resolution robustness"\n' in listed
    assert '    no demo figure: no DINOv3 of the demo\'s size exists' in listed
    report = run_tool_main(reproduce, '--list', '--missing')
    assert report.returncode == 0
    # Every lack names its experiment; none is a recorded figure gone missing.
    assert 'the recorded demo figure is missing' not in report.stdout
    summary = report.stdout.splitlines()[-1]
    assert f' of {len(EXPERIMENTS)} experiments; ' in summary
    assert summary.endswith(f'; {report.stdout.count("(no reason given)")} without a reason given')
    alone = run_tool_main(reproduce, '--missing')
    assert alone.returncode == 2 and '--missing goes with --list' in alone.stderr


def test_the_missing_report_names_every_lack_and_its_reason(tmp_path):
    docs = tmp_path / 'results.md'
    docs.write_text('# Results\n\n## Demo\n\n| model | top-1 |\n|---|---|\n| demo | 99.0 |\n\n'
                    '```bash\n# Demo\n```\n\n## Other\n\n| demo | 50.0 |\n')
    train = 'python tools/train.py configs/demo/x.py --work-dir work_dirs/x'
    paper = 'bash tools/dist_train.sh configs/x/x_in1k.py 8'
    base = dict(paper='VECA', item='x', docs=str(docs))
    entries = [
        # Complete: both scales and its figure, under its heading (the table below the next
        # heading, and the "# Demo" comment in a code block, are not its section).
        dict(
            base,
            id='complete',
            demo=[train],
            paper_scale=[paper],
            recorded=dict(section='Demo', shows='| demo |   99.0 |')),
        dict(base, id='unrecorded', demo=[train + '-2']),
        dict(
            base,
            id='wrong-figure',
            demo=[train + '-3'],
            paper_scale=[paper],
            recorded=dict(section='Demo', shows='| demo | 50.0 |')),
        dict(
            base,
            id='no-heading',
            paper_scale=[paper],
            demo=[train + '-4'],
            recorded=dict(section='Elsewhere', shows='x')),
        dict(
            base,
            id='paper-only',
            paper_scale=[paper + ' --work-dir work_dirs/y'],
            why_missing=dict(demo='needs a GPU')),
        dict(base, id='pending', pending='outside this plugin'),
    ]
    path = tmp_path / 'experiments.yml'
    path.write_text(yaml.safe_dump(entries))
    report = registry.missing_report(registry.load_experiments(str(path)))
    assert report.splitlines() == [
        'unrecorded',
        '    no paper-scale command (no reason given)',
        '    a demo command never recorded (no reason given)',
        'wrong-figure',
        f"    the recorded demo figure is missing: the section 'Demo' of {docs} does not show "
        "'| demo | 50.0 |' (no reason given)",
        'no-heading',
        f"    the recorded demo figure is missing: {docs} has no headings 'Elsewhere' "
        '(no reason given)',
        'paper-only',
        '    no demo command: needs a GPU',
        'pending',
        '    no paper-scale command: outside this plugin',
        '    no demo command: outside this plugin',
        '7 missing in 5 of 6 experiments; 0 of 0 claims incomplete (0 without a demo figure, 0 '
        'without a paper-scale command); 4 without a reason given',
    ]


@pytest.mark.parametrize('why_missing,message', [
    (dict(demo='needs a GPU'), 'why_missing gives a reason for demo, which it has'),
    (dict(paper='needs a GPU'), "why_missing names 'paper'; it takes paper_scale, demo, recorded"),
])
def test_a_reason_for_a_part_an_experiment_has_or_for_no_part_is_refused(
        tmp_path, why_missing, message):
    path = tmp_path / 'experiments.yml'
    path.write_text(
        yaml.safe_dump([
            dict(
                id='a',
                paper='VECA',
                item='x',
                docs='README.md',
                demo=['make x'],
                why_missing=why_missing)
        ]))
    with pytest.raises(ValueError, match=f'experiments.yml: a: {message}'):
        registry.load_experiments(str(path))


def test_a_demo_run_makes_its_missing_prerequisites_first():
    experiment = dict(
        id='x',
        demo=['python tools/reproduce.py --list'],
        requires=[
            dict(path='no/such/checkpoint.pth', made_by='python make_it.py'),
            dict(path='README.md', made_by='python never_needed.py'),  # it exists
            dict(path='no/such/other.pth', made_by='python make_it.py'),  # made once
        ])
    assert registry.commands_for(
        experiment, 'demo') == ['python make_it.py', 'python tools/reproduce.py --list']
    assert registry.commands_for(dict(experiment, paper_scale=['make x']), 'paper') == ['make x']


def test_paper_scale_commands_are_printed_with_what_the_paper_reports():
    """The commands (not run), then the model index's reported results of their configs."""
    printed = run_tool_main(reproduce, 'weightformer-coco-vs-deit', '--scale', 'paper')
    assert printed.returncode == 0
    commands = EXPERIMENTS['weightformer-coco-vs-deit']['paper_scale']
    assert printed.stdout.splitlines() == commands + [
        'reported by the paper (model index; not reproduced here):',
        '  mask-rcnn_weightformer-t_simple-pyramid_1x_coco: COCO box AP 45.0; COCO mask AP 38.3',
        '  mask-rcnn_deit-t_simple-pyramid_1x_coco: COCO box AP 44.4; COCO mask AP 38.1',
    ]
    # An experiment whose configs report nothing ends with its commands.
    flops = run_tool_main(reproduce, 'veca-interactions', '--dry-run')
    assert flops.stdout.splitlines() == EXPERIMENTS['veca-interactions']['demo']


def run_veca_interactions() -> str:
    """tools/reproduce.py veca-interactions, run as the registry holds it at the moment; the
    table its first command writes (removed first, so that an earlier run cannot pass)."""
    out = osp.join(REPO_ROOT, 'work_dirs', 'reproduce', 'veca-interactions', 'flops.md')
    if osp.exists(out):
        os.remove(out)
    assert reproduce.main(['veca-interactions']) == 0
    with open(out) as f:
        return f.read()


def test_a_demo_experiment_runs_its_real_commands(monkeypatch):
    """The registry's first VECA interaction command, narrowed to the claim's budget (K = 64
    of VECA-B at 512 px), run as a process of its own by the tool; the whole experiment (eight
    budgets and the block table) is the slow test below."""
    experiment = dict(EXPERIMENTS['veca-interactions'])
    command, = [c for c in experiment['demo'] if '--active-cores' in c]
    experiment['demo'] = [re.sub(r'--active-cores( \d+)+', '--active-cores 64', command)]
    monkeypatch.setattr(reproduce, 'load_experiments', lambda: {
        **EXPERIMENTS, 'veca-interactions': experiment
    })
    table = run_veca_interactions()
    assert '| veca-base | 512 | 64 | 1,024 |' in table and '87.1 %' in table
    assert '| veca-base | 512 | 8 |' not in table


@pytest.mark.slow
def test_a_demo_experiment_runs_all_its_real_commands():
    """The VECA interaction counts: get_flops.py on the VECA-B preset, exact and quick."""
    table = run_veca_interactions()
    assert '| veca-base | 512 | 64 | 1,024 |' in table and '| veca-base | 512 | 8 |' in table
    assert '87.1 %' in table


def test_unknown_ids_and_missing_scales_are_refused_with_what_exists():
    unknown = run_tool_main(reproduce, 'infsa-nope')
    assert unknown.returncode == 1
    assert "unknown experiment 'infsa-nope'; ids: infsa-imagenet, " in unknown.stderr
    pending = run_tool_main(reproduce, 'weightformer-generation')
    assert pending.returncode == 1
    assert 'has no demo-scale commands; pending: outside the detection' in pending.stderr
    only_demo = run_tool_main(reproduce, 'veca-elastic-dense', '--scale', 'paper')
    assert only_demo.returncode == 1
    assert 'has no paper-scale commands (it runs at --scale demo)' in only_demo.stderr
    assert run_tool_main(reproduce).returncode == 1  # neither an id nor --list
