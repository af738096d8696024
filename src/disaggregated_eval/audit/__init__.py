"""Disaggregated and controlled evaluation of anyone's predictions (``disagg-eval audit``).

``audit(data, label=..., scores=[...], groups=[...], ...)`` takes a pandas (or polars) data frame and returns an
:class:`AuditResult` with tidy tables of every metric on every slice (overall, each level of each
attribute, each intersection) with intervals, comparisons with p-values, and controlled differences
``T_a``. See ``docs/audit.md``.
"""

from .core import audit
from .errors import AuditInputError, AuditWarning
from .options import AuditOptions
from .result import AuditResult

__all__ = ["audit", "AuditResult", "AuditOptions", "AuditInputError", "AuditWarning"]
