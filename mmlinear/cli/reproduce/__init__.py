"""The papers' experiments behind ``tools/reproduce.py``: the registry (:mod:`.registry`), what
each experiment and claim has and lacks (:mod:`.claims`), and the check of released weights
(:mod:`.released`). The registry describes a source checkout: its commands run from the
repository root, and its docs, Makefile and configs are read there."""
from .claims import (CLAIMS_TABLE_BEGIN, CLAIMS_TABLE_END, all_claims, claim_lacks,
                     claim_number_problems, claims_markdown, claims_view, describe, missing_report,
                     recorded_problem, section_text)
from .registry import (EXPERIMENTS_FILE, QUOTED_IN, REPO_ROOT, SCALES, commands_for,
                       load_experiments, paper_metric, reported_results, work_folder)
from .released import (check_converted, check_released_inputs, measured_metric, released_commands,
                       released_work_dir)

__all__ = [
    'CLAIMS_TABLE_BEGIN', 'CLAIMS_TABLE_END', 'EXPERIMENTS_FILE', 'QUOTED_IN', 'REPO_ROOT',
    'SCALES', 'all_claims', 'check_converted', 'check_released_inputs', 'claim_lacks',
    'claim_number_problems', 'claims_markdown', 'claims_view', 'commands_for', 'describe',
    'load_experiments', 'measured_metric', 'missing_report', 'paper_metric', 'recorded_problem',
    'released_commands', 'released_work_dir', 'reported_results', 'section_text', 'work_folder'
]
