"""Disaggregated and controlled evaluation of anyone's predictions (``disagg-eval audit``).

``audit(data, label=..., scores=[...], groups=[...], ...)`` takes a pandas (or polars) data frame and returns an
:class:`AuditResult` with tidy tables of every metric on every slice (overall, each level of each
attribute, each intersection) with intervals, comparisons with p-values, and controlled differences
``T_a``. See ``docs/audit.md``.
"""

from typing import Any

__all__ = ["audit", "AuditResult", "AuditOptions", "AuditInputError", "AuditWarning"]


def __getattr__(name: str) -> Any:
    """The public names, imported when first asked for (PEP 562): the command line starts from :mod:`.entry`
    without loading the engine's libraries, so that a failure to load them is one line, not a traceback."""
    if name == "audit":
        from .core import audit as value
    elif name in ("AuditInputError", "AuditWarning"):
        from . import errors

        value = getattr(errors, name)
    elif name == "AuditOptions":
        from .options import AuditOptions as value
    elif name == "AuditResult":
        from .result import AuditResult as value
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
