"""A project outside the repository inherits our configs as 'mmlinear::<path>'."""
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import sys
    import mmlinear  # makes the mmlinear:: scope known to the config loader
    from mmengine.config import Config
    from mmengine.registry import MODELS, init_default_scope
    cfg = Config.fromfile(sys.argv[1])
    init_default_scope(cfg.default_scope)
    model = MODELS.build(cfg.model)
    print(cfg.default_scope, type(model).__name__, model.backbone.attn_type,
          model.backbone.embed_dims, cfg.optim_wrapper.optimizer.lr)
''')


def test_inherit_detection_config_by_package_scope(tmp_path):
    config = tmp_path / 'my_project' / 'my_mask_rcnn.py'
    config.parent.mkdir()
    config.write_text(
        textwrap.dedent('''
        _base_ = ['mmlinear::infvit/mask-rcnn_infvit-4l-linear_simple-pyramid_1x_coco.py']
        model = dict(
            backbone=dict(arch='infvit-test', attn_type='pure'),
            neck=dict(in_channels=32))
    '''))
    script = tmp_path / 'build.py'
    script.write_text(SCRIPT)
    # Run from the temporary folder: nothing resolves relative to the repository.
    result = subprocess.run([sys.executable, str(script), str(config)],
                            cwd=tmp_path,
                            capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['mmdet', 'MaskRCNN', 'pure', '32', '0.0001']
