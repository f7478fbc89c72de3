"""Data-loading workers ignore the preemption signals sent by another process and keep
loading; shut_down_workers stops persistent ones."""
import os
import signal
import subprocess

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from mmlinear.engine.dataloader_workers import (IgnoreSignals, ignore_signals_in_workers,
                                                shut_down_workers)


class WorkerPids(Dataset):
    """Each sample is the pid of the process that loads it."""

    def __len__(self):
        return 8

    def __getitem__(self, index):
        return os.getpid()


def test_ignore_signals_composes_with_the_loader_s_own_worker_init_fn():
    log = []
    loader = DataLoader(WorkerPids(), num_workers=2, worker_init_fn=log.append)
    ignore_signals_in_workers(loader, ['SIGUSR2'])
    ignore_signals_in_workers(loader, ['SIGUSR2'])  # a second time changes nothing
    assert isinstance(loader.worker_init_fn, IgnoreSignals)
    assert not isinstance(loader.worker_init_fn.then, IgnoreSignals)
    before = signal.getsignal(signal.SIGUSR2)
    try:
        loader.worker_init_fn(1)  # as a worker would
        assert signal.getsignal(signal.SIGUSR2) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGUSR2, before)
    assert log == [1]


def worker_pids(batches):
    return {pid for batch in batches for pid in batch.tolist()}


def signal_from_another_process(pids, signal_name):
    # kill(1) runs in a process of its own: torch's workers take a SIGTERM from their parent
    # for a request to exit.
    subprocess.run(['kill', f'-{signal_name[3:]}', *map(str, pids)], check=True)


@pytest.mark.parametrize('signal_name', ['SIGTERM', 'SIGUSR1'])
def test_persistent_workers_outlive_signals_and_shut_down(signal_name):
    loader = DataLoader(WorkerPids(), batch_size=2, num_workers=2, persistent_workers=True)
    ignore_signals_in_workers(loader, ['SIGTERM', 'SIGUSR1'])
    pids = worker_pids(loader)
    assert len(pids) == 2 and os.getpid() not in pids
    signal_from_another_process(pids, signal_name)
    # The same workers load the next epoch.
    assert worker_pids(loader) == pids
    shut_down_workers(loader)
    for pid in pids:  # joined: gone
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    shut_down_workers(loader)  # nothing left to stop


def test_without_it_a_signalled_worker_dies_and_stops_the_loading():
    loader = DataLoader(WorkerPids(), batch_size=1, num_workers=2, persistent_workers=True)
    pids = worker_pids(loader)
    signal_from_another_process(pids, 'SIGTERM')
    with pytest.raises(RuntimeError, match=r'DataLoader worker \(pid.*\) .*'):
        for _ in range(100):  # until the main process notices the death
            worker_pids(loader)
    del loader


def test_loaders_without_workers_of_torch_are_left_alone():
    batches = [torch.zeros(1)]
    ignore_signals_in_workers(batches, ['SIGTERM'])
    shut_down_workers(batches)
    assert batches == [torch.zeros(1)]
