"""mmengine checkpoints load under weights_only=True; nothing else in a pickle may run."""
import builtins
import os
import pickle

import numpy as np
import pytest
import torch
from mmengine.logging import HistoryBuffer
from mmengine.optim.scheduler.param_scheduler import OneCycleParamScheduler

import mmlinear  # noqa: F401  (registers the allowlist)
from mmlinear.utils import checkpoint_getattr, load_checkpoint_file


def mmengine_like_checkpoint():
    buffer = HistoryBuffer()
    buffer.update(0.5)
    buffer.update(np.float64(0.25))
    return dict(
        meta=dict(seed=np.int64(3), dataset_meta=dict(classes=('a', 'b'))),
        state_dict=dict(w=torch.ones(2)),
        message_hub=dict(
            log_scalars={'train/loss': buffer},
            runtime_info=dict(arr=np.arange(3, dtype=np.float32))))


def test_mmengine_checkpoint_loads_with_weights_only(tmp_path):
    path = tmp_path / 'ckpt.pth'
    torch.save(mmengine_like_checkpoint(), path)
    loaded = torch.load(path, weights_only=True)
    assert loaded['message_hub']['log_scalars']['train/loss'].mean() == pytest.approx(0.375)
    assert loaded['message_hub']['runtime_info']['arr'].tolist() == [0, 1, 2]
    assert torch.equal(loaded['state_dict']['w'], torch.ones(2))


class CreatesFile:
    """Unpickling this would create a file (a stand-in for running arbitrary code)."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (builtins.open, (self.path, 'w'))


class ClimbsThroughGetattr:

    def __reduce__(self):
        return (getattr, ('', '__class__'))


def test_malicious_checkpoint_is_refused(tmp_path):
    target = tmp_path / 'pwned.txt'
    path = tmp_path / 'evil.pth'
    torch.save(dict(state_dict={}, payload=CreatesFile(str(target))), path)
    with pytest.raises(Exception, match='Weights only load failed'):
        torch.load(path)
    assert not target.exists()
    path = tmp_path / 'escape.pth'
    torch.save(dict(payload=ClimbsThroughGetattr()), path)
    with pytest.raises(Exception, match='only the public methods of mmengine HistoryBuffer'):
        torch.load(path)


def test_restricted_getattr():
    assert checkpoint_getattr(HistoryBuffer, 'mean') is HistoryBuffer.mean
    assert checkpoint_getattr(OneCycleParamScheduler,
                              '_annealing_cos') is OneCycleParamScheduler._annealing_cos
    for obj, name in ((HistoryBuffer, '__init__'), (HistoryBuffer, '_log_history'), (os, 'system'),
                      ('', '__class__'), (OneCycleParamScheduler,
                                          '__init__'), (OneCycleParamScheduler, 'step')):
        with pytest.raises(Exception, match='refusing getattr'):
            checkpoint_getattr(obj, name)


@pytest.mark.parametrize(
    'content,reason', [(b'', 'the file is empty or truncated'),
                       (bytes(range(256)), 'not a file written by torch.save or it is damaged')],
    ids=['empty', 'not-torch'])
def test_unreadable_file_is_named_as_such(tmp_path, content, reason):
    """A file torch.save did not write is reported as unreadable, not as a refused object
    (and without torch's advice to turn weights_only off)."""
    path = tmp_path / 'ckpt.pth'
    path.write_bytes(content)
    with pytest.raises(pickle.UnpicklingError) as info:
        load_checkpoint_file(str(path))
    message = str(info.value)
    assert message.startswith(f'cannot read checkpoint {path}: ') and reason in message
    assert 'weights_only' not in message
