"""``report.html``: one self-contained page with the figures and summary tables of an audit.

The first screen answers the auditor's questions: a line on the run (rows, models, attributes,
weights), the fairness summary of each model (demographic parity and equalized odds per family of
slices, the largest gap of the headline metric, four-fifths marks) and the headline metric's slices:
which differ from overall, in which direction, by how much (the difference and its interval), with
which adjusted p-value, and the minimum detectable difference of every slice, so that a slice without
a flag reads as "no flag at this size". Everything else (disparity ratios, calibration, thresholds,
figures, the terminal summary, options) follows in collapsible ``<details>`` blocks. The long tables (every
slice, comparison and controlled difference, every calibration bin and threshold) are not in the page: it
links to their CSV files next to it (``manifest["files"]``; a page written alone by
:func:`write_report` names them) and shows what they count (flagged comparisons, ``T_a`` intervals that
exclude 0, per metric) and the minimum detectable differences as a row per slice.

The page fits a 1024 px wide window: every table is in a box of its own (``<div class="scroll">``) that
scrolls sideways when the table is wider than the page's column, headers wrap, and the fairness
summary's verdicts sit under their estimates.

The page needs nothing but itself: styles are inline, figures are SVG images embedded as base64
``data:`` URIs (the output folder also has them as PNG and SVG files), and there is no font, script or style sheet from the network (it reads the same
offline). Every figure is a ``<figure data-figure="NAME">``, every table a
``<table data-table="KIND" data-key="...">`` so that tests (and readers' own tools) can find them.
A short inline script only counts the figures that decoded (``<body data-images-ok="k/n">``).
"""

from __future__ import annotations

import base64
import math
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from .. import verdicts, vocabulary
from ..weight_diagnostics import POOR_BALANCE_SMD, poor_balance
from .columns import COMPARISON_KINDS, SELECTION_COLUMNS
from .decisions import flagged_rows, headline_metric
from .figure_rendering import render_figures
from .terminal import flags_family_line, format_estimate, format_interval, format_mdd, weight_note
from .text import html_text

__all__ = ["render_html", "write_report"]

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.25em; margin-top: 1.8em;
     border-bottom: 1px solid #ddd; padding-bottom: 0.2em; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0; }
