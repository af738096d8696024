"""The result of an audit: tidy tables and the methods that show them.

:class:`AuditResult` holds three tidy tables (one row per estimate) whose columns are fixed here, in
one place (``docs/audit.md`` documents them):

- ``slices`` (:data:`SLICE_COLUMNS`): every metric of every model on every slice, with its
  percentile interval, the simultaneous band over the slices of the metric, the slice's counts and
  whether the estimate is reported (the minimum-size rules);
- ``comparisons`` (:data:`COMPARISON_COLUMNS`): slice minus overall, slice minus the rest of the
  rows, pairs of slices of one attribute (or of one intersection), each model minus the first; with
  paired intervals, permutation p-values and adjusted p-values;
- ``controlled`` (:data:`CONTROLLED_COLUMNS`): the subgroup metric, the weighted population metric
  ``M_a``, the controlled difference ``T_a`` and the shared-space metric per slice and control
  variable (paper section 4.2, Supplementary A.1).

The plotting, report, output and summary methods delegate to :mod:`.plots`, :mod:`.report`,
:mod:`.outputs` and :mod:`.summary` (imported lazily: matplotlib is slow to import).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .options import AuditOptions

__all__ = ["AuditResult", "SLICE_COLUMNS", "COMPARISON_COLUMNS", "CONTROLLED_COLUMNS", "COMPARISON_KINDS"]

#: Columns of :attr:`AuditResult.slices`, in order.
SLICE_COLUMNS: tuple[str, ...] = (
    "model",
    "slice",
    "attribute",
    "metric",
    "estimate",
    "ci_low",
    "ci_high",
    "band_low",
    "band_high",
    "n",
    "n_pos",
    "n_neg",
    "n_predicted_pos",
    "reported",
    "reason",
    "n_undefined",
)

#: Columns of :attr:`AuditResult.comparisons`, in order.
COMPARISON_COLUMNS: tuple[str, ...] = (
    "model",
    "metric",
    "slice",
    "reference",
    "kind",
    "difference",
    "ci_low",
    "ci_high",
    "p_value",
    "p_adjusted",
    "n_undefined",
    "reported",
    "reason",
)

#: Values of the ``kind`` column of :attr:`AuditResult.comparisons`.
COMPARISON_KINDS: tuple[str, ...] = ("vs_overall", "vs_rest", "pairwise", "vs_model")

#: Columns of :attr:`AuditResult.controlled`, in order.
CONTROLLED_COLUMNS: tuple[str, ...] = (
    "model",
    "attribute",
    "slice",
    "control",
    "metric",
    "subgroup",
    "subgroup_low",
    "subgroup_high",
    "M_a",
    "M_a_low",
    "M_a_high",
    "T_a",
    "T_a_low",
    "T_a_high",
    "shared_space",
    "shared_space_low",
    "shared_space_high",
    "n_undefined",
    "reported",
    "reason",
)


@dataclass(frozen=True)
class AuditResult:
    """Disaggregated and controlled evaluation of one table of predictions.

    Attributes
    ----------
    slices : pandas.DataFrame
        Columns :data:`SLICE_COLUMNS`; one row per (model, slice, metric). ``estimate`` is NaN when
        the minimum-size rules withhold it (``reported`` False, ``reason`` says which rule); the
        interval and the band are given in any case.
    comparisons : pandas.DataFrame
        Columns :data:`COMPARISON_COLUMNS`; ``kind`` is one of :data:`COMPARISON_KINDS`.
    controlled : pandas.DataFrame
        Columns :data:`CONTROLLED_COLUMNS`.
    options : AuditOptions
        The options actually used (seed included).
    notes : list of str
        Human-readable notes (metrics left out for hard predictions, rows dropped, levels left out
        of a controlled evaluation, ...).
    n_rows : int
        Rows audited (after any rows dropped for a missing attribute).
    """

    slices: pd.DataFrame
    comparisons: pd.DataFrame
    controlled: pd.DataFrame
    options: AuditOptions
    notes: list[str] = field(default_factory=list)
    n_rows: int = 0

    def plot(
        self,
        kind: str = "forest",
        *,
        metric: str | None = None,
        model: str | None = None,
        control: str | None = None,
        ax: Any = None,
    ):
        """A figure of the result (forest plot of the slices, or controlled differences).

        Delegates to :func:`disaggregated_eval.audit.plots.plot_result`.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from .plots import plot_result

        return plot_result(self, kind, metric=metric, model=model, control=control, ax=ax)

    def to_html(self, path: str | Path) -> Path:
        """Write a self-contained HTML report to ``path`` (:func:`.report.write_report`)."""
        from .report import write_report

        return write_report(self, path)

    def write(self, out_dir: str | Path, *, input_path: str | Path | None = None) -> Path:
        """Write the tables, figures and a manifest under ``out_dir`` (:func:`.outputs.write_outputs`)."""
        from .outputs import write_outputs

        return write_outputs(self, out_dir, input_path=input_path)

    def summary(self, metric: str | None = None) -> str:
        """A short human-readable table of the result (:func:`.summary.summary_text`)."""
        from .summary import summary_text

        return summary_text(self, metric=metric)
