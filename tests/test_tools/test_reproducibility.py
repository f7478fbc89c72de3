"""With a fixed seed and deterministic flags, two training runs give the same loss curve."""
import json

from test_train_test_e2e import cls_config, run_in_process, scalars_file


def loss_curve(config, work_dir, seed, name):
    """The losses of a run of tools/train.py in this process, under its own experiment name
    (the runs share the config's file)."""
    run_in_process('train', config, '--work-dir', work_dir, '--cfg-options',
                   f'experiment_name={name}', f'randomness.seed={seed}',
                   'randomness.deterministic=True', 'default_hooks.logger.interval=1')
    with open(scalars_file(work_dir)) as f:
        return [json.loads(line)['loss'] for line in f if '"loss"' in line]


def test_same_seed_same_losses_other_seed_other_losses(tiny_data, tmp_path):
    config = cls_config(tmp_path, tiny_data, epochs=1)
    first = loss_curve(config, str(tmp_path / 'a'), seed=7, name='a')
    second = loss_curve(config, str(tmp_path / 'b'), seed=7, name='b')
    other = loss_curve(config, str(tmp_path / 'c'), seed=8, name='c')
    assert len(first) >= 3 and first == second
    assert other != first  # the seed does reach the initialisation and the data order
