"""An audit's line figures: calibration and rates across thresholds, per family of slices.

- :func:`plot_calibration`: for one family of slices (an attribute or an intersection), the
  calibration curve of every reported slice (mean predicted risk against the observed rate per score
  bin, with Wilson intervals) and the overall one (black, dashed), one panel per model, the diagonal
  dotted;
- :func:`plot_thresholds`: for one family and model, the selection rate, true positive rate and
  false positive rate of every reported slice across the thresholds of the option ``thresholds``
  (one line per slice, its interval shaded), one panel per rate.

Every slice of the family is named in the legend right of the panels, ``race=Black (n=3,175)``,
withheld slices included (``withheld``, grey, without a line). The data (:class:`LineFigureData`,
from :func:`calibration_figure_data` and :func:`thresholds_figure_data`) is plain, so the renderer's
worker processes draw it without the result (:mod:`.figure_rendering`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from .. import vocabulary
from .figure_data import MAX_COLUMNS, WITHHELD_COLOR, result_models, rgb_palette, slice_rows
from .figure_layout import EDGE, LEGEND_LINE, LEGEND_PT, SUPTITLE_H, TITLE_H, XAXIS_H, audit_style, text_width
from .text import terminal_text

__all__ = [
    "LineFigureData",
    "calibration_figure_data",
    "thresholds_figure_data",
    "draw_line_figure",
    "plot_calibration",
    "plot_thresholds",
]


_LINE_PANEL_W = 2.6
_LINE_PANEL_H = 2.3
_LINE_LEGEND_ROW_H = 0.17
_LINE_STYLES = ("-", (0, (4, 1.5)), (0, (1, 1)), (0, (4, 1, 1, 1)))


@dataclass(frozen=True)
class _Line:
    """One slice's line in a panel: x, y and an interval (error bars or a band) per point."""

    entry: int  # index into the figure's legend entries
    x: np.ndarray
    y: np.ndarray
    low: np.ndarray
    high: np.ndarray


@dataclass(frozen=True)
class _LinePanel:
    title: str
    xlabel: str
    ylabel: str
    lines: tuple[_Line, ...]
    diagonal: bool  # draw y = x (calibration)
    bands: bool  # shaded intervals (thresholds) rather than error bars (calibration)


@dataclass(frozen=True)
class LineFigureData:
    """Everything :func:`draw_line_figure` needs; picklable (drawn in worker processes too)."""

    title: str
    entries: tuple[tuple[str, tuple[float, float, float], Any, bool], ...]  # label, colour, line style, muted
    panels: tuple[_LinePanel, ...]
    ncols: int


