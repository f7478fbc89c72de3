"""What the command-line tools in ``tools/`` share, and nothing else calls: their common
arguments, launchers and work dirs (:mod:`.runner_setup`), a config's test loop run as often
as an analysis needs, at any input size (:mod:`.test_runner`), mmseg's sliding-window
baseline of the large-image demo (:mod:`.slide_segmentation`), the benchmark harness of
the backbones (:mod:`.benchmark`, the engine of ``tools/analysis_tools/benchmark.py``), the
demo's models and targets (:mod:`.demo`, behind ``tools/misc/run_demo.py``) and the registry of
the papers' experiments (:mod:`.reproduce`, behind ``tools/reproduce.py``).

This layer sits above :mod:`mmlinear.apis` and :mod:`mmlinear.visualization` and below
``tools/``: it may import them, never the reverse. What a user calls from Python is in
:mod:`mmlinear.apis`.
"""
from .runner_setup import (add_common_arguments, check_dataset_paths, close_launcher, enable_amp,
                           fix_dataloaders, pair_checkpoints, parse_tool_args, prepare_launcher,
                           run_runner, set_work_dir, start_gloo_group, torchrun_attempt)
from .test_runner import SIZE_TRANSFORMS, build_test_runner, resized_pipeline, run_test_loop

__all__ = [
    'SIZE_TRANSFORMS', 'add_common_arguments', 'build_test_runner', 'check_dataset_paths',
    'close_launcher', 'enable_amp', 'fix_dataloaders', 'pair_checkpoints', 'parse_tool_args',
    'prepare_launcher', 'resized_pipeline', 'run_runner', 'run_test_loop', 'set_work_dir',
    'start_gloo_group', 'torchrun_attempt'
]
