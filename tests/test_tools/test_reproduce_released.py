"""tools/reproduce.py ID --checkpoint --data-root: released weights converted, checked,
evaluated by tools/test.py (after training the probe, for VECA) on a dataset in the real
dataset's layout, the metric printed beside the paper's.

The checkpoints are written in the released key layouts (tests/data/released_layouts) and the
datasets in the layouts the toolboxes read (ImageNet's meta/val.txt + val/, PASCAL Context's
VOC2010 folders); both are tiny, so the metric means nothing but the path is the real one.
"""
import os.path as osp
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
from analysis_tools_loader import load_tool, run_tool_main
from conftest import REPO_ROOT
from PIL import Image
from released_layouts import fake_state, read_layout, training_entries

from mmlinear.models import VECA

reproduce = load_tool('reproduce', osp.join(REPO_ROOT, 'tools'))
SCRIPT = osp.join(REPO_ROOT, 'tools', 'reproduce.py')


def write_imagenet(root, val, train=()):
    """ImageNet-1K as mmpretrain's ImageNet reads it: ``meta/{val,train}.txt`` ("FILE LABEL"
    per line) and the JPEG images under ``val/`` and ``train/<wnid>/``, here 32 x 24 px.

    Args:
        root (Path): The data root to write.
        val (Sequence[int]): The label of each validation image.
        train (Sequence[int]): The label of each training image (none: val only).
    """
    (root / 'meta').mkdir(parents=True)
    for split, labels in (('val', val), ('train', train)):
        if not labels:
            continue
        lines = []
        for i, label in enumerate(labels):
            name = (f'ILSVRC2012_val_{i + 1:08d}.JPEG'
                    if split == 'val' else f'n{label:08d}/n{label:08d}_{i}.JPEG')
            (root / split / name).parent.mkdir(parents=True, exist_ok=True)
            Image.new('RGB', (32, 24), (40 * i % 256, 90, 160)).save(root / split / name, 'JPEG')
            lines.append(f'{name} {label}')
        (root / 'meta' / f'{split}.txt').write_text('\n'.join(lines) + '\n')
    return root


def write_pascal_context(root, train, val):
    """PASCAL Context as mmseg's PascalContextDataset59 reads it: ``JPEGImages/*.jpg``,
    ``SegmentationClassContext/*.png`` label maps (0 the background, 1-59 the classes) and the
    split lists under ``ImageSets/SegmentationContext``, here 40 x 30 px."""
    for path in ('JPEGImages', 'SegmentationClassContext', 'ImageSets/SegmentationContext'):
        (root / path).mkdir(parents=True)
    for split, count in (('train', train), ('val', val)):
        names = [f'2008_{split}{i:04d}' for i in range(count)]
        for i, name in enumerate(names):
            Image.new('RGB', (40, 30),
                      (50 * i % 256, 100, 150)).save(root / 'JPEGImages' / f'{name}.jpg')
            label = np.zeros((30, 40), np.uint8)
            label[:, 20:] = 1 + i
            label[:15] = 12
            Image.fromarray(label).save(root / 'SegmentationClassContext' / f'{name}.png')
        (root / 'ImageSets' / 'SegmentationContext' / f'{split}.txt').write_text('\n'.join(names) +
                                                                                 '\n')
    return root


def tiny_veca_release(path):
    """A ``.pt`` as the official VECA code saves it (the state dict under ``student`` beside
    its config, optimizer and scheduler states), for mmlinear's 2-block 'test' preset: its
    keys are the released VECA-B's, shapes of that size.

    Returns:
        dict[str, Tensor]: The state dict written.
    """
    layout = read_layout('veca-base')
    released_keys = {key for key, _, _ in layout['keys']}
    generator = torch.Generator().manual_seed(0)
    state = {
        key: torch.randn(value.shape, generator=generator) * 0.02
        for key, value in VECA(arch='test', init_cfg=None).state_dict().items()
    }
    assert set(state) <= released_keys
    container = layout['release']['containers']['torch_save']
    torch.save(
        dict(student=state, config=dict(num_heads=2), **training_entries(container)), str(path))
    return state


def always_predicting(state, label):
    """The state dict with a classifier that predicts ``label`` for every image."""
    state = dict(state)
    state['head.weight'] = torch.zeros_like(state['head.weight'])
    state['head.bias'] = torch.zeros_like(state['head.bias'])
    state['head.bias'][label] = 10.0
    return state


def save_safetensors(state, path):
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in state.items()}, str(path))
    return path


def run_reproduce(*args):
    """tools/reproduce.py as a process of its own, for what its commands print: they write to
    the process's output, which run_tool_main does not capture."""
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)],
                          cwd=REPO_ROOT,
                          capture_output=True,
                          text=True)


@pytest.fixture
def reproduce_here(monkeypatch):
    """tools/reproduce.py's main run in this process from the repository root, as the script
    runs (its commands run as processes of their own, their output not captured)."""
    monkeypatch.chdir(REPO_ROOT)
    return lambda *args: run_tool_main(reproduce, *args)


