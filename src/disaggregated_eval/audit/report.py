"""``report.html``: one self-contained page with every table and figure of an audit.

The page needs nothing but itself: styles are inline, figures are SVG images embedded as base64
``data:`` URIs (the output folder also has them as PNG and SVG files), and there is no font, script or style sheet from the network (it reads the same
offline). Every figure is a ``<figure data-figure="NAME">``, every table a
``<table data-table="KIND" data-key="...">`` so that tests (and readers' own tools) can find them.
A short inline script only counts the figures that decoded (``<body data-images-ok="k/n">``).
"""

from __future__ import annotations

import base64
import html
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd

from .. import vocabulary
from .plots import figure_bytes, render_figures  # the figures' one home; re-exported for callers of this module
from .summary import weight_note

__all__ = ["render_figures", "figure_bytes", "render_html", "write_report"]

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2em auto;
       max-width: 1200px; padding: 0 1em; color: #222; line-height: 1.4; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { font-size: 1.25em; margin-top: 1.8em;
     border-bottom: 1px solid #ddd; padding-bottom: 0.2em; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1em 0; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; position: sticky; top: 0; }
td.text, th.text { text-align: left; }
tr.withheld td { color: #888; } tr.flagged td { background: #fff4e0; }
figure { margin: 1em 0 2em 0; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9em; color: #444; margin-top: 0.3em; }
pre { background: #f8f8f8; padding: 0.8em; overflow-x: auto; font-size: 0.8em; }
details { margin: 0.4em 0; } summary { cursor: pointer; font-weight: 600; }
.meta td, .meta th { text-align: left; } .note { color: #7a4b00; }
nav a { margin-right: 1em; }
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
p-values adjusted for multiple comparisons within each metric's family.</p>
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
    return html.escape(str(value))


def _html_table(frame: pd.DataFrame, *, kind: str, key: str, row_class=None) -> str:
    columns = list(frame.columns)
    head = "".join(f'<th class="{"text" if c in _TEXT_COLUMNS else "num"}">{html.escape(c)}</th>' for c in columns)
    body = []
    for record in frame.to_dict("records"):
        cls = row_class(record) if row_class else ""
        cells = "".join(
            f'<td class="{"text" if c in _TEXT_COLUMNS else "num"}">{_cell(record[c], c)}</td>' for c in columns
        )
        body.append(f'<tr class="{cls}">{cells}</tr>' if cls else f"<tr>{cells}</tr>")
    return (
        f'<table data-table="{html.escape(kind)}" data-key="{html.escape(key)}" data-rows="{len(frame)}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )


def _metric_title(metric: str) -> str:
    return html.escape(vocabulary.METRIC_LABELS.get(metric, metric))


def _slices_section(result: Any) -> str:
    parts = ['<h2 id="slices">Slices</h2>',
             "<p>One row per slice; columns as in <code>slices.csv</code> (docs/audit.md).</p>"]  # fmt: skip
    table = result.slices
    for metric in _ordered(table["metric"], result.options.metrics):
        rows = table[table["metric"] == metric]
        parts.append(f"<details open><summary>{_metric_title(metric)}</summary>")
        parts.append(_html_table(rows, kind="slices", key=metric, row_class=_withheld_class))
        parts.append("</details>")
    return "\n".join(parts)


def _comparisons_section(result: Any) -> str:
    table = result.comparisons
    alpha = 1.0 - float(result.options.confidence)
    parts = ['<h2 id="comparisons">Comparisons</h2>',
             f"<p>Highlighted: adjusted p-value below {alpha:g}. Columns as in <code>comparisons.csv</code>.</p>"]  # fmt: skip
    if table.empty:
        parts.append("<p>No comparisons.</p>")
    for metric in _ordered(table["metric"], result.options.metrics):
        rows = table[table["metric"] == metric]
        parts.append(f"<details><summary>{_metric_title(metric)} ({len(rows)} comparisons)</summary>")
        flagged = lambda r: "flagged" if _lt(r["p_adjusted"], alpha) else ""
        parts.append(_html_table(rows, kind="comparisons", key=metric, row_class=flagged))
        parts.append("</details>")
    return "\n".join(parts)


def _controlled_section(result: Any) -> str:
    table = result.controlled
    parts = ['<h2 id="controlled-tables">Controlled evaluation</h2>',
             "<p>Subgroup metric, weighted population metric M<sub>a</sub>, controlled difference "
             "T<sub>a</sub> and the shared-space metric with their intervals; columns as in "
             "<code>controlled.csv</code>.</p>"]  # fmt: skip
    if table.empty:
        parts.append("<p>No controlled evaluation.</p>")
    for control in _ordered(table["control"], result.options.controls):
        rows = table[table["control"] == control]
        title = "no control (M_a is the overall value)" if control == "none" else f"control V = {control}"
        parts.append(f"<details><summary>{html.escape(title)}</summary>")
        parts.append(_html_table(rows, kind="controlled", key=control))
        parts.append("</details>")
    return "\n".join(parts)


def _withheld_class(record: Mapping[str, Any]) -> str:
    return "" if bool(record["reported"]) else "withheld"


def _lt(value: Any, alpha: float) -> bool:
    try:
        return float(value) < alpha
    except (TypeError, ValueError):
        return False


def _ordered(values: pd.Series, preferred: Sequence[str]) -> list[str]:
    present = list(pd.unique(values))
    return [v for v in preferred if v in present] + [v for v in present if v not in preferred]


def _figure_html(name: str, spec: Mapping[str, Any], images: Mapping[str, bytes]) -> str:
    fmt, mime = ("svg", "image/svg+xml") if "svg" in images else ("png", "image/png")
    data = base64.b64encode(images[fmt]).decode("ascii")
    title = html.escape(spec.get("title", name))
    # Shown at 140 px per figure inch (about 1.5 times the figure's print size), never wider than the page.
    size = f' style="width: {140 * spec["width_in"]:.0f}px"' if spec.get("width_in") else ""
    return (
        f'<figure data-figure="{html.escape(name)}" id="figure-{html.escape(name)}">'
        f'<img src="data:{mime};base64,{data}" alt="{title}"{size}>'
        f"<figcaption>{title} (<code>figures/{html.escape(name)}.png</code>, <code>.svg</code>)"
        "</figcaption></figure>"
    )


def _meta_table(result: Any, manifest: Mapping[str, Any] | None, input_path: Any) -> str:
    options = result.options
    rows = []
    source = (manifest or {}).get("input") or {}  # None when the audit was written without its input file
    if input_path is not None or source.get("path"):
        rows.append(("input file", html.escape(str(source.get("path", input_path)))))
    if source.get("sha256"):
        rows.append(("input SHA-256", f"<code>{source['sha256']}</code>"))
    rows.append(("rows audited", f"{result.n_rows:,}"))
    rows.append(("label", html.escape(options.label)))
    rows.append(("models (score columns)", html.escape(", ".join(options.scores))))
    rows.append(("attributes", html.escape(", ".join(options.groups))))
    weighted = weight_note(options)
    rows.append(("row weights", f"<b>{html.escape(weighted)}</b>" if weighted else "none (every row counts once)"))
    rows.append(("seed", str(options.seed)))
    body = "".join(f'<tr><th class="text">{k}</th><td class="text">{v}</td></tr>' for k, v in rows)
    return f'<table class="meta" data-table="run" data-key="run">{body}</table>'


def _options_table(result: Any) -> str:
    values = asdict(result.options)
    body = "".join(
        f'<tr><th class="text">{html.escape(k)}</th><td class="text">{html.escape(_option_text(v))}</td></tr>'
        for k, v in values.items()
    )
    return f'<table class="meta" data-table="options" data-key="options">{body}</table>'


def _option_text(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(map(str, value)) if value else "(none)"
    return "(not set)" if value is None else str(value)


def _versions_table(manifest: Mapping[str, Any] | None) -> str:
    versions = (manifest or {}).get("versions", {})
    if not versions:
        return ""
    body = "".join(
        f'<tr><th class="text">{html.escape(k)}</th><td class="text">{html.escape(str(v))}</td></tr>'
        for k, v in versions.items()
    )
    return f'<h3>Package versions</h3><table class="meta" data-table="versions" data-key="versions">{body}</table>'


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
        As returned by :func:`render_figures`.
    summary : str
        The terminal summary (:func:`disaggregated_eval.audit.summary.summary_text`), shown verbatim.
    manifest : mapping, optional
        ``manifest.json``'s content (input SHA-256, package versions).
    input_path : path, optional
        The audited file, for the title.
    """
    name = Path(input_path).name if input_path is not None else "audit"
    forest = [(n, s, b) for n, (s, b) in figures.items() if s.get("kind") == "forest"]
    controlled = [(n, s, b) for n, (s, b) in figures.items() if s.get("kind") == "controlled"]
    notes = "".join(f'<li class="note">{html.escape(n)}</li>' for n in result.notes)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>Disaggregated evaluation: {html.escape(name)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>Disaggregated evaluation: {html.escape(name)}</h1>",
        '<nav><a href="#summary">Summary</a><a href="#forest">Forest plots</a>'
        '<a href="#controlled">T<sub>a</sub> plots</a><a href="#slices">Slices</a>'
        '<a href="#comparisons">Comparisons</a><a href="#controlled-tables">Controlled tables</a>'
        '<a href="#options">Options</a></nav>',
        _meta_table(result, manifest, input_path),
        f"<ul>{notes}</ul>" if notes else "",
        '<h2 id="reading">How to read this report</h2>',
        _READING_GUIDE,
        '<h2 id="summary">Summary</h2>',
        f'<pre data-summary="terminal">{html.escape(summary)}</pre>',
        '<h2 id="forest">Forest plots (one per metric)</h2>',
        "<p>Each row is a slice: the point is its estimate, the line its interval; the dashed vertical "
        "line is the overall value. Withheld slices (grey, dashed) show only their interval. The right "
        "margin gives each slice's number of rows.</p>",
        *(_figure_html(n, s, b) for n, s, b in forest),
        '<h2 id="controlled">Controlled differences (one figure per control variable)</h2>',
        "<p>T<sub>a</sub> = slice metric &minus; M<sub>a</sub>, with intervals; 0 (dashed) means no "
        "difference once the population is re-weighted to the slice's distribution of V.</p>",
        *(_figure_html(n, s, b) for n, s, b in controlled),
        _slices_section(result),
        _comparisons_section(result),
        _controlled_section(result),
        '<h2 id="options">Options</h2>',
        _options_table(result),
        _versions_table(manifest),
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

    Figures are rendered unless given (as from :func:`render_figures`).

    Returns
    -------
    pathlib.Path
        The path written.
    """
    from ..io import atomic_path
    from .summary import summary_text

    figures = render_figures(result) if figures is None else figures
    page = render_html(result, figures=figures, summary=summary_text(result, input_path=input_path),
                       manifest=manifest, input_path=input_path)  # fmt: skip
    target = Path(path)
    with atomic_path(target) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return target
