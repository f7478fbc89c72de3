"""Each training sample's random draws as a function of the seed, the epoch and the sample's
place in the epoch, whichever process loads it.

A data-loading worker draws its augmentations (flips, crops, colour jitter) from the global
generators of its process (Python's ``random``, numpy's legacy generator, torch's CPU
generator). Those carry on from one sample to the next, and for persistent workers from one
epoch to the next, so which flip a sample gets depends on everything that worker loaded
before it. A run resumed in the middle of an epoch starts new workers whose generators have
not seen the earlier epochs: its augmentations, and so its weights, differ from the
uninterrupted run's, and a checkpoint cannot restore the workers' states (they live in other
processes, which have already loaded batches past the checkpoint).

Here the generators are seeded again for every sample, from ``(seed, rank, epoch, position
of the sample in the epoch on this rank)``, just before it is loaded and restored right after:

- :class:`SampleSeededSampler` wraps the run's sampler and hands out each index as a
  :class:`SampleKey`, an ``int`` that also carries those four numbers (an ``int``, so batch
  samplers that look the index up, such as mmdet's ``AspectRatioBatchSampler``, work
  unchanged). The key is made in the main process, where the sampler runs, and travels to the
  worker with the index.
- :class:`SampleSeededDataset` wraps the run's dataset; for a :class:`SampleKey` it seeds the
  generators from the key, loads the sample and puts the generators back as they were.

So a sample's augmentation is the same whether it is loaded in the main process or in any
worker, persistent or not, in an uninterrupted or a resumed run, and loading data no longer
moves the main process's generators (with ``num_workers=0`` it did: the model's own draws,
dropout or drop-path, depended on the augmentations before). :func:`seed_each_sample` wraps a
train data loader's config this way; :mod:`mmlinear.engine.upstream_shims` applies it to every
training run's train loader.
"""
import copy
import random
from typing import Any, Optional, Tuple, Union

import numpy as np
import torch
from mmengine.dist import get_dist_info, sync_random_seed
from mmengine.registry import DATA_SAMPLERS, DATASETS
from torch.utils.data import Dataset, Sampler

# The seed words are taken modulo 2**64: numpy's SeedSequence takes non-negative integers.
_SEED_MASK = (1 << 64) - 1


class SampleKey(int):
    """A dataset index carrying the seed of its sample's random draws.

    Args:
        index (int): The dataset index.
        seed_words (tuple[int]): ``(seed, rank, epoch, position)``.
    """

    def __new__(cls, index: int, seed_words: Tuple[int, ...]) -> 'SampleKey':
        key = super().__new__(cls, index)
        key.seed_words = seed_words
        return key

    def __reduce__(self):
        # The index queue to a worker pickles the key: keep the words.
        return SampleKey, (int(self), self.seed_words)


def seed_generators(seed_words: Tuple[int, ...]) -> None:
    """Seed Python's, numpy's legacy and torch's CPU generators from ``seed_words``.

    Args:
        seed_words (tuple[int]): Any integers; equal words give equal draws, and different
            words independent ones (numpy's ``SeedSequence`` mixes them).
    """
    words = np.random.SeedSequence([w & _SEED_MASK for w in seed_words]).generate_state(4)
    random.seed((int(words[0]) << 32) | int(words[1]))
    np.random.seed(words)
    torch.manual_seed((int(words[2]) << 32) | int(words[3]))