def _slice_styles(names: Sequence[str]) -> dict[str, tuple[tuple[float, float, float], Any]]:
    """Colour (:func:`.figure_data.rgb_palette`) and line style of each slice of a family: overall dashed, the
    others a new line style each time the colour-blind palette's colours come round again."""
    from disaggregated_eval.plots import COLORBLIND

    out, k = {}, 0
    for name, color in zip(names, rgb_palette(names), strict=True):
        if name == vocabulary.OVERALL:
            out[name] = (color, (0, (3, 2)))
            continue
        out[name] = (color, _LINE_STYLES[(k // len(COLORBLIND)) % len(_LINE_STYLES)])
        k += 1
    return out


def _family_entries(result: Any, family: str, reported: Mapping[str, bool]):
    """Legend entries of a family's line figure: overall, then every slice of the family in table order."""
    order, attribute, n = slice_rows(result)
    names = [vocabulary.OVERALL] + [s for s in order if attribute[s] == family]
    if len(names) == 1:
        raise ValueError(f"family must be one of the audit's attributes or intersections; got {family!r}")
    styles = _slice_styles(names)
    entries = []
    for name in names:
        shown = bool(reported.get(name, False))
        text = f"{terminal_text(name)} (n={int(n[name]):,}" + (")" if shown else ", withheld)")
        color, style = styles[name]
        entries.append((text, color if shown else WITHHELD_COLOR, style, not shown))
    return names, entries


def calibration_figure_data(result: Any, *, family: str) -> LineFigureData:
    table = result.calibration
    if table is None or table.empty:
        raise ValueError("the audit has no calibration table (its models give hard 0/1 predictions)")
    table = table[(table["slice"] == vocabulary.OVERALL) | (table["attribute"] == family)]
    first = table.drop_duplicates("slice")
    names, entries = _family_entries(result, family, dict(zip(first["slice"], first["reported"], strict=True)))
    panels = []
    models = [m for m in result_models(result, None) if m in set(table["model"])]
    for model in models:
        rows = table[table["model"] == model]
        lines = []
        for k, name in enumerate(names):
            if entries[k][3]:
                continue
            r = rows[(rows["slice"] == name) & (rows["n"] > 0)]
            lines.append(_Line(entry=k, x=r["mean_predicted"].to_numpy(float), y=r["observed"].to_numpy(float),
                               low=r["ci_low"].to_numpy(float), high=r["ci_high"].to_numpy(float)))  # fmt: skip
        panels.append(_LinePanel(title=terminal_text(model), xlabel="Mean predicted risk (per score bin)",
                                 ylabel="Observed rate", lines=tuple(lines), diagonal=True, bands=False))  # fmt: skip
    return LineFigureData(title=f"Calibration by slice: {terminal_text(family)} (observed rate per score bin, 95% "
                                 "Wilson intervals)", entries=tuple(entries), panels=tuple(panels),
                           ncols=min(len(panels), MAX_COLUMNS))  # fmt: skip


def thresholds_figure_data(result: Any, *, family: str, model: str) -> LineFigureData:
    table = result.thresholds
    if table is None or table.empty:
        raise ValueError("the audit has no threshold analysis (give thresholds, e.g. --thresholds 0.1:0.9:0.1)")
    table = table[((table["slice"] == vocabulary.OVERALL) | (table["attribute"] == family)) & (table["model"] == model)]
    if table.empty:
        raise ValueError(f"no threshold rows for model {model!r}")
    panels = []
    names = entries = None
    for metric in vocabulary.THRESHOLD_METRICS:
        rows = table[table["metric"] == metric]
        first = rows.drop_duplicates("slice")
        if names is None:
            names, entries = _family_entries(result, family, dict(zip(first["slice"], first["reported"], strict=True)))
        lines = []
        for k, name in enumerate(names):
            if entries[k][3]:
                continue
            r = rows[(rows["slice"] == name) & rows["reported"].astype(bool)]  # withheld for this rate: no line
            lines.append(_Line(entry=k, x=r["threshold"].to_numpy(float), y=r["estimate"].to_numpy(float),
                               low=r["ci_low"].to_numpy(float), high=r["ci_high"].to_numpy(float)))  # fmt: skip
        label = "True positive rate" if metric == "sensitivity" else vocabulary.METRIC_LABELS[metric]
        panels.append(_LinePanel(title=label, xlabel="Decision threshold (score >= t is positive)", ylabel=label,
                                 lines=tuple(lines), diagonal=False, bands=True))  # fmt: skip
    return LineFigureData(title=f"Rates across thresholds by slice: {terminal_text(family)}, model "
                                 f"{terminal_text(model)} (95% Wilson intervals shaded)", entries=tuple(entries),
                           panels=tuple(panels), ncols=min(len(panels), MAX_COLUMNS))  # fmt: skip


def draw_line_figure(data: LineFigureData) -> Figure:
    """A line figure: panels in rows of ``ncols``, a legend column right of them naming every slice."""
    nrows = -(-len(data.panels) // data.ncols)
    legend_w = max(text_width(text, LEGEND_PT) for text, *_ in data.entries) + LEGEND_LINE + 0.25
    y_label_w = 0.45
    block_h = TITLE_H + _LINE_PANEL_H + XAXIS_H
    panels_h = nrows * block_h
    legend_h = len(data.entries) * _LINE_LEGEND_ROW_H
    width = EDGE + data.ncols * (y_label_w + _LINE_PANEL_W) + (data.ncols - 1) * 0.15 + 0.2 + legend_w + EDGE
    title_pt = mpl.font_manager.FontProperties(size=mpl.rcParams["figure.titlesize"]).get_size_in_points()
    width = max(width, text_width(data.title, title_pt) + 2 * EDGE + 0.1)  # the title never leaves the figure
    height = EDGE + SUPTITLE_H + max(panels_h, legend_h) + EDGE
    fig = Figure(figsize=(round(width, 3), round(height, 3)))
    top = height - EDGE - SUPTITLE_H
    for k, panel in enumerate(data.panels):
        i, j = divmod(k, data.ncols)
        x0 = EDGE + y_label_w + j * (y_label_w + _LINE_PANEL_W + 0.15)
        y0 = top - i * block_h - TITLE_H - _LINE_PANEL_H
        ax = fig.add_axes((x0 / width, y0 / height, _LINE_PANEL_W / width, _LINE_PANEL_H / height))
        if panel.diagonal:
            ax.plot([0, 1], [0, 1], color="0.6", linewidth=0.8, linestyle=":", zorder=0)
        for line in panel.lines:
            _, color, style, _ = data.entries[line.entry]
            ok = np.isfinite(line.x) & np.isfinite(line.y)
            if panel.bands:
                band = np.isfinite(line.low) & np.isfinite(line.high)
                ax.fill_between(line.x[band], line.low[band], line.high[band], color=color, alpha=0.15, linewidth=0,
                                zorder=1)  # fmt: skip
            else:
                bars = ok & np.isfinite(line.low) & np.isfinite(line.high)
                ax.vlines(line.x[bars], line.low[bars], line.high[bars], colors=[color], linewidth=0.8, alpha=0.7,
                          zorder=2)  # fmt: skip
            ax.plot(line.x[ok], line.y[ok], color=color, linestyle=style, linewidth=1.2,
                    marker=None if panel.bands else "o", markersize=2.5, zorder=3)  # fmt: skip
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.02, 1.02)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
        ax.set_title(panel.title, parse_math=False)
        ax.set_xlabel(panel.xlabel, parse_math=False)
        ax.set_ylabel(panel.ylabel, parse_math=False)
    # The legend: a line and the slice's label per entry; a withheld slice has its label in grey, no line.
    x_legend = width - EDGE - legend_w + 0.1
    inches = fig.dpi_scale_trans
    for r, (text, color, style, muted) in enumerate(data.entries):
        y = top - (r + 0.5) * _LINE_LEGEND_ROW_H
        if not muted:
            fig.add_artist(Line2D([x_legend, x_legend + LEGEND_LINE], [y, y], transform=inches, color=color,
                                  linestyle=style, linewidth=1.3))  # fmt: skip
        fig.text(x_legend + LEGEND_LINE + 0.08, y, text, transform=inches, va="center", ha="left",
                 fontsize=LEGEND_PT, parse_math=False, color="0.45" if muted else "0.1")  # fmt: skip
    fig.suptitle(data.title, y=1.0 - EDGE / height, va="top", parse_math=False)
    return fig


def plot_calibration(result: Any, *, family: str | None = None) -> Figure:
    """Calibration curves of every slice of one family (an attribute or an intersection), a panel per model.

    Parameters
    ----------
    result : AuditResult
        The audit (``result.calibration``).
    family : str, optional
        ``race`` or ``race & sex``; default the first attribute.

    Returns
    -------
    matplotlib.figure.Figure
        Mean predicted risk (x) against the observed rate (y) per score bin with Wilson intervals, the
        overall curve black and dashed, the diagonal dotted; the legend names every slice of the family
        with its size (withheld slices: grey, no curve).

    Raises
    ------
    ValueError
        If the audit has no calibration table or no such family.
    """
    family = family or next(f for f in pd.unique(result.slices["attribute"]) if f != vocabulary.OVERALL)
    with mpl.rc_context(audit_style()):
        return draw_line_figure(calibration_figure_data(result, family=family))


def plot_thresholds(result: Any, *, family: str | None = None, model: str | None = None) -> Figure:
    """Selection rate, true and false positive rates of every slice of one family across the thresholds.

    Parameters
    ----------
    result : AuditResult
        The audit (``result.thresholds``; run with the option ``thresholds``).
    family : str, optional
        Default the first attribute.
    model : str, optional
        Default the first model.

    Returns
    -------
    matplotlib.figure.Figure
        A panel per rate, a line per reported slice with its Wilson interval shaded, overall black and
        dashed; the legend names every slice of the family with its size.

    Raises
    ------
    ValueError
        If the audit has no threshold analysis, or no such family or model.
    """
    family = family or next(f for f in pd.unique(result.slices["attribute"]) if f != vocabulary.OVERALL)
    name = result_models(result, model)[0]
    with mpl.rc_context(audit_style()):
        return draw_line_figure(thresholds_figure_data(result, family=family, model=name))
