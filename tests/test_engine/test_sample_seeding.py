"""Each sample's random draws are a function of the seed, the epoch and its place in the
epoch: the same in the main process and in any worker, persistent or not, resumed or not."""
import pickle
import random

import numpy as np
import pytest
import torch
from mmengine.dataset import DefaultSampler, InfiniteSampler
from mmengine.runner import Runner
from torch.utils.data import DataLoader, Dataset

from mmlinear.engine.sample_seeding import (SampleKey, SampleSeededDataset, SampleSeededSampler,
                                            seed_each_sample)


class RandomDraws(Dataset):
    """Each sample is its index and a draw of each generator an augmentation may use."""

    pipeline = 'the pipeline'

    def __len__(self):
        return 12

    def __getitem__(self, index):
        return torch.tensor(
            [index, random.random(),
             np.random.rand(), torch.rand(()).item()], dtype=torch.float64)


def test_a_key_is_its_index_and_keeps_its_words_through_pickling():
    key = pickle.loads(pickle.dumps(SampleKey(5, (0, 0, 2, 7))))
    assert isinstance(key, SampleKey) and key == 5 and key.seed_words == (0, 0, 2, 7)
    assert [10, 11, 12, 13, 14, 15][key] == 15


def test_a_key_decides_the_draws_and_leaves_the_caller_s_generators_alone():
    dataset = SampleSeededDataset(RandomDraws())
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    first = dataset[SampleKey(3, (0, 0, 1, 4))]
    after = random.random(), np.random.rand(), torch.rand(()).item()
    random.seed(1)
    np.random.seed(1)
    torch.manual_seed(1)
    assert after == (random.random(), np.random.rand(), torch.rand(()).item())
    random.seed(2)  # other states before: the same draws
    assert torch.equal(dataset[SampleKey(3, (0, 0, 1, 4))], first)
    for words in [(1, 0, 1, 4), (0, 1, 1, 4), (0, 0, 2, 4), (0, 0, 1, 5)]:
        assert not torch.equal(dataset[SampleKey(3, words)][1:], first[1:])
    # A plain index draws from the caller's generators.
    random.seed(3)
    plain = dataset[3][1].item()
    random.seed(3)
    assert plain == random.random()


def test_the_dataset_wrapper_reads_and_writes_through():
    inner = RandomDraws()
    dataset = SampleSeededDataset(inner)
    assert len(dataset) == 12 and dataset.pipeline == 'the pipeline'
    dataset.pipeline = 'another'  # as mmdet's PipelineSwitchHook does
    assert inner.pipeline == 'another'
    with pytest.raises(AttributeError):
        dataset.missing
    copy = pickle.loads(pickle.dumps(dataset))
    assert copy.pipeline == 'another'


def test_the_sampler_keys_count_epochs_and_positions_and_keep_the_order():
    dataset = RandomDraws()
    sampler = SampleSeededSampler(dict(type='DefaultSampler', shuffle=True), dataset, seed=7)
    assert isinstance(sampler.sampler, DefaultSampler) and sampler.shuffle
    sampler.set_epoch(3)
    keys = list(sampler)
    reference = DefaultSampler(dataset, shuffle=True, seed=7)
    reference.set_epoch(3)
    assert keys == list(reference) and len(sampler) == 12
    assert [k.seed_words for k in keys] == [(7, 0, 3, p) for p in range(12)]
    # Without a seed, the wrapped sampler's.
    infinite = SampleSeededSampler(InfiniteSampler(dataset, seed=5), dataset)
    stream = iter(infinite)
    assert [next(stream).seed_words for _ in range(14)][-1] == (5, 0, 0, 13)


def loader(num_workers, persistent=False):
    """A train loader as mmengine's runner builds it (with its seeding worker_init_fn)."""
    return Runner.build_dataloader(
        seed_each_sample(
            dict(
                batch_size=4,
                num_workers=num_workers,
                persistent_workers=persistent,
                dataset=RandomDraws(),
                sampler=dict(type='DefaultSampler', shuffle=True))),
        seed=0)


def epochs(data_loader, first, last):
    draws = []
    for epoch in range(first, last):
        data_loader.sampler.set_epoch(epoch)
        # mmengine collates a batch into a list (pseudo_collate).
        draws.append(torch.stack([sample for batch in data_loader for sample in batch]))
    return draws


def test_real_workers_draw_what_the_main_process_draws_in_every_epoch_and_after_a_resume():
    expected = epochs(loader(0), 0, 3)
    assert not torch.equal(expected[0][:, 1:], expected[1][:, 1:])  # epochs differ
    for num_workers, persistent in [(2, False), (2, True)]:
        assert all(
            torch.equal(a, b)
            for a, b in zip(epochs(loader(num_workers, persistent), 0, 3), expected))
        # A resumed run: new workers, starting at epoch 2.
        assert torch.equal(epochs(loader(num_workers, persistent), 2, 3)[0], expected[2])


def test_only_a_loader_config_with_a_sampler_config_is_wrapped():
    cfg = dict(dataset=dict(type='X'), sampler=dict(type='DefaultSampler'), batch_size=2)
    wrapped = seed_each_sample(cfg)
    assert wrapped['dataset'] == dict(type=SampleSeededDataset, dataset=dict(type='X'))
    assert wrapped['sampler'] == dict(type=SampleSeededSampler, sampler=dict(type='DefaultSampler'))
    assert cfg['dataset'] == dict(type='X') and wrapped['batch_size'] == 2
    built = DataLoader(RandomDraws())
    assert seed_each_sample(built) is built
    objects = dict(dataset=RandomDraws(), sampler=DefaultSampler(RandomDraws()))
    assert seed_each_sample(objects) is objects
