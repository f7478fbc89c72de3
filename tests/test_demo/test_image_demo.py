"""demo/image_demo.py runs each task's demo config and checkpoint on an image: it prints the
summary and writes the drawn picture. The classifier runs as a user runs it, in a process of its
own; the detector and the segmentor in this process (a process costs seconds of imports)."""
import os.path as osp
import re
import subprocess
import sys

import mmcv
import pytest
from conftest import REPO_ROOT
from test_tools.analysis_tools_loader import load_tool, run_tool_main

SUMMARIES = {
    'cls':
    r'classification \(mmpretrain ImageClassifier\): top-1 (circle|square|triangle) '
    r'\(score 0\.\d{3}\)',
    # Score threshold 0: a random detector scores low.
    'det':
    r'detection \(mmdet MaskRCNN\): \d+ instances with score >= 0\.0: '
    r'(circle|square|triangle) 0\.\d\d at \(\d+, \d+, \d+, \d+\)',
    'seg':
    r'segmentation \(mmseg EncoderDecoder\): 128x128 label map; pixels per class: '
    r'(background|circle|square|triangle) \d+\.\d%',
}


@pytest.mark.parametrize('task', ['cls', 'det', 'seg'])
def test_image_demo_prints_the_summary_and_draws_the_result(task, demo_checkpoints, tmp_path,
                                                            monkeypatch):
    demo = demo_checkpoints[task]
    args = [demo.image, demo.config, demo.checkpoint, '--device', 'cpu', '--score-thr', '0']
    if task == 'seg':  # the default place
        out_file = osp.join('work_dirs', 'image_demo',
                            osp.splitext(osp.basename(demo.config))[0],
                            osp.splitext(osp.basename(demo.image))[0] + '.png')
    else:
        out_file = str(tmp_path / 'drawn' / f'{task}.jpg')
        args += ['--out-file', out_file]
    if task == 'cls':
        result = subprocess.run(
            [sys.executable, osp.join(REPO_ROOT, 'demo', 'image_demo.py')] + args,
            cwd=tmp_path,
            capture_output=True,
            text=True)
    else:
        monkeypatch.chdir(tmp_path)
        result = run_tool_main(load_tool('image_demo', osp.join(REPO_ROOT, 'demo')), *args)
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(SUMMARIES[task], result.stdout), result.stdout
    assert f'drawn result saved to {out_file}' in result.stdout
    size = (64, 64) if task == 'cls' else (128, 128)
    assert mmcv.imread(osp.join(tmp_path, out_file)).shape == size + (3, )
