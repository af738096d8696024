"""Moved to :mod:`disaggregated_eval.pipeline.config` (workflow plumbing, not part of the library).

This module re-exports its names for one release; import them from the new path.
"""

import warnings

from .pipeline.config import (
    SCHEMA_PATH,
    ConfigError,
    check_config_file,
    fill_defaults,
    load_schema,
    validate_config,
)

__all__ = ["ConfigError", "SCHEMA_PATH", "load_schema", "fill_defaults", "check_config_file", "validate_config"]

warnings.warn(
    "disaggregated_eval.config moved to disaggregated_eval.pipeline.config; the old path will be removed",
    DeprecationWarning,
    stacklevel=2,
)