class _Forwarding:
    """Attributes that the wrapper itself does not have are read from and written to the
    wrapped object ``self._wrapped_name``: code that sets ``loader.dataset.pipeline`` (mmdet's
    ``PipelineSwitchHook``) or reads ``loader.sampler.shuffle`` reaches the real one."""

    _wrapped_name = ''
    _own = ()

    def __getattr__(self, name: str) -> Any:
        # Called only for attributes not found normally; during unpickling the wrapped object
        # is not there yet.
        wrapped = self.__dict__.get(self._wrapped_name)
        if wrapped is None or name.startswith('__'):
            raise AttributeError(name)
        return getattr(wrapped, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._own:
            object.__setattr__(self, name, value)
        else:
            setattr(getattr(self, self._wrapped_name), name, value)


class SampleSeededDataset(_Forwarding, Dataset):
    """A dataset whose samples, asked for by a :class:`SampleKey`, are loaded with the
    generators seeded from the key (and restored afterwards); a plain index loads as in the
    wrapped dataset.

    Args:
        dataset (dict | Dataset): The dataset, or its config (built with mmengine's
            ``DATASETS`` in the current default scope).
    """

    _wrapped_name = 'dataset'
    _own = ('dataset', )

    def __init__(self, dataset: Union[dict, Dataset]) -> None:
        self.dataset = DATASETS.build(dataset) if isinstance(dataset, dict) else dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        if not isinstance(index, SampleKey):
            return self.dataset[index]
        saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
        try:
            seed_generators(index.seed_words)
            return self.dataset[int(index)]
        finally:
            random.setstate(saved[0])
            np.random.set_state(saved[1])
            torch.set_rng_state(saved[2])


class SampleSeededSampler(_Forwarding, Sampler):
    """The indices of a sampler, each as a :class:`SampleKey` of ``(seed, rank, epoch,
    position in the epoch)``.

    ``set_epoch`` (called by mmengine's ``DistSamplerSeedHook`` before each epoch, and by the
    iteration-based loop when a finite sampler runs out) is recorded and passed on. For an
    infinite sampler (mmengine's ``InfiniteSampler``) the epoch stays and the position counts
    on through the whole run. A resumed run asks for the same epochs and, as it loads the
    skipped batches again, reaches the same positions, so its keys are the uninterrupted run's.

    Args:
        sampler (dict | Sampler): The sampler, or its config (built with mmengine's
            ``DATA_SAMPLERS`` with ``dataset`` and ``seed``, as mmengine's runner builds it).
        dataset (Dataset): The dataset it samples.
        seed (int, optional): The seed of the keys; None takes the sampler's ``seed``
            (mmengine's samplers agree on one over the ranks), or else a seed agreed over the
            ranks. Defaults to None.
    """

    _wrapped_name = 'sampler'
    _own = ('sampler', 'seed', 'rank', 'epoch')

    def __init__(self,
                 sampler: Union[dict, Sampler],
                 dataset: Dataset,
                 seed: Optional[int] = None) -> None:
        if isinstance(sampler, dict):
            sampler = DATA_SAMPLERS.build(sampler, default_args=dict(dataset=dataset, seed=seed))
        self.sampler = sampler
        if seed is None:
            seed = getattr(sampler, 'seed', None)
        self.seed = sync_random_seed() if seed is None else seed
        self.rank = get_dist_info()[0]
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Record the epoch of the next pass and hand it to the wrapped sampler.

        Args:
            epoch (int): The epoch.
        """
        self.epoch = epoch
        if hasattr(self.sampler, 'set_epoch'):
            self.sampler.set_epoch(epoch)

    def __iter__(self):
        epoch = self.epoch
        for position, index in enumerate(self.sampler):
            yield SampleKey(index, (self.seed, self.rank, epoch, position))

    def __len__(self) -> int:
        return len(self.sampler)


def seed_each_sample(loader_cfg: Union[dict, Any]) -> Union[dict, Any]:
    """A train data loader's config with its dataset in :class:`SampleSeededDataset` and its
    sampler in :class:`SampleSeededSampler`.

    Args:
        loader_cfg (dict | DataLoader): mmengine's ``train_dataloader``.

    Returns:
        dict | DataLoader: The wrapped config (a copy); a data loader, or a config whose
        sampler is an object, as it is (the keys have to come from a sampler built for them).
    """
    if not isinstance(loader_cfg, dict) or not isinstance(loader_cfg.get('sampler'), dict):
        return loader_cfg
    loader_cfg = copy.copy(loader_cfg)
    loader_cfg['dataset'] = dict(type=SampleSeededDataset, dataset=loader_cfg['dataset'])
    loader_cfg['sampler'] = dict(type=SampleSeededSampler, sampler=loader_cfg['sampler'])
    return loader_cfg


__all__ = [
    'SampleKey', 'SampleSeededDataset', 'SampleSeededSampler', 'seed_each_sample', 'seed_generators'
]
