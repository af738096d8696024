"""The result of an audit: tidy tables and the methods that show them.

:class:`AuditResult` holds tidy tables (one row per estimate) whose columns are fixed here, in
one place (``docs/audit.md`` documents them):

- ``slices`` (:data:`SLICE_COLUMNS`): every metric of every model on every slice, with its
  percentile interval, the simultaneous band over the slices of the metric, the slice's counts and
  whether the estimate is reported (the minimum-size rules);
- ``comparisons`` (:data:`COMPARISON_COLUMNS`): slice minus overall, slice minus the rest of the
  rows, pairs of slices of one attribute (or of one intersection), each model minus the first; with
  paired intervals, permutation p-values and adjusted p-values;
- ``controlled`` (:data:`CONTROLLED_COLUMNS`): the subgroup metric, the weighted population metric
  ``M_a``, the controlled difference ``T_a`` and the shared-space metric per slice and control
  variable (paper section 4.2, Supplementary A.1);
- the analyses after them (:data:`ANALYSIS_TABLES`): ``fairness`` (demographic parity, equalized odds,
  disparity ratios with the four-fifths rule), ``calibration`` and ``calibration_summary`` (per-slice
  calibration and expected calibration error), ``thresholds`` (rates across decision thresholds) and
  ``detectability`` (the smallest difference each slice can detect).

The plotting, report, output and summary methods delegate to :mod:`.plots`, :mod:`.report`,
:mod:`.outputs` and :mod:`.terminal` (imported lazily: matplotlib is slow to import). In a notebook an
``AuditResult`` shows itself as a compact HTML table of the headline metric per slice
(``_repr_html_``), in a terminal as a few lines (``repr``); :meth:`AuditResult.wide` pivots a table
to one row per slice without losing the withheld slices (pandas' ``pivot_table`` drops rows whose
values are all NaN, which is what a withheld slice's estimate is).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from .columns import (
    CALIBRATION_BIN_COLUMNS,
    CALIBRATION_SUMMARY_COLUMNS,
    DETECTABILITY_COLUMNS,
    FAIRNESS_COLUMNS,
    SELECTION_COLUMNS,
    THRESHOLD_COLUMNS,
    empty_table,
)
from .options import ResolvedOptions
from .text import html_text, terminal_text

__all__ = ["AuditResult"]

#: Columns of :attr:`AuditResult.slices` that name a row rather than hold a value.
_KEY_COLUMNS = ("model", "slice", "attribute", "metric", "control")
_HTML_STYLE = {
    "table": "border-collapse: collapse; font-size: 12px; margin: 0.3em 0 0.8em 0",
    "th": "padding: 2px 8px; border-bottom: 1px solid #999; text-align: left",
    "td": "padding: 1px 8px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap",
    "text": "padding: 1px 8px; border-bottom: 1px solid #eee; text-align: left",
}


@dataclass(frozen=True, repr=False)
class AuditResult:
    """Disaggregated and controlled evaluation of one table of predictions.

    Attributes
    ----------
    slices : pandas.DataFrame
        Columns :data:`SLICE_COLUMNS`; one row per (model, slice, metric). ``estimate`` is NaN when
        the minimum-size rules withhold it (``reported`` False, ``reason`` says which rule); the
        interval and ``raw_estimate`` (the slice's value all the same) are given in any case, the band
        only when reported. Like every per-slice table (:data:`.columns.LEVEL_TABLES`), it has one
        column per attribute right after ``slice``: the level the slice fixes, None where it fixes none
        (:func:`.columns.table_columns` gives the full list).
    comparisons : pandas.DataFrame
        Columns :data:`COMPARISON_COLUMNS`; ``kind`` is one of :data:`COMPARISON_KINDS`.
    controlled : pandas.DataFrame
        Columns :data:`CONTROLLED_COLUMNS`.
    options : ResolvedOptions
        The options actually used (seed included), as checked by :func:`.options.resolve_options`.
    notes : list of str
        Human-readable notes (metrics left out for hard predictions, rows dropped, levels left out
        of a controlled evaluation, ...).
    n_rows : int
        Rows audited (after any rows dropped for a missing attribute).
    fairness : pandas.DataFrame
        Columns :data:`FAIRNESS_COLUMNS`: demographic parity and equalized odds differences and
        ratios, the largest gap of the headline metric per family, and each slice's disparity ratios
        to a reference slice, with paired intervals (:mod:`.fairness`).
    calibration : pandas.DataFrame
        Columns :data:`CALIBRATION_BIN_COLUMNS`: per model, slice and quantile bin of the score, the
        mean predicted risk and the observed rate with its Wilson interval (:mod:`.calibration_table`).
    calibration_summary : pandas.DataFrame
        Columns :data:`CALIBRATION_SUMMARY_COLUMNS`: the expected calibration error and the
        observed/expected ratio per slice, and their differences from overall, with paired intervals.
    thresholds : pandas.DataFrame
        Columns :data:`THRESHOLD_COLUMNS`: selection rate, true and false positive rates per slice at
        each threshold of the option ``thresholds`` (empty without it; :mod:`.thresholds`).
    detectability : pandas.DataFrame
        Columns :data:`DETECTABILITY_COLUMNS`: per slice and metric, the minimum detectable difference
        from overall and the rows needed to detect ``detect_gap`` (:mod:`.detectability`).
    selection : pandas.DataFrame
        Columns :data:`SELECTION_COLUMNS`: with ``population_margins`` and/or ``selection_sensitivity``, per
        model, slice and metric the margin-corrected estimate, its sensitivity bounds per Gamma with their
        intervals and the breakdown Gamma of each flagged difference from overall (:mod:`.selection_table`).
    """

    slices: pd.DataFrame
    comparisons: pd.DataFrame
    controlled: pd.DataFrame
    options: ResolvedOptions
    notes: list[str] = field(default_factory=list)
    n_rows: int = 0
    fairness: pd.DataFrame = field(default_factory=lambda: empty_table(FAIRNESS_COLUMNS))
    calibration: pd.DataFrame = field(default_factory=lambda: empty_table(CALIBRATION_BIN_COLUMNS))
    calibration_summary: pd.DataFrame = field(default_factory=lambda: empty_table(CALIBRATION_SUMMARY_COLUMNS))
    thresholds: pd.DataFrame = field(default_factory=lambda: empty_table(THRESHOLD_COLUMNS))
    detectability: pd.DataFrame = field(default_factory=lambda: empty_table(DETECTABILITY_COLUMNS))
    selection: pd.DataFrame = field(default_factory=lambda: empty_table(SELECTION_COLUMNS))

    def plot(
        self,
        kind: str = "forest",
        *,
        metric: str | None = None,
        model: str | None = None,
        control: str | None = None,
        ax: Any = None,
        family: str | None = None,
    ):
        """A figure of the result: ``kind`` ``"forest"`` (the slices of a metric), ``"controlled"`` (``T_a``),
        ``"calibration"`` or ``"thresholds"`` (the slices of one ``family``, e.g. ``"race"``).

        Delegates to :func:`disaggregated_eval.audit.plots.plot_result`.

        Returns
        -------
        matplotlib.figure.Figure
        """
        from .plots import plot_result

        return plot_result(self, kind, metric=metric, model=model, control=control, ax=ax, family=family)

    def to_html(self, path: str | Path) -> Path:
        """Write a self-contained HTML report to ``path`` (:func:`.report.write_report`)."""
        from .report import write_report

        return write_report(self, path)

    def write(self, out_dir: str | Path, *, input_path: str | Path | None = None) -> Path:
        """Write the tables, figures and a manifest under ``out_dir`` (:func:`.outputs.write_outputs`)."""
        from .outputs import write_outputs

        return write_outputs(self, out_dir, input_path=input_path)

    def summary(self, metric: str | None = None, width: int | None = None) -> str:
        """A short human-readable table of the result (:func:`.terminal.summary_text`), no line longer than
        ``width`` (default: the terminal's width, else 100)."""
        from .terminal import summary_text

        return summary_text(self, metric=metric, width=width)

    # ------------------------------------------------------------------------------------------
    # display and reshaping
    # ------------------------------------------------------------------------------------------
    def _overview(self) -> list[str]:
        options = self.options
        n_slices = self.slices["slice"].nunique()
        models = list(options.scores) or list(pd.unique(self.slices["model"]))
        metrics = list(pd.unique(self.slices["metric"]))
        controls = list(pd.unique(self.controlled["control"])) if len(self.controlled) else []
        first = (
            f"{self.n_rows:,} rows; {len(models)} model{'s' if len(models) != 1 else ''} ({', '.join(models)}); "
            f"{n_slices} slices of {' x '.join(options.groups)}; {len(metrics)} metric{'s' if len(metrics) != 1 else ''}"
            + (f"; controls {', '.join(controls)}" if controls else "")
        )
        second = (
            f"tables: slices {len(self.slices):,} rows, comparisons {len(self.comparisons):,} rows, "
            f"controlled {len(self.controlled):,} rows; {len(self.notes)} note{'s' if len(self.notes) != 1 else ''}"
        )
        return [first, second]

    def __repr__(self) -> str:
        """A few lines: rows, models, slices, metrics, controls, table sizes, and where to look next."""
        from .terminal import weight_note

        lines = self._overview()
        weighted = weight_note(sample_weight=self.options.sample_weight,
                               frequency_weight=self.options.frequency_weight)  # fmt: skip
        if weighted:
            lines.append(weighted)
        lines.append(
            "print(result.summary()) for the summary; result.slices, .comparisons, .controlled are tidy frames"
        )
        return "<AuditResult: " + "\n ".join(terminal_text(line) for line in lines) + ">"  # names from the data

    def _repr_html_(self) -> str:
        """Jupyter's display: the headline metric per slice and model, with intervals and flags.

        Self-contained HTML (inline styles, no script, no external assets). Withheld slices show
        ``withheld`` instead of an estimate, in grey, with their interval and the reason.
        """
        from .. import vocabulary
        from .decisions import headline_metric
        from .terminal import format_estimate, format_interval, slice_flags, weight_note

        options = self.options
        alpha = 1.0 - float(options.confidence)
        weighted = weight_note(sample_weight=options.sample_weight, frequency_weight=options.frequency_weight)
        esc = html_text
        parts = [
            '<div class="disagg-eval-audit" style="font-family: -apple-system, Helvetica, Arial, sans-serif">',
            f"<p style='margin: 0.2em 0'><b>AuditResult</b>: {esc(self._overview()[0])}.<br>"
            f"{options.n_resamples:,} bootstrap resamples, {float(options.confidence):.0%} intervals, seed "
            f"{options.seed}" + (f"; <b>{esc(weighted)}</b>" if weighted else "") + ".</p>",
        ]
        for model in list(options.scores) or list(pd.unique(self.slices["model"])):
            metric = headline_metric(self.slices, options.metrics, model)
            if metric is None:
                continue
            rows = self.slices[(self.slices["model"] == model) & (self.slices["metric"] == metric)]
            flags = slice_flags(self.slices, self.comparisons, model=model, metric=metric, alpha=alpha)
            label = vocabulary.METRIC_LABELS.get(metric, metric)
            head = "".join(
                f'<th style="{_HTML_STYLE["th"]}">{esc(h)}</th>'
                for h in ("slice", "n", "estimate", f"{float(options.confidence):.0%} interval", "verdict")
            )
            body = []
            for row, flag in zip(rows.itertuples(index=False), flags, strict=True):
                withheld = not bool(row.reported)
                estimate = "withheld" if withheld else format_estimate(float(row.estimate))
                colour = ' style="color: #888"' if withheld else ""
                body.append(
                    f"<tr{colour}>"
                    f'<td style="{_HTML_STYLE["text"]}">{esc(str(row.slice))}</td>'
                    f'<td style="{_HTML_STYLE["td"]}">{int(row.n):,}</td>'
                    f'<td style="{_HTML_STYLE["td"]}">{esc(estimate)}</td>'
                    f'<td style="{_HTML_STYLE["td"]}">{esc(format_interval(float(row.ci_low), float(row.ci_high)))}</td>'
                    f'<td style="{_HTML_STYLE["text"]}">{esc(flag)}</td></tr>'
                )
            parts.append(f"<p style='margin: 0.6em 0 0 0'><b>{esc(label)}</b> of <b>{esc(str(model))}</b> by slice "
                         f"(verdict: difference from overall at adjusted p &lt; {alpha:g}, or within the tolerance; "
                         "both kinds adjusted together)</p>")  # fmt: skip
            parts.append(f'<table style="{_HTML_STYLE["table"]}"><thead><tr>{head}</tr></thead>'
                         f"<tbody>{''.join(body)}</tbody></table>")  # fmt: skip
            parts.append(self._fairness_html(model))
        if self.notes:
            parts.append("<p style='margin: 0.2em 0; color: #7a4b00'>" + "<br>".join(
                f"note: {esc(n)}" for n in self.notes) + "</p>")  # fmt: skip
        parts.append(
            "<p style='margin: 0.2em 0; color: #555'>Every metric: <code>result.slices</code>, "
            "<code>result.comparisons</code>, <code>result.controlled</code> (tidy frames); "
            "<code>result.wide(metric)</code> pivots one metric without dropping withheld slices; "
            '<code>print(result.summary())</code>; <code>result.plot("forest", metric=...)</code>.</p></div>'
        )
        return "\n".join(parts)

    def _fairness_html(self, model: str) -> str:
        """The fairness summary's family statistics of ``model`` as a compact table (for ``_repr_html_``)."""
        from .. import vocabulary
        from .terminal import format_estimate, format_interval

        esc = html_text
        table = self.fairness
        rows = (
            table[(table["model"] == model) & table["statistic"].isin(vocabulary.FAMILY_STATISTICS)]
            if len(table)
            else table
        )
        if rows.empty:
            return ""
        head = "".join(f'<th style="{_HTML_STYLE["th"]}">{esc(h)}</th>'
                       for h in ("family", "statistic", "estimate", "interval", "verdict"))  # fmt: skip
        body = []
        for r in rows.itertuples(index=False):
            label = vocabulary.FAIRNESS_LABELS.get(str(r.statistic), str(r.statistic))
            estimate = format_estimate(float(r.estimate)) if bool(r.reported) else "withheld"
            body.append(
                f'<tr><td style="{_HTML_STYLE["text"]}">{esc(str(r.attribute))}</td>'
                f'<td style="{_HTML_STYLE["text"]}">{esc(label)}</td>'
                f'<td style="{_HTML_STYLE["td"]}">{esc(estimate)}</td>'
                f'<td style="{_HTML_STYLE["td"]}">{esc(format_interval(float(r.ci_low), float(r.ci_high)))}</td>'
                f'<td style="{_HTML_STYLE["text"]}">{esc(str(r.verdict) if bool(r.reported) else str(r.reason))}</td></tr>'
            )
        return (f"<p style='margin: 0.6em 0 0 0'>Fairness summary of <b>{esc(str(model))}</b> (verdicts simultaneous "
                "over the summary; <code>result.fairness</code> has the disparity ratios)</p>"
                f'<table style="{_HTML_STYLE["table"]}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
                "</table>")  # fmt: skip

    def wide(
        self,
        metric: str | None = None,
        *,
        values: str | Sequence[str] | None = None,
        table: str = "slices",
        model: str | None = None,
    ) -> pd.DataFrame:
        """One metric as a wide frame: a row per slice, a column per model (or per control).

        Unlike ``pandas.DataFrame.pivot_table``, which by default drops the rows whose values are
        all NaN (``dropna=True``: every withheld slice, whose ``estimate`` is NaN), every slice is
        kept, in the order of the tidy table, with NaN where it has no value.

        Parameters
        ----------
        metric : str, optional
            Metric name; default the summary's headline metric
            (:func:`disaggregated_eval.audit.decisions.headline_metric`).
        values : str or sequence of str, optional
            Column(s) of the table to spread: ``estimate`` (the default), ``ci_low``, ``reported``,
            ``n``, ... for ``slices``; ``T_a`` (the default), ``T_a_low``, ``M_a``, ... for
            ``controlled``. Several give columns ``(value, model)`` (or ``(value, control)``).
        table : {"slices", "controlled"}
            ``slices``: columns are the models. ``controlled``: columns are the controls of one model
            (``model``, default the first); slices left out of a control's weighted evaluation are NaN.
        model : str, optional
            Only with ``table="controlled"``.

        Returns
        -------
        pandas.DataFrame
            Index ``slice`` (every slice of the table), columns named ``model`` or ``control``.

        Raises
        ------
        ValueError
            For an unknown table, metric, value column or model.
        """
        from .decisions import headline_metric

        if table not in ("slices", "controlled"):
            raise ValueError(f"table must be 'slices' or 'controlled'; got {table!r}")
        frame = getattr(self, table)
        if values is None:
            values = "estimate" if table == "slices" else "T_a"
        metric = headline_metric(self.slices, self.options.metrics) if metric is None else metric
        metrics = list(pd.unique(frame["metric"]))
        if metric not in metrics:
            raise ValueError(f"metric must be one of {metrics} (the {table} table); got {metric!r}")
        names = [values] if isinstance(values, str) else list(values)
        bad = [v for v in names if v not in frame.columns or v in _KEY_COLUMNS]
        if bad or not names:
            allowed = [c for c in frame.columns if c not in _KEY_COLUMNS]
            raise ValueError(f"values must be columns of the {table} table among {allowed}; got {bad or names}")
        rows = frame[frame["metric"] == metric]
        models = list(pd.unique(frame["model"]))
        if table == "slices":
            if model is not None:
                raise ValueError("model is only used with table='controlled' (the slices table has a column per model)")
            columns, order = "model", models
        else:
            model = models[0] if model is None else model
            if model not in models:
                raise ValueError(f"model must be one of {models}; got {model!r}")
            rows = rows[rows["model"] == model]
            columns, order = "control", list(pd.unique(frame["control"]))
        slices = [s for s in pd.unique(self.slices["slice"]) if s in set(frame["slice"])]
        # DataFrame.pivot keeps NaN cells (no aggregation); reindex restores the table's order.
        out = rows.pivot(index="slice", columns=columns, values=values)
        if isinstance(values, str):
            out = out.reindex(index=slices, columns=order)
        else:
            out = out.reindex(index=slices, columns=pd.MultiIndex.from_product([names, order]))
            out.columns.names = [None, columns]
        out.index.name = "slice"
        if isinstance(values, str):
            out.columns.name = columns
        return out
