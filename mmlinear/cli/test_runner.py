"""A config's own test loop, run as often as an analysis needs (one budget, one resolution),
and its test pipeline resized to any square side."""
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence

from mmengine.config import Config

if TYPE_CHECKING:
    from mmengine.runner import Runner

#: The transforms that set an image's test size; they give way to one resize to S x S.
SIZE_TRANSFORMS = ('Resize', 'ResizeEdge', 'CenterCrop', 'RandomResize', 'RandomCrop', 'Pad')


def build_test_runner(cfg: Config, checkpoint: Optional[str], work_dir: str) -> 'Runner':
    """An mmengine Runner of ``cfg`` whose test loop can run many times, the model's weights
    loaded strictly.

    ``Runner.test()`` loads ``load_from`` without strictness (another model's checkpoint
    would leave the weights random without an error) and runs the loop once; here the
    checkpoint must hold exactly the config's model, and :func:`run_test_loop` may run after
    any change to the model (a core budget, a test pipeline).

    Args:
        cfg (Config): A config with ``test_dataloader``, ``test_evaluator`` and
            ``test_cfg``; its ``work_dir`` and ``load_from`` are replaced.
        checkpoint (str, optional): A checkpoint of the whole model. None keeps the config's
            initialisation.
        work_dir (str): Where the runner writes its logs.

    Returns:
        Runner: The runner, its hooks' ``before_run`` called.

    Raises:
        ValueError: If the checkpoint does not hold the config's model.
    """
    from mmengine.runner import Runner, load_checkpoint
    cfg.work_dir = work_dir
    cfg.load_from = None
    runner = Runner.from_cfg(cfg)
    if checkpoint:
        try:
            load_checkpoint(runner.model, checkpoint, map_location='cpu', strict=True)
        except RuntimeError as error:
            first = str(error).strip().splitlines()[0]
            raise ValueError(f'{checkpoint} does not hold the model of {cfg.filename}: {first}')
    # What Runner.test() does before its loop (the logger hook's paths, for one).
    runner.call_hook('before_run')
    return runner


def run_test_loop(runner: 'Runner') -> Dict[str, float]:
    """The metrics of one pass of the runner's test loop (mIoU, accuracy/top1, rmse, ...).

    Args:
        runner (Runner): From :func:`build_test_runner`.

    Returns:
        dict[str, float]: The evaluator's metrics.
    """
    return {key: float(value) for key, value in runner.test_loop.run().items()}


def resized_pipeline(pipeline: Sequence[dict], side: int) -> List[dict]:
    """``pipeline`` with its sizing transforms replaced by a resize to ``side`` x ``side``
    right after the image is loaded (labels loaded later keep their own size).

    Args:
        pipeline (Sequence[dict]): A test pipeline's transform configs.
        side (int): The square side every image is resized to.

    Returns:
        list[dict]: The new pipeline (copies of the kept transforms).

    Raises:
        ValueError: If the pipeline loads no image (``LoadImageFromFile``).
    """
    kept = [dict(t) for t in pipeline if t['type'] not in SIZE_TRANSFORMS]
    loads = [i for i, t in enumerate(kept) if t['type'] == 'LoadImageFromFile']
    if not loads:
        raise ValueError(f'the test pipeline has no LoadImageFromFile to resize after: '
                         f'{[t["type"] for t in pipeline]}')
    resize = dict(type='Resize', scale=(side, side), keep_ratio=False)
    return kept[:loads[0] + 1] + [resize] + kept[loads[0] + 1:]