@pytest.fixture(scope='module')
def weightformer_t():
    """WeightFormer-T in the released layout (the real architecture, random weights)."""
    return fake_state(read_layout('weightformer-t'))


def test_released_weightformer_t_is_converted_and_evaluated_by_the_test_loop(
        tmp_path, weightformer_t, reproduce_here):
    """A model.safetensors whose classifier always says class 7, on four val images of which
    three are class 7: tools/test.py must measure top-1 75."""
    pytest.importorskip('safetensors')
    checkpoint = save_safetensors(
        always_predicting(weightformer_t, 7), tmp_path / 'model.safetensors')
    data_root = write_imagenet(tmp_path / 'imagenet', [7, 3, 7, 7])
    work_dir = osp.join(REPO_ROOT, 'work_dirs', 'reproduce', 'weightformer-t-released')
    shutil.rmtree(work_dir, ignore_errors=True)

    result = reproduce_here('weightformer-t-released', '--checkpoint', checkpoint, '--data-root',
                            data_root)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert 'python tools/test.py configs/weightformer/weightformer-t_8xb256-amp_in1k.py' in \
        result.stdout
    assert (f'weightformer-t-released: measured accuracy/top1 75.00 on {data_root}; the paper '
            'reports ImageNet-1k Top 1 Accuracy 76.3 (model index)') in result.stdout
    assert osp.isfile(osp.join(work_dir, 'converted.pth'))


def test_a_checkpoint_of_another_model_size_is_refused_before_the_evaluation(
        tmp_path, reproduce_here):
    """WeightFormer-S converts, but does not fill the WeightFormer-T config's model."""
    pytest.importorskip('safetensors')
    checkpoint = save_safetensors(
        fake_state(read_layout('weightformer-s')), tmp_path / 'model.safetensors')
    data_root = write_imagenet(tmp_path / 'imagenet', [0])
    result = reproduce_here('weightformer-t-released', '--checkpoint', checkpoint, '--data-root',
                            data_root)
    assert result.returncode == 1
    assert 'the converted checkpoint does not fit configs/weightformer/' \
        'weightformer-t_8xb256-amp_in1k.py (expected model.safetensors of ' \
        'huggingface.co/RuizeHe/weightformer-t)' in result.stderr
    assert 'backbone.patch_embed.proj.weight: (384, 3, 16, 16), expected (192, 3, 16, 16)' in \
        result.stderr
    assert 'tools/test.py' not in result.stdout


def test_a_checkpoint_of_another_model_is_refused_naming_the_expected_layout(tmp_path):
    checkpoint = tmp_path / 'veca.pt'
    torch.save(fake_state(read_layout('veca-small')), str(checkpoint))
    data_root = write_imagenet(tmp_path / 'imagenet', [0])
    result = run_reproduce('weightformer-t-released', '--checkpoint', checkpoint, '--data-root',
                           data_root)
    assert result.returncode == 1
    assert 'not in the WeightFormer key layout: cannot find patch_embed.proj.weight' in \
        result.stderr


def test_a_missing_checkpoint_is_named_with_the_weights_expected(tmp_path):
    data_root = write_imagenet(tmp_path / 'imagenet', [0])
    result = run_tool_main(reproduce, 'weightformer-s-released', '--checkpoint',
                           tmp_path / 'model.safetensors', '--data-root', data_root)
    assert result.returncode == 1
    assert f'checkpoint not found: {tmp_path / "model.safetensors"}' in result.stderr
    assert 'huggingface.co/RuizeHe/weightformer-s' in result.stderr


def test_a_data_root_without_the_dataset_layout_names_the_missing_paths(tmp_path):
    checkpoint = tmp_path / 'model.pt'
    checkpoint.write_bytes(b'0')
    (tmp_path / 'imagenet' / 'val').mkdir(parents=True)
    result = run_tool_main(reproduce, 'weightformer-t-released', '--checkpoint', checkpoint,
                           '--data-root', tmp_path / 'imagenet')
    assert result.returncode == 1
    assert f'the data root {tmp_path / "imagenet"} lacks {tmp_path / "imagenet/meta/val.txt"} ' \
        '(expected under it: meta/val.txt, val;' in result.stderr
    pascal = run_tool_main(reproduce, 'veca-released-pascal-context-probe', '--checkpoint',
                           checkpoint, '--data-root', tmp_path)
    assert pascal.returncode == 1
    assert f'{tmp_path / "SegmentationClassContext"}' in pascal.stderr
    assert f'{tmp_path / "ImageSets/SegmentationContext/train.txt"}' in pascal.stderr


