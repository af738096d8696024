"""Moved to :mod:`disaggregated_eval.pipeline.audit_runs` (workflow plumbing, not part of the audit tool).

This module re-exports its names for one release; import them from the new path.
"""

import warnings

from ..pipeline.audit_runs import (
    ALL_MODELS,
    AUDIT_SCRIPT,
    DEFAULT_OUT_DIR,
    RUN_KEYS,
    audit_code_files,
    audit_runs,
    audit_targets,
    job_param,
    output_pattern,
)

__all__ = [
    "RUN_KEYS",
    "ALL_MODELS",
    "DEFAULT_OUT_DIR",
    "AUDIT_SCRIPT",
    "audit_runs",
    "audit_code_files",
    "job_param",
    "audit_targets",
    "output_pattern",
]

warnings.warn(
    "disaggregated_eval.audit.runs moved to disaggregated_eval.pipeline.audit_runs; the old path will be removed",
    DeprecationWarning,
    stacklevel=2,
)
