"""The audit's exceptions and warning: bad usage, bad input, and input that weakens the audit.

Every check of an audit's options and data raises one of these before any work (``docs/audit.md``,
"Exit codes and bad input"): the command line prints the message on one line and exits with status 2.
"""

from __future__ import annotations

__all__ = ["UsageError", "AuditInputError", "AuditWarning"]


class UsageError(ValueError):
    """Bad command line, ``--config`` file or workflow entry: printed as one line, exit status 2."""


class AuditInputError(ValueError):
    """Bad input to an audit: an option or a column of the data frame (checked before any work)."""


class AuditWarning(UserWarning):
    """An option or input that works but weakens the audit (e.g. too few resamples for the level)."""