def test_checkpoint_and_data_root_go_together_and_only_with_released_weights(tmp_path):
    alone = run_tool_main(reproduce, 'weightformer-t-released', '--checkpoint', 'x.safetensors')
    assert alone.returncode == 1
    assert 'needs both --checkpoint' in alone.stderr and '--data-root (ImageNet-1K val' in \
        alone.stderr
    other = run_tool_main(reproduce, 'veca-interactions', '--checkpoint', 'x.pt')
    assert other.returncode == 1
    assert 'veca-interactions evaluates no released weights; experiments that do: ' \
        'weightformer-t-released, weightformer-s-released' in other.stderr


def test_a_probe_is_trained_on_the_converted_backbone_before_it_is_evaluated(tmp_path):
    """VECA releases the backbone only: the probe's config trains on it, then is tested, both
    with the --cfg-options given. The dry run prints the commands without the files."""
    checkpoint = tmp_path / 'veca.pt'
    printed = run_tool_main(reproduce, 'veca-released-pascal-context-probe', '--checkpoint',
                            checkpoint, '--data-root', tmp_path, '--dry-run', '--cfg-options',
                            'train_dataloader.batch_size=4')
    assert printed.returncode == 0
    work = 'work_dirs/reproduce/veca-released-pascal-context-probe'
    config = 'configs/veca/linear-probe_veca-base-frozen_8xb2-40k_pascal-context-59-512x512.py'
    assert printed.stdout.splitlines() == [
        f'python tools/model_converters/veca2mmlinear.py --force {checkpoint} {work}/converted.pth',
        f'python tools/train.py {config} --work-dir {work}/probe --cfg-options '
        f'model.backbone.init_cfg.checkpoint={work}/converted.pth '
        'model.backbone.init_cfg.prefix=backbone. '
        f'train_dataloader.dataset.data_root={tmp_path} '
        f'val_dataloader.dataset.data_root={tmp_path} train_dataloader.batch_size=4',
        f'python tools/test.py {config} $(cat {work}/probe/last_checkpoint) --work-dir {work}/test '
        f'--cfg-options test_dataloader.dataset.data_root={tmp_path} train_dataloader.batch_size=4',
    ]


#: The VECA probes made tiny: the 2-block 'test' preset (64 wide) and a short schedule; plain
#: fp32 steps (mmengine's AMP wrapper needs a GPU).
TINY_PROBES = {
    'veca-released-imagenet-probe': [
        'model.neck.input_features=64', 'model.head.in_channels=64',
        'train_dataloader.batch_size=2', 'train_cfg.max_epochs=1', 'optim_wrapper.type=OptimWrapper'
    ],
    'veca-released-pascal-context-probe':
    ['model.decode_head.in_channels=64', 'train_cfg.max_iters=2', 'train_cfg.val_interval=2'],
}


@pytest.mark.parametrize(
    'experiment_id,reported',
    [
        # Both run with --run-slow only (about 50 s each: three processes that import a
        # toolbox, a training and a test): the default suite checks the commands the probe
        # experiments run (the dry run above), the converter (test_veca2mmlinear.py) and
        # convert-then-evaluate end to end on WeightFormer-T.
        pytest.param(
            'veca-released-imagenet-probe',
            'ImageNet-1k Top 1 Accuracy 81.93',
            marks=pytest.mark.slow),
        pytest.param(
            'veca-released-pascal-context-probe',
            'PASCAL Context mIoU 57.46',
            marks=pytest.mark.slow),
    ])
def test_released_veca_backbone_gets_its_probe_trained_then_evaluated(tmp_path, experiment_id,
                                                                      reported, reproduce_here):
    """The tiny VECA in the released container, converted, frozen under the probe's config
    (made tiny by --cfg-options), trained briefly on the generated dataset, then tested."""
    state = tiny_veca_release(tmp_path / 'veca.pt')
    if experiment_id == 'veca-released-imagenet-probe':
        data_root = write_imagenet(tmp_path / 'imagenet', val=[1, 2], train=[1, 2, 1, 2])
    else:
        data_root = write_pascal_context(tmp_path / 'VOCdevkit' / 'VOC2010', train=2, val=2)
    work_dir = osp.join(REPO_ROOT, 'work_dirs', 'reproduce', experiment_id)
    shutil.rmtree(work_dir, ignore_errors=True)

    result = reproduce_here(experiment_id, '--checkpoint', tmp_path / 'veca.pt', '--data-root',
                            data_root, '--cfg-options', 'model.backbone.arch=test',
                            'model.backbone.frozen_stages=2', *TINY_PROBES[experiment_id])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert re.search(
        rf'{experiment_id}: measured \S+ \d+\.\d\d on {re.escape(str(data_root))}; the paper '
        rf'reports {reported} \(model index\)', result.stdout)
    # The probe trained on the released backbone, frozen: its weights are still the release's.
    with open(osp.join(work_dir, 'probe', 'last_checkpoint')) as f:
        probe = torch.load(f.read().strip(), map_location='cpu', weights_only=False)['state_dict']
    for key, value in state.items():
        torch.testing.assert_close(probe[f'backbone.{key}'], value)
    assert osp.isdir(osp.join(work_dir, 'test'))
