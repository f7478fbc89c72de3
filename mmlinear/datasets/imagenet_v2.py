"""ImageNet-V2 (Recht et al., 2019): new test sets for ImageNet-1K classifiers."""
import os.path as osp
from typing import List, Tuple

from mmengine.fileio import get_file_backend
from mmengine.logging import MMLogger
from mmpretrain.datasets import CustomDataset
from mmpretrain.datasets.categories import IMAGENET_CATEGORIES
from mmpretrain.datasets.custom import get_samples

from mmlinear.registry import DATASETS


@DATASETS.register_module()
class ImageNetV2(CustomDataset):
    """An ImageNet-V2 test set, labelled in ImageNet-1K's class order.

    The released archives (matched-frequency, threshold-0.7, top-images; 10 images per class)
    name each class folder by its ImageNet-1K index, ``0`` to ``999``. A folder dataset would
    sort those names as strings (``0, 1, 10, 100, ...``) and number the classes in that order,
    so a classifier trained on ImageNet-1K would be scored against the wrong labels. Here the
    label is the folder's name read as an integer, and the class names are ImageNet-1K's.

    A re-collected test set of other classes in the same layout (the bundled demo's
    ``cls_v2`` split of its three shapes) passes its own class list, in the order of the
    classifier's training labels, as ``metainfo=dict(classes=...)``: its folders are then
    named ``0`` to ``len(classes) - 1``.

    Args:
        data_root (str): The folder that holds the extracted archive. Defaults to ''.
        data_prefix (str | dict): The archive's folder under ``data_root``, e.g.
            ``'imagenetv2-matched-frequency-format-val'``. Defaults to ''.
        **kwargs: Other arguments of mmpretrain's ``CustomDataset`` (``pipeline``,
            ``extensions``, ``metainfo``, ...); ``ann_file`` and ``with_label=False`` are
            refused. ``metainfo=dict(classes=...)`` replaces ImageNet-1K's 1000 class names
            (the labels' order); without it they are ImageNet-1K's.
    """
    METAINFO = {'classes': IMAGENET_CATEGORIES}

    def __init__(self, data_root: str = '', data_prefix: str = '', **kwargs) -> None:
        if kwargs.get('ann_file') or not kwargs.get('with_label', True):
            raise ValueError('ImageNetV2 reads the labels from the class folders\' names: '
                             'ann_file and with_label=False are not taken')
        super().__init__(data_root=data_root, data_prefix=data_prefix, **kwargs)

    def _find_samples(self) -> List[Tuple[str, int]]:
        """(path under the prefix, label) of every image of the class folders, the label being
        the folder's name read as an index into the class list."""
        backend = get_file_backend(self.img_prefix, enable_singleton=True)
        folders = sorted(backend.list_dir_or_file(self.img_prefix, list_dir=True, list_file=False))
        classes = self.metainfo['classes']
        num_classes = len(classes)
        is_imagenet = tuple(classes) == tuple(IMAGENET_CATEGORIES)
        folder_to_idx = {}
        for folder in folders:
            if not (folder.isdigit() and int(folder) < num_classes):
                if is_imagenet:
                    raise ValueError(
                        f'ImageNet-V2 class folders are named by their ImageNet-1K index, 0 to '
                        f'{num_classes - 1}; got {osp.join(self.img_prefix, folder)!r} (a folder '
                        f'of WordNet ids such as n01440764 is ImageNet-1K\'s own layout: use '
                        f'mmpretrain\'s ImageNet)')
                raise ValueError(f'ImageNet-V2-style class folders are named by their index in the '
                                 f'{num_classes} classes of metainfo ({", ".join(classes)}), 0 to '
                                 f'{num_classes - 1}; got {osp.join(self.img_prefix, folder)!r}')
            folder_to_idx[folder] = int(folder)
        samples, empty = get_samples(self.img_prefix, folder_to_idx, self.is_valid_file)
        if not samples:
            raise RuntimeError(f'found no image in the class folders of {self.img_prefix!r} '
                               f'(extensions {", ".join(sorted(self.extensions))})')
        missing = num_classes - len(folder_to_idx) + len(empty)
        if missing:
            released = ' (the released sets have 10 images of every class)' if is_imagenet else ''
            MMLogger.get_current_instance().warning(
                f'ImageNet-V2 at {self.img_prefix}: {missing} of the {num_classes} classes '
                f'have no image{released}')
        return samples