div.scroll { overflow-x: auto; max-width: 100%; margin: 0.5em 0 1em 0; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; white-space: normal; vertical-align: bottom; }
.meta td { white-space: normal; overflow-wrap: anywhere; }
td.text, th.text { text-align: left; }
tr.withheld td { color: #888; } tr.flagged td { background: #fff4e0; }
figure { margin: 1em 0 2em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; margin-top: 0.3em; }
pre { background: #f8f8f8; padding: 0.8em; overflow-x: auto; font-size: 0.8em; }
details { margin: 0.4em 0; } summary { cursor: pointer; font-weight: 600; }
.meta td, .meta th { text-align: left; } .note { color: #7a4b00; }
nav a { margin-right: 1em; }
.run { color: #444; margin: 0.2em 0 0.6em 0; } .ci { color: #666; font-size: 0.92em; }
td.fail { background: #fde2dd; } td.fail-clear { background: #f7b9ad; font-weight: 600; }
td.pass { background: #e3f1e6; } span.verdict { font-size: 85%; color: #444; display: block; }
tr.worse td { background: #fde2dd; } tr.better td { background: #e3f1e6; } tr.differs td { background: #fff4e0; }
tr.within td { background: #eef6fb; }
.legend { font-size: 0.8em; color: #555; margin: -0.6em 0 0.8em 0; }
h2.first { margin-top: 0.8em; }
"""

_IMAGE_CHECK = """
window.addEventListener("load", function () {
  var imgs = document.querySelectorAll("figure img");
  var ok = 0;
  imgs.forEach(function (img) { if (img.complete && img.naturalWidth > 0) { ok += 1; } });
  document.body.setAttribute("data-images-ok", ok + "/" + imgs.length);
});
"""

_READING_GUIDE = """
<p>Each <b>slice</b> is a level of one attribute or an intersection of several. For every slice and
metric the tables give the estimate and its percentile bootstrap interval (paired resamples: every
slice, metric and model is computed on the same resamples). A slice with fewer rows than the minimum
group size, or whose metric has too small a denominator (positives for sensitivity, negatives for
specificity and the false positive rate, predicted positives for precision), is <b>withheld</b>: its
interval is shown, its point estimate is not, and the reason says why. Wide intervals mean the data
cannot tell; an interval that contains the overall value is no evidence of a gap.</p>
<p><b>Comparisons</b> give each slice's difference from the overall value, from the rest of the
population and, within one attribute, between pairs of slices, with intervals and permutation-test
p-values (for large comparisons of continuous scores, the large-sample z-test: column <i>test</i>) adjusted
for multiple comparisons within the families the line at the top names (by default each model, metric and
kind of comparison; <code>adjust_scope</code> audit: the whole audit).</p>
<p><b>Controlled differences</b> <i>T<sub>a</sub> = E[m | A = a] &minus; M<sub>a</sub></i> (Pfohl et al.
2025, section 4.2) compare a slice with the whole population re-weighted to the slice's distribution
of a control variable <i>V</i>: <i>V = Y</i> asks whether the gap remains among people with the same
outcome (separation: error rates), <i>V = R</i> among people with the same score (sufficiency:
calibration), <i>V = X</i> among people with the same features. A <i>T<sub>a</sub></i> whose interval
excludes 0 is evidence against {R, Y} &#8869; A | V; it is not, by itself, evidence of unfairness.</p>
"""


# ----------------------------------------------------------------------------------------------
# tables
# ----------------------------------------------------------------------------------------------
_TEXT_COLUMNS = {"model", "slice", "attribute", "metric", "reason", "reference", "kind", "control"}


def _cell(value: Any, column: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (bool,)) or column == "reported":
        return "yes" if bool(value) else "no"
    if column in ("p_value", "p_adjusted"):
        return "&lt; 0.001" if float(value) < 0.001 else f"{float(value):.3f}"
    if isinstance(value, float):
        return f"{value:.4f}"
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
        if isinstance(value, float):
            return f"{value:.4f}"
    return html_text(str(value))


def _html_table(frame: pd.DataFrame, *, kind: str, key: str, row_class=None) -> str:
    columns = list(frame.columns)
    head = "".join(f'<th class="{"text" if c in _TEXT_COLUMNS else "num"}">{html_text(c)}</th>' for c in columns)
    body = []
    for record in frame.to_dict("records"):
        cls = row_class(record) if row_class else ""
        cells = "".join(
            f'<td class="{"text" if c in _TEXT_COLUMNS else "num"}">{_cell(record[c], c)}</td>' for c in columns
        )
        body.append(f'<tr class="{cls}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    return _scroll(
        f'<table data-table="{html_text(kind)}" data-key="{html_text(key)}" data-rows="{len(frame)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _scroll(table: str) -> str:
    """A table in its own box that scrolls sideways when wider than the page's column; the page never does."""
    return f'<div class="scroll">{table}</div>'


def _metric_title(metric: str) -> str:
    return html_text(vocabulary.METRIC_LABELS.get(metric, metric))


def _csv(name: str, rows: int, files: Collection[str]) -> str:
    """The table ``name``: a link to its CSV file next to the page, or, for a page on its own, where to find it."""
    file = f"{name}.csv"
    if file in files:
        return f'<a href="{file}" data-csv="{name}">{file}</a> ({rows:,} rows; also <code>{name}.parquet</code>)'
    return (f"<code>{file}</code> ({rows:,} rows; <code>AuditResult.{name}</code>, written with the tables by "
            "<code>AuditResult.write</code>)")  # fmt: skip


def _model_column(frame: pd.DataFrame, result: Any) -> pd.DataFrame:
    """``frame`` without its column ``model`` when the audit has one model."""
    return frame.drop(columns="model") if len(result.options.scores) == 1 else frame


def _slices_section(result: Any, files: Collection[str]) -> str:
    table = result.slices
    return "\n".join([
        '<h2 id="slices">Slices</h2>',
        f"<p>Every slice's estimate and interval of every metric: {_csv('slices', len(table), files)}; the forest plots "
        "draw them, the headline metric's are in the table at the top.</p>",
    ])  # fmt: skip


def _comparisons_section(result: Any, files: Collection[str]) -> str:
    """How many comparisons of each kind are flagged, per metric; every row in ``comparisons.csv``."""
    table = result.comparisons
    alpha = 1.0 - float(result.options.confidence)
    parts = ['<h2 id="comparisons">Comparisons</h2>',
             f"<p>Each slice against overall, against the rest and against the other levels of its attribute, with "
             f"intervals and adjusted p-values: {_csv('comparisons', len(table), files)}. Below, how many are "
             f"flagged (adjusted p-value below {alpha:g}; without tests, an interval that excludes 0) of each "
             "kind.</p>"]  # fmt: skip
    if table.empty:
        parts.append("<p>No comparisons.</p>")
        return "\n".join(parts)
    counted = table.assign(_flag=flagged_rows(table, alpha))
    kinds = [k for k in COMPARISON_KINDS if k in set(counted["kind"])]
    records = []
    for model in _ordered(counted["model"], result.options.scores):
        own = counted[counted["model"] == model]
        for metric in _ordered(own["metric"], result.options.metrics):
            rows = own[own["metric"] == metric]
            record = {"model": model, "metric": metric}
            for kind in kinds:
                flags = rows.loc[rows["kind"] == kind, "_flag"]
                record[kind] = f"{int(flags.sum()):,} of {len(flags):,}" if len(flags) else ""
            records.append(record)
    frame = _model_column(pd.DataFrame.from_records(records), result)
    parts.append(_html_table(frame, kind="comparison-counts", key="all"))
    return "\n".join(parts)


def _controlled_section(result: Any, files: Collection[str]) -> str:
    """Per metric and control, on how many slices T_a's interval excludes 0; every row in ``controlled.csv``."""
    table = result.controlled
    parts = ['<h2 id="controlled-tables">Controlled evaluation</h2>',
             "<p>Subgroup metric, weighted population metric M<sub>a</sub>, controlled difference T<sub>a</sub> and "
             f"the shared-space metric with their intervals: {_csv('controlled', len(table), files)}. Below, on how "
             "many reported slices the interval of T<sub>a</sub> excludes 0, and how many of them have poor balance "
             f"(|<code>balance_smd</code>| above {POOR_BALANCE_SMD:g}: the re-weighted population does not match the "
             "slice's distribution of V, so T<sub>a</sub> may carry the weight model's error).</p>"]  # fmt: skip
    if table.empty:
        parts.append("<p>No controlled evaluation.</p>")
        return "\n".join(parts)
    controls = _ordered(table["control"], result.options.controls)
    records = []
    for model in _ordered(table["model"], result.options.scores):
        own = table[(table["model"] == model) & table["reported"].astype(bool)]
        for metric in _ordered(table["metric"], result.options.metrics):
            record = {"model": model, "metric": metric}
            for control in controls:
                rows = own[(own["metric"] == metric) & (own["control"] == control)]
                excludes = (rows["T_a_low"] > 0) | (rows["T_a_high"] < 0)
                poor = int(sum(poor_balance(v) for v in rows.loc[excludes, "balance_smd"]))
                text = f"{int(excludes.sum()):,} of {len(rows):,}" + (f" ({poor:,} poor balance)" if poor else "")
                record["none" if control == "none" else f"V = {control}"] = text if len(rows) else ""
            records.append(record)
    frame = _model_column(pd.DataFrame.from_records(records), result)
    parts.append(_html_table(frame, kind="controlled-counts", key="all"))
    return "\n".join(parts)


def _withheld_class(record: Mapping[str, Any]) -> str:
    return "" if bool(record["reported"]) else "withheld"


def _ordered(values: pd.Series, preferred: Sequence[str]) -> list[str]:
    present = list(pd.unique(values))
    return [v for v in preferred if v in present] + [v for v in present if v not in preferred]


def _figure_html(name: str, spec: Mapping[str, Any], images: Mapping[str, bytes]) -> str:
    fmt, mime = ("svg", "image/svg+xml") if "svg" in images else ("png", "image/png")
    data = base64.b64encode(images[fmt]).decode("ascii")
    title = html_text(spec.get("title", name))
    # Shown at 140 px per figure inch (about 1.5 times the figure's print size), never wider than the page.
    size = f' style="width: {140 * spec["width_in"]:.0f}px"' if spec.get("width_in") else ""
    return (
        f'<figure data-figure="{html_text(name)}" id="figure-{html_text(name)}">'
        f'<img src="data:{mime};base64,{data}" alt="{title}"{size}>'
        f"<figcaption>{title} (<code>figures/{html_text(name)}.png</code>, <code>.svg</code>)"
        "</figcaption></figure>"
    )


def _meta_table(result: Any, manifest: Mapping[str, Any] | None, input_path: Any) -> str:
    options = result.options
    rows = []
    source = (manifest or {}).get("input") or {}  # None when the audit was written without its input file
    if input_path is not None or source.get("path"):
        rows.append(("input file", html_text(str(source.get("path", input_path)))))
    if source.get("sha256"):
        rows.append(("input SHA-256", f"<code>{source['sha256']}</code>"))
    rows.append(("rows audited", f"{result.n_rows:,}"))
    rows.append(("label", html_text(options.label)))
    rows.append(("models (score columns)", html_text(", ".join(options.scores))))
    rows.append(("attributes", html_text(", ".join(options.groups))))
    weighted = weight_note(sample_weight=options.sample_weight, frequency_weight=options.frequency_weight)
    rows.append(("row weights", f"<b>{html_text(weighted)}</b>" if weighted else "none (every row counts once)"))
    from .selection_table import margins_line  # as the report's selection section imports it

    margined = margins_line(options)
    if margined:
        rows.append(("population margins", f"<b>{html_text(margined)}</b>"))
    rows.append(("seed", str(options.seed)))
    body = "".join(f'<tr><th class="text">{k}</th><td class="text">{v}</td></tr>' for k, v in rows)
    return _scroll(f'<table class="meta" data-table="run" data-key="run">{body}</table>')


def _options_table(result: Any) -> str:
    values = result.options.record()
    body = "".join(
        f'<tr><th class="text">{html_text(k)}</th><td class="text">{html_text(_option_text(v))}</td></tr>'
        for k, v in values.items()
    )
    return _scroll(f'<table class="meta" data-table="options" data-key="options">{body}</table>')


def _option_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) if value else "(none)"
    return "(not set)" if value is None else str(value)


def _versions_table(manifest: Mapping[str, Any] | None) -> str:
    versions = (manifest or {}).get("versions", {})
    if not versions:
        return ""
    body = "".join(
        f'<tr><th class="text">{html_text(k)}</th><td class="text">{html_text(str(v))}</td></tr>'
        for k, v in versions.items()
    )
    return "<h3>Package versions</h3>" + _scroll(
        f'<table class="meta" data-table="versions" data-key="versions">{body}</table>'
    )


def _with_ci(estimate: float, low: float, high: float, *, signed: bool = False) -> str:
    return (f"{format_estimate(estimate, signed=signed)} "
            f'<span class="ci">{format_interval(low, high, signed=signed)}</span>')  # fmt: skip


def _run_line(result: Any, input_path: Any) -> str:
    """One line on the run: rows, models, attributes, intervals, seed, and the weights in bold."""
    options = result.options
    name = html_text(Path(input_path).name) + ": " if input_path is not None else ""
    models = ", ".join(options.scores)
    weighted = weight_note(sample_weight=options.sample_weight, frequency_weight=options.frequency_weight)
    text = (f"{name}{result.n_rows:,} rows; model{'s' if len(options.scores) != 1 else ''} {html_text(models)}; "
            f"slices of {html_text(' x '.join(options.groups))}; {float(options.confidence):.0%} intervals, "
            f"{options.n_resamples:,} paired bootstrap resamples, seed {options.seed}")  # fmt: skip
    if weighted:
        text += f"; <b>{html_text(weighted)}</b>"
    from .selection_table import margins_line

    margined = margins_line(options)
    if margined:
        text += f"; <b>{html_text(margined)}</b>"
    flags = flags_family_line(getattr(result, "comparisons", None), adjust=options.adjust,
                              adjust_scope=options.adjust_scope, alpha=1.0 - float(options.confidence))  # fmt: skip
    # one paragraph: the flags' family is part of the run's line (the first screen keeps its height)
    return f'<p class="run" data-run="line">{text}. <span data-run="flags">{html_text(flags)}.</span></p>'


#: The fairness summary's columns: its statistics over a family of slices, with their display names.
_OVERVIEW_COLUMNS = tuple((name, vocabulary.FAIRNESS_LABELS[name]) for name in vocabulary.FAMILY_STATISTICS)


#: Cell class of each verdict of the fairness summary (dark: beyond the tolerance; light: a difference;
#: green: within the tolerance).
_VERDICT_CLASS = {
    verdicts.BEYOND: "fail-clear",
    verdicts.DIFFERS: "fail",
    verdicts.DIFFERS_WITHIN: "pass",
    verdicts.WITHIN: "pass",
}


def _verdict_class(record: Mapping[str, Any]) -> str:
    return _VERDICT_CLASS.get(str(record.get("verdict", "")), "") if record["reported"] else ""


def _fairness_section(result: Any) -> str:
    """The fairness summary: per model a row per family of slices (docs/audit.md, "Fairness summary")."""
    table = getattr(result, "fairness", None)
    if table is None or table.empty:
        return ""
    tolerance = result.options.parsed_tolerance
    low, high = tolerance.ratio or vocabulary.FOUR_FIFTHS_BAND
    parts = ['<h2 id="fairness" class="first">Fairness summary</h2>']
    for model in _ordered(table["model"], result.options.scores):
        rows = table[(table["model"] == model) & table["statistic"].isin(vocabulary.FAMILY_STATISTICS)]
        gap_metric = rows.loc[rows["statistic"] == "largest_gap", "metric"]
        titles = dict(_OVERVIEW_COLUMNS)
        if len(gap_metric):
            titles["largest_gap"] = (
                f"Largest gap, {vocabulary.METRIC_LABELS.get(gap_metric.iloc[0], gap_metric.iloc[0])}"
            )
        present = [k for k, _ in _OVERVIEW_COLUMNS if k in set(rows["statistic"])]
        head = '<th class="text">family</th>' + "".join(f"<th>{html_text(titles[k])}</th>" for k in present)
        body = []
        for family, group in rows.groupby("attribute", sort=False):
            cells = [f'<td class="text">{html_text(str(family))}</td>']
            indexed = {r["statistic"]: r for r in group.to_dict("records")}
            for k in present:
                r = indexed.get(k)
                if r is None:
                    cells.append("<td></td>")
                    continue
                estimate = r["estimate"] if r["reported"] else float("nan")
                tip = (f"{r['slice']} (highest) vs {r['reference']} (lowest); {r['members']} reported slices; "
                       f"bias-corrected {format_estimate(r['bias_corrected'])}; simultaneous "
                       f"{format_interval(r['band_low'], r['band_high'])}"
                       if r["slice"] else str(r["reason"]))  # fmt: skip
                tip += f"; every slice, withheld ones too (fairlearn): {format_estimate(r.get('raw_estimate', float('nan')))}"
                cls = _verdict_class(r)
                word = html_text(str(r["verdict"])) if r["reported"] else ""
                cells.append(f'<td class="{cls}" title="{html_text(tip)}">'
                             f"{_with_ci(estimate, r['ci_low'], r['ci_high'])}"
                             f' <span class="verdict">{word}</span></td>')  # fmt: skip
            body.append(f"<tr>{''.join(cells)}</tr>")
        parts.append(f"<h3>{html_text(str(model))}</h3>" if len(result.options.scores) > 1 else "")
        parts.append(_scroll(f'<table data-table="fairness" data-key="{html_text(str(model))}" data-rows="{len(body)}">'
                             f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"))  # fmt: skip
    level = float(result.options.confidence)
    parts.append(
        f'<p class="legend" data-legend="fairness">{level:.0%} intervals; the verdicts (tolerance '
        f"{html_text(tolerance.text())}) hold together over the whole summary. Dark: beyond tolerance (a ratio outside "
        f"[{low:g}, {high:g}]: the four-fifths rule fails); shaded: the slices differ; green: within tolerance; "
        'plain: inconclusive. Hover a cell for the slices it compares; more in <a href="#reading">How to read this '
        "report</a>. fairlearn counts every slice, withheld ones too: its numbers are the column "
        "<code>raw_estimate</code> of <code>fairness.csv</code> (and of the cell's hover text).</p>"
    )
    return "\n".join(p for p in parts if p)


def _fairness_guide(result: Any) -> str:
    """What the fairness summary's statistics, intervals and verdicts mean (the legend's long form)."""
    table = getattr(result, "fairness", None)
    if table is None or table.empty:
        return ""
    tolerance = result.options.parsed_tolerance
    low, high = tolerance.ratio or vocabulary.FOUR_FIFTHS_BAND
    level = float(result.options.confidence)
    return (
        f"<p>The <b>fairness summary</b> is over each family's reported slices, with {level:.0%} intervals that hold "
        "when the slices are equal too (intersection bounds from score intervals of every pair of slices). "
        "Demographic parity: the selection rate's largest minus smallest value and smallest over largest (fairlearn); "
        "equalized odds: the larger of the true and false positive rates' gaps, the smaller of their ratios. A "
        "largest gap is biased away from equality for small slices (it picks the extremes; hover a cell for its "
        f"bias-corrected estimate and the slices). Verdicts (tolerance: {html_text(tolerance.text())}) come from "
        "intervals simultaneous over every statistic of the summary, so that the probability of any wrong verdict "
        f"is at most {1 - level:.0%}: <i>differs</i> (shaded) the slices are not all equal; <i>beyond tolerance</i> "
        f"(dark) the whole interval is outside the tolerance (for a ratio: outside [{low:g}, {high:g}], the "
        "four-fifths rule fails and the data can tell); <i>within tolerance</i> (green) every difference is inside "
        "it; <i>inconclusive</i> neither.</p>"
    )


def _verdict(difference: float, flagged: bool, metric: str, within: str = "") -> tuple[str, str]:
    """(text, row class) of a slice's difference from overall (``within``: the certification's text)."""
    if not flagged:
        return (within, "within") if within else ("inconclusive", "")
    direction = "above" if difference > 0 else "below"
    better = vocabulary.METRIC_HIGHER_IS_BETTER.get(metric)
    if better is None:
        return f"{direction} overall", "differs"
    worse = (difference < 0) if better else (difference > 0)
    text = f"{'worse' if worse else 'better'} ({direction} overall)"
    return (f"{text}, {within}" if within else text), "worse" if worse else "better"


def _headline_section(result: Any) -> str:
    """The headline metric's slices: what differs from overall, by how much, and what the size can detect."""
    options = result.options
    alpha = 1.0 - float(options.confidence)
    detect = getattr(result, "detectability", None)
    parts = []
    for model in list(options.scores):
        metric = headline_metric(result.slices, result.options.metrics, model)
        if metric is None:
            continue
        rows = result.slices[(result.slices["model"] == model) & (result.slices["metric"] == metric)]
        rows = rows[rows["slice"] != vocabulary.OVERALL]
        comps = result.comparisons
        comps = comps[(comps["model"] == model) & (comps["metric"] == metric) & (comps["kind"] == "vs_overall")]
        flags = flagged_rows(comps, alpha) if len(comps) else pd.Series(dtype=bool)
        comps = comps.assign(_flag=flags).set_index("slice")
        mdd = {}
        if detect is not None and len(detect):
            d = detect[(detect["model"] == model) & (detect["metric"] == metric)]
            mdd = {r.slice: format_mdd(float(r.mdd_above), float(r.mdd_below)) for r in d.itertuples(index=False)}
        overall = result.slices[(result.slices["model"] == model) & (result.slices["metric"] == metric)
                                & (result.slices["slice"] == vocabulary.OVERALL)]  # fmt: skip
        label = vocabulary.METRIC_LABELS.get(metric, metric)
        records, withheld = [], []
        for r in rows.to_dict("records"):
            if not r["reported"]:
                withheld.append(f"{html_text(str(r['slice']))} ({html_text(str(r['reason']))})")
                continue
            c = comps.loc[r["slice"]] if r["slice"] in comps.index else None
            difference = float(c["difference"]) if c is not None else float("nan")
            flagged = bool(c["_flag"]) if c is not None else False
            certified = c is not None and float(c.get("p_within_adjusted", float("nan"))) < alpha
            within = f"within \u00b1{float(c['tolerance']):g} of overall" if certified else ""
            verdict, cls = _verdict(difference, flagged, metric, within)
            p_adj = c["p_adjusted"] if c is not None else float("nan")
            order = {"worse": 0, "better": 1, "differs": 1, "within": 2}.get(cls, 3)
            records.append((order, -abs(difference) if flagged else 0.0, cls, [
                f'<td class="text">{html_text(str(r["slice"]))}</td>',
                f"<td>{int(r['n']):,}</td>",
                f"<td>{_with_ci(r['estimate'], r['ci_low'], r['ci_high'])}</td>",
                f"<td>{_with_ci(difference, c['ci_low'], c['ci_high'], signed=True) if c is not None else ''}</td>",
                f"<td>{_cell(p_adj, 'p_adjusted')}</td>",
                f"<td>{html_text(mdd.get(r['slice'], ''))}</td>",
                f'<td class="text">{html_text(verdict)}</td>',
            ]))  # fmt: skip
        records.sort(key=lambda x: (x[0], x[1]))
        body = "".join(f'<tr class="{cls}">{"".join(cells)}</tr>' if cls else f"<tr>{''.join(cells)}</tr>"
                       for _, _, cls, cells in records)  # fmt: skip
        head = "".join(f'<th class="{"text" if h in ("slice", "verdict") else "num"}">{h}</th>' for h in (
            "slice", "n", f"estimate [{float(options.confidence):.0%} CI]", "difference from overall [CI]",
            "p (adjusted)", "detectable (MDD)", "verdict"))  # fmt: skip
        size = int(comps["family_size"].max()) if len(comps) and "family_size" in comps else 0
        overall_text = (_with_ci(overall.iloc[0]["estimate"], overall.iloc[0]["ci_low"], overall.iloc[0]["ci_high"])
                        if len(overall) else "")  # fmt: skip
        parts.append(f'<h2 id="headline-{html_text(str(model))}">{html_text(label)} of {html_text(str(model))}: '
                     f"which slices differ from overall ({overall_text})</h2>")  # fmt: skip
        parts.append(_scroll(f'<table data-table="headline" data-key="{html_text(str(model))}" '
                             f'data-rows="{len(records)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'))  # fmt: skip
        tests = {"metric": "slice-vs-overall tests", "model": "slice-vs-overall tests of every metric",
                 "audit": "tests of the whole audit"}[options.adjust_scope]  # fmt: skip
        family = (f"adjusted within the family of {size} {tests} ({options.adjust})" if size
                  else "no tests: flagged when the interval of the difference excludes 0")  # fmt: skip
        note = (f"Flag: adjusted p &lt; {alpha:g}, {family}; <i>within</i>: the two one-sided tests of a difference "
                f"of at least the tolerance reject at the same adjusted level (certified)"
                f"{', both kinds adjusted together' if options.adjust == 'holm' else ''}. "
                f"MDD: the smallest difference from overall the slice's "
                f"size lets that test detect with {float(options.power):.0%} power; a slice without a flag and a large "
                "MDD has no flag <i>at this size</i>, which is no evidence of no gap.")  # fmt: skip
        if withheld:
            note += " Withheld (too few rows or cases): " + "; ".join(withheld) + "."
        parts.append(f'<p class="legend">{note}</p>')
    return "\n".join(parts)


def _text_cells(*values) -> list[str]:
    """Left-aligned cells of names (model, slice, reference), escaped."""
    return [f'<td class="text">{html_text(str(v))}</td>' for v in values]


def _column_cells(group: pd.DataFrame, key: str, columns, cell) -> list[str]:
    """One cell per column of a wide row: ``cell(record)`` for the group's record whose ``key`` is the column,
    an empty cell where the group has none (the wide tables of the disparity ratios and the calibration summary)."""
    indexed = {r[key]: r for r in group.to_dict("records")}
    return ["<td></td>" if indexed.get(c) is None else cell(indexed[c]) for c in columns]


def _disparity_section(result: Any, files: Collection[str]) -> str:
    """Each slice's disparity ratios to its family's reference: a row per slice, a column per rate."""
    table = getattr(result, "fairness", None)
    if table is None or table.empty:
        return ""
    rows = table[table["statistic"] == "disparity_ratio"]
    if rows.empty:
        return ""
    several = len(result.options.scores) > 1
    metrics = list(pd.unique(rows["metric"]))
    head = (('<th class="text">model</th>' if several else "") + '<th class="text">slice</th><th class="text">'
            "reference</th>" + "".join(f"<th>{_metric_title(m)}</th>" for m in metrics))  # fmt: skip
    body = []

    def ratio_cell(r: dict) -> str:
        estimate = r["estimate"] if r["reported"] else float("nan")
        word = html_text(str(r["verdict"])) if r["reported"] else "withheld"
        tip = "" if r["reported"] else f' title="{html_text(str(r["reason"]))}"'
        return (f'<td class="{_verdict_class(r)}"{tip}>{_with_ci(estimate, r["ci_low"], r["ci_high"])}'
                f' <span class="verdict">{word}</span></td>')  # fmt: skip

    for (model, name, reference), group in rows.groupby(["model", "slice", "reference"], sort=False):
        cells = _text_cells(*([model] if several else []), name, reference)
        cells += _column_cells(group, "metric", metrics, ratio_cell)
        body.append(f"<tr>{''.join(cells)}</tr>")
    return "\n".join([
        '<details id="disparities"><summary>Disparity ratios to a reference slice (Aequitas; four-fifths '
        "rule)</summary>",
        "<p>Each slice's selection rate, false positive rate and false negative rate over its family's reference "
        "slice (the largest unless <code>--reference</code> names one), with intervals and verdicts shaded as in the "
        "fairness summary (dark: the four-fifths rule fails and the data can tell). Simultaneous bands and "
        f"point-estimate flags: {_csv('fairness', len(table), files)}.</p>",
        _scroll(f'<table data-table="fairness-disparities" data-key="all" data-rows="{len(body)}">'
                f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"),
        "</details>",
    ])  # fmt: skip


def _calibration_section(result: Any, figures, files: Collection[str]) -> str:
    summary = getattr(result, "calibration_summary", None)
    if summary is None or summary.empty:
        return ""
    parts = ['<details id="calibration"><summary>Calibration per slice: expected calibration error, '
             "observed/expected ratio, calibration curves</summary>",
             "<p>Bins of each model's score over the whole file (one per value for a score with few values, "
             "else quantile bins); the expected calibration error (ECE) "
             "weighs each bin's gap between the observed rate and the mean predicted risk by its share of the "
             "slice. ECE is positive on a small slice even for a calibrated model; read it with its interval and "
             "against overall (under each value: the slice minus overall, with its interval). Every column: "
             f"{_csv('calibration_summary', len(summary), files)}.</p>"]  # fmt: skip
    parts.append(_calibration_table(summary, several=len(result.options.scores) > 1))
    parts += [_figure_html(n, s, b) for n, (s, b) in figures.items() if s.get("kind") == "calibration"]
    parts.append(f"<p>The observed rate and mean predicted risk of every bin and slice (the curves' points): "
                 f"{_csv('calibration', len(result.calibration), files)}.</p>")  # fmt: skip
    parts.append("</details>")
    return "\n".join(parts)


#: Column titles of the calibration summary's statistics in the report.
_CALIBRATION_TITLES = {
    "expected_calibration_error": "ECE (plug-in)",
    "calibration_error": "calibration error (debiased)",
    "observed_expected_ratio": "observed / expected",
}


def _calibration_table(summary: pd.DataFrame, *, several: bool) -> str:
    """The calibration summary as a row per slice: each statistic with its interval, and minus overall under it."""
    statistics = _ordered(summary["statistic"], vocabulary.CALIBRATION_STATISTICS)
    head = (('<th class="text">model</th>' if several else "") + '<th class="text">slice</th><th>n</th>'
            + "".join(f"<th>{html_text(_CALIBRATION_TITLES.get(k, k))}</th>" for k in statistics))  # fmt: skip
    body = []

    def statistic_cell(r: dict) -> str:
        estimate = r["estimate"] if r["reported"] else float("nan")
        text = _with_ci(estimate, r["ci_low"], r["ci_high"]) if pd.notna(r["ci_low"]) else format_estimate(estimate)
        if r["reported"] and pd.notna(r["vs_overall"]):
            text += (f' <span class="verdict">{format_estimate(r["vs_overall"], signed=True)} '
                     f"{format_interval(r['vs_overall_low'], r['vs_overall_high'], signed=True)}</span>")  # fmt: skip
        return f"<td>{text}</td>"

    for (model, name), group in summary.groupby(["model", "slice"], sort=False):
        first = group.iloc[0]
        reported = bool(first["reported"])
        cells = _text_cells(*([model] if several else []), name) + [f"<td>{int(first['n']):,}</td>"]
        cells += _column_cells(group, "statistic", statistics, statistic_cell)
        tip = "" if reported else f' title="{html_text(str(first["reason"]))}"'
        body.append(
            f'<tr{tip} class="withheld">{"".join(cells)}</tr>' if not reported else f"<tr>{''.join(cells)}</tr>"
        )
    return _scroll(f'<table data-table="calibration_summary" data-key="all" data-rows="{len(body)}">'
                   f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")  # fmt: skip


def _thresholds_section(result: Any, figures, files: Collection[str]) -> str:
    table = getattr(result, "thresholds", None)
    if table is None or table.empty:
        return ""
    parts = ['<details id="thresholds"><summary>Threshold analysis: selection rate, true and false positive rates '
             "across thresholds</summary>",
             "<p>One line per slice, its Wilson interval shaded; overall black and dashed. Every rate with its "
             f"interval: {_csv('thresholds', len(table), files)}.</p>"]  # fmt: skip
    parts += [_figure_html(n, s, b) for n, (s, b) in figures.items() if s.get("kind") == "thresholds"]
    parts.append("</details>")
    return "\n".join(parts)


def _detectability_section(result: Any, files: Collection[str]) -> str:
    """The minimum detectable difference of every slice and metric, a row per slice; the rest in the CSV file."""
    table = getattr(result, "detectability", None)
    if table is None or table.empty:
        return ""
    metrics = _ordered(table["metric"], result.options.metrics)
    records = []
    for model in _ordered(table["model"], result.options.scores):
        own = table[table["model"] == model]
        for name in pd.unique(own["slice"]):
            rows = own[own["slice"] == name].set_index("metric")
            record = {"model": model, "slice": name}
            for metric in metrics:
                r = rows.loc[metric] if metric in rows.index else None
                ok = r is not None and bool(r["reported"])
                record[metric] = format_mdd(float(r["mdd_above"]), float(r["mdd_below"])) if ok else ""
            records.append(record)
    frame = _model_column(pd.DataFrame.from_records(records), result)
    frame = frame.rename(columns=vocabulary.METRIC_LABELS)  # titles with spaces wrap; names do not
    return "\n".join([
        '<details id="detectability"><summary>What the data can detect: minimum detectable differences, every '
        "slice and metric</summary>",
        "<p>The smallest difference from overall each slice's size lets its test detect "
        f"(<code>+above/-below</code> when the two directions differ; empty: withheld). Rows needed, methods and "
        f"levels: {_csv('detectability', len(table), files)}; the method is in docs/method.md (\"What the data can "
        'detect").</p>',
        _html_table(frame, kind="detectability", key="all"),
        "</details>",
    ])  # fmt: skip


def _selection_section(result: Any) -> str:
    """Evaluation under selection: what was assumed and what follows, and the table ``selection``."""
    from .selection_table import selection_lines

    table = getattr(result, "selection", None)
    lines = selection_lines(result)
    if table is None or table.empty or not lines:
        return ""
    shown = table.loc[table["quantity"] == "difference", list(SELECTION_COLUMNS)]  # slice names the levels
    return (
        '<details id="selection" open><summary>Evaluation under selection: population margins and sensitivity '
        "bounds</summary>"
        + "".join(f"<p>{html_text(line)}</p>" for line in lines)
        + "<p>Differences from overall per Gamma (all rows, also each slice's metric, in <code>selection.csv</code>; "
        "docs/audit.md, 'Evaluation under selection'). bound_low/bound_high: the bounds; bound_ci_low/high: their "
        "interval; bound_band_low/high: the bounds' interval at band_level, a simultaneous band over the model's "
        "differences (one family at the audit's confidence); breakdown_gamma: where that band first reaches 0.</p>"
        + _html_table(shown, kind="selection", key="differences")
        + "</details>"
    )


def _summary_html(summary: str) -> str:
    """The terminal summary for ``<pre>``: each line as the terminal shows it (:func:`.text.html_text`)."""
    return "\n".join(html_text(line) for line in summary.split("\n"))


def render_html(
    result: Any,
    *,
    figures: Mapping[str, tuple[Mapping[str, Any], Mapping[str, bytes]]],
    summary: str,
    manifest: Mapping[str, Any] | None = None,
    input_path: str | os.PathLike[str] | None = None,
) -> str:
    """The report page as a string (see the module docstring for what it contains).

    Parameters
    ----------
    result : AuditResult
    figures : mapping of name to (spec, {"png": bytes, "svg": bytes})
        As returned by :func:`.figure_rendering.render_figures`.
    summary : str
        The terminal summary (:func:`disaggregated_eval.audit.terminal.summary_text`), shown verbatim.
    manifest : mapping, optional
        ``manifest.json``'s content (input SHA-256, package versions).
    input_path : path, optional
        The audited file, for the title.
    """
    name = Path(input_path).name if input_path is not None else "audit"
    files = set((manifest or {}).get("files", {}))  # the tables next to the page, for links to their CSV files
    forest = [(n, s, b) for n, (s, b) in figures.items() if s.get("kind") == "forest"]
    controlled = [(n, s, b) for n, (s, b) in figures.items() if s.get("kind") == "controlled"]
    notes = "".join(f'<li class="note">{html_text(n)}</li>' for n in result.notes)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # The file name is data: a right-to-left override (U+202E) or a control character in it would
        # reorder or hide text in the browser's title bar; escaped as the terminal shows it.
        f"<title>Disaggregated evaluation: {html_text(name)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Disaggregated evaluation: {html_text(name)}</h1>",
        _run_line(result, input_path),
        # ---- the first screen: the fairness summary and what differs, by how much, and what the data can tell
        _fairness_section(result),
        _headline_section(result),
        # ---- everything else, collapsible
        '<nav><a href="#fairness">Fairness</a><a href="#disparities">Disparity ratios</a>'
        '<a href="#calibration">Calibration</a><a href="#thresholds">Thresholds</a>'
        '<a href="#forest">Forest plots</a><a href="#controlled">T<sub>a</sub> plots</a><a href="#slices">Slices</a>'
        '<a href="#comparisons">Comparisons</a><a href="#controlled-tables">Controlled tables</a>'
        '<a href="#options">Run and options</a></nav>',
        f"<details open><summary>Notes ({len(result.notes)})</summary><ul>{notes}</ul></details>" if notes else "",
        _disparity_section(result, files),
        _detectability_section(result, files),
        _selection_section(result),
        _calibration_section(result, figures, files),
        _thresholds_section(result, figures, files),
        '<details id="forest"><summary>Forest plots (one per metric)</summary>',
        "<p>Each row is a slice: the point is its estimate, the line its interval; the dashed vertical "
        "line is the overall value. Withheld slices (grey, dashed) show only their interval. The right "
        "margin gives each slice's number of rows.</p>",
        *(_figure_html(n, s, b) for n, s, b in forest),
        "</details>",
        '<details id="controlled"><summary>Controlled differences (one figure per control variable)</summary>',
        "<p>T<sub>a</sub> = slice metric &minus; M<sub>a</sub>, with intervals; 0 (dashed) means no "
        "difference once the population is re-weighted to the slice's distribution of V.</p>",
        *(_figure_html(n, s, b) for n, s, b in controlled),
        "</details>",
        '<details id="reading"><summary>How to read this report</summary>',
        _fairness_guide(result),
        _READING_GUIDE,
        "</details>",
        '<details id="summary"><summary>Terminal summary</summary>',
        f'<pre data-summary="terminal">{_summary_html(summary)}</pre>',
        "</details>",
        '<details id="tables"><summary>Slices, comparisons and controlled tables: where to find them, and what '
        "they count</summary>",
        _slices_section(result, files),
        _comparisons_section(result, files),
        _controlled_section(result, files),
        "</details>",
        '<details id="options"><summary>Run, options and package versions</summary>',
        _meta_table(result, manifest, input_path),
        _options_table(result),
        _versions_table(manifest),
        "</details>",
        f"<script>{_IMAGE_CHECK}</script>",
        "</body></html>",
    ]
    return "\n".join(p for p in parts if p) + "\n"


def write_report(
    result: Any,
    path: str | os.PathLike[str],
    *,
    input_path: str | os.PathLike[str] | None = None,
    figures: Mapping[str, tuple[Mapping[str, Any], Mapping[str, bytes]]] | None = None,
    manifest: Mapping[str, Any] | None = None,
) -> Path:
    """Write ``report.html`` for ``result`` to ``path`` atomically (``AuditResult.to_html``).

    Figures are rendered unless given (as from :func:`.figure_rendering.render_figures`).

    Returns
    -------
    pathlib.Path
        The path written.
    """
    from ..io import atomic_path
    from .terminal import summary_text
    from .text import DEFAULT_WIDTH

    figures = render_figures(result) if figures is None else figures
    summary = summary_text(result, input_path=input_path, width=DEFAULT_WIDTH)
    page = render_html(result, figures=figures, summary=summary,
                       manifest=manifest, input_path=input_path)  # fmt: skip
    target = Path(path)
    with atomic_path(target) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return target
