"""Drawing an audit's forest plots and ``T_a`` plots.

- :func:`plot_forest`: every slice of one metric, top to bottom in the order of the slices table
  (overall, then each attribute, then the intersections), its estimate with the 95% interval (and
  the simultaneous band, lighter, when the audit computed one); the overall value is a dashed
  vertical line. Slices withheld for their size (``reported`` false) are drawn as an interval only,
  in grey, without a point. One panel per model (at most :data:`.figure_data.MAX_COLUMNS` side by
  side), all on the same x range.
- :func:`plot_controlled`: for one control variable ``V``, the controlled differences
  ``T_a = E[m | A = a] - M_a`` (paper section 4.2) of every slice with their intervals, one panel per
  metric, a dashed line at 0. Withheld slices again show the interval only; slices left out of the
  control's weighted evaluation (see the audit's notes) keep their row, marked "not evaluated", so
  that every ``T_a`` figure of an audit has the same rows.

Every slice row is labelled left of the first panel of its row of panels (``withheld`` added, in
grey, when the slice is withheld in every panel of that row); every panel has a title (the model of
a forest plot, the metric of a ``T_a`` plot) and an x label; every figure a title naming the metric,
or the control and the model. The rows are drawn as a few line collections rather than one artist
per interval, the labels and the legend as plain text, on the layout of :mod:`.figure_layout`, from
the data of :mod:`.figure_data`. Figures are :class:`matplotlib.figure.Figure` objects built without
pyplot, so calling this module never changes global matplotlib settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import ScaledTranslation, blended_transform_factory

from disaggregated_eval.plots import IntervalStyle, draw_interval_rows

from .figure_data import (
    OVERALL_COLOR,
    WITHHELD_COLOR,
    FigureData,
    Panel,
    check_figure_metric,
    controlled_figure_data,
    controlled_figure_metrics,
    forest_figure_data,
    result_models,
)
from .figure_layout import (
    LABEL_PT,
    LEGEND_LINE,
    LEGEND_PT,
    MAX_LABEL_INCHES,
    TICK_PAD,
    audit_style,
    layout_figure,
    wrap_label,
)
from .text import terminal_text

__all__ = [
    "draw_forest",
    "plot_forest",
    "plot_controlled",
]

#: How the audit's rows are drawn (:func:`disaggregated_eval.plots.draw_interval_rows`): points over
#: intervals without caps, larger than the study's; the band and the withheld rows' dashes as the default.
_STYLE = IntervalStyle(point_size=4.0, point_edge_width=None, interval_width=1.3, cap_size=None, points_on_top=True)


def _row_labels(data: FigureData, panels: Sequence[Panel]) -> tuple[tuple[str, ...], tuple[bool, ...]]:
    """Each slice row's label for a row of panels, ``name (n=...)``, and whether it is muted (grey).

    The label says ``withheld`` when the slice is withheld in every panel of the row, and
    ``data.missing_note`` when none of them has the slice.
    """
    present = np.any([p.present for p in panels], axis=0)
    shown = np.any([p.present & p.shown for p in panels], axis=0)
    texts, muted = [], []
    for k, (raw, n) in enumerate(zip(data.labels, data.n, strict=True)):
        name = terminal_text(raw)  # control characters escaped: the SVG stays valid XML
        if not present[k]:
            texts.append(f"{name} (n={int(n):,}, {data.missing_note})")
        elif not shown[k]:
            texts.append(f"{name} (n={int(n):,}, withheld)")
        else:
            texts.append(f"{name} (n={int(n):,})")
        muted.append(not (present[k] and shown[k]))
    return tuple(texts), tuple(muted)


def _panel_rows(data: FigureData) -> list[tuple[Panel, ...]]:
    return [data.panels[i : i + data.ncols] for i in range(0, len(data.panels), data.ncols)]


def _legend_entries(data: FigureData) -> list[tuple[str, dict[str, Any]]]:
    """The legend: (text, line style) per entry; drawn by :func:`_draw_legend` (a matplotlib Legend
    costs more to draw than all of a forest plot's intervals)."""
    entries = [("estimate, 95% interval",
                dict(color="0.3", marker="o", markersize=_STYLE.point_size, linewidth=_STYLE.interval_width))]  # fmt: skip
    if any(p.band_low is not None for p in data.panels):
        entries.append(("simultaneous band", dict(color="0.3", alpha=_STYLE.band_alpha, linewidth=_STYLE.band_width)))
    entries.append(("withheld (too few rows or cases): interval only",
                    dict(color=WITHHELD_COLOR, linewidth=_STYLE.interval_width, linestyle=_STYLE.withheld_dashes)))  # fmt: skip
    if any(p.reference is not None for p in data.panels):
        color = OVERALL_COLOR if data.share_x else "0.35"
        entries.append((data.reference_label, dict(color=color, linewidth=0.8, linestyle="--")))
    return entries


def _draw_legend(fig: Figure, entries: Sequence[tuple[str, dict]], places: Sequence[tuple[float, float]]) -> None:
    inches = fig.dpi_scale_trans
    for (text, style), (x, y) in zip(entries, places, strict=True):
        line = {k: v for k, v in style.items() if k not in ("marker", "markersize")}
        fig.add_artist(Line2D([x, x + LEGEND_LINE], [y, y], transform=inches, **line))
        if "marker" in style:
            fig.add_artist(Line2D([x + LEGEND_LINE / 2], [y], transform=inches, marker=style["marker"],
                                  markersize=style["markersize"], color=style["color"], linestyle=""))  # fmt: skip
        fig.text(x + LEGEND_LINE + 0.08, y, text, transform=inches, va="center", ha="left", fontsize=LEGEND_PT,
                 parse_math=False)  # fmt: skip


def _x_limits(panels: Sequence[Panel]) -> tuple[float, float] | None:
    values = []
    for p in panels:
        for arr in (p.value, p.low, p.high, p.band_low, p.band_high):
            if arr is not None:
                values.append(arr[np.isfinite(arr) & p.present])
        if p.reference is not None:
            values.append(np.array([p.reference]))
    flat = np.concatenate(values) if values else np.empty(0)
    if flat.size == 0:
        return None
    lo, hi = float(flat.min()), float(flat.max())
    pad = 0.05 * (hi - lo) if hi > lo else 0.05 * max(abs(lo), 1.0)
    return lo - pad, hi + pad


def _present(values: np.ndarray | None, panel: Panel) -> np.ndarray | None:
    """``values`` with NaN where the panel has no row for the slice (nothing is drawn there)."""
    return None if values is None else np.where(panel.present, values, np.nan)


def _draw_panel(ax, data: FigureData, panel: Panel, *, labels: tuple[Sequence[str], Sequence[bool]] | None,
                xlim: tuple[float, float] | None) -> None:  # fmt: skip
    """One panel: the family separators, the reference line, the rows (:func:`.plots.draw_interval_rows`
    in the audit's ``_STYLE``: bands, intervals, withheld intervals, one point line per family) and,
    on the first panel of a row, the slice labels as text left of the axes."""
    n_rows = len(data.labels)
    for sep in data.separators:
        ax.axhline(sep, color="0.85", linewidth=0.6, zorder=0)
    if panel.reference is not None:
        ref_color = OVERALL_COLOR if data.share_x else "0.35"
        ax.axvline(panel.reference, color=ref_color, linewidth=0.8, linestyle="--", zorder=0)
    draw_interval_rows(
        ax,
        np.arange(n_rows, dtype=float),
        _present(panel.value, panel),
        _present(panel.low, panel),
        _present(panel.high, panel),
        colors=data.colors,
        family=data.family,
        shown=panel.shown & panel.present,
        band_low=_present(panel.band_low, panel),
        band_high=_present(panel.band_high, panel),
        style=_STYLE,
    )
    ax.set_ylim(n_rows - 0.5, -0.5)
    ax.set_yticks([])
    if labels is not None:
        # Plain text rather than tick labels: as readable, and a fraction of the drawing cost.
        to_labels = blended_transform_factory(ax.transAxes, ax.transData) + ScaledTranslation(
            -TICK_PAD, 0, ax.figure.dpi_scale_trans
        )
        for i, (text, muted) in enumerate(zip(*labels, strict=True)):
            ax.text(0.0, i, text, transform=to_labels, va="center", ha="right", fontsize=LABEL_PT,
                    parse_math=False, color="0.45" if muted else "0.1", clip_on=False)  # fmt: skip
    ax.grid(False, axis="y")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # a few ticks: each tick label is drawn twice (PNG, SVG)
    if xlim is not None:
        ax.set_xlim(*xlim)
    ax.set_title(panel.title, parse_math=False)
    ax.set_xlabel(panel.xlabel, parse_math=False)


def draw_forest(data: FigureData) -> Figure:
    """The figure of ``data`` (call under the house style's rc context)."""
    rows = [_row_labels(data, row) for row in _panel_rows(data)]
    entries = _legend_entries(data)
    layout = layout_figure(
        tuple(texts for texts, _ in rows), len(data.panels), data.ncols, tuple(t for t, _ in entries)
    )
    fig = Figure(figsize=layout.size)
    shared = _x_limits(data.panels) if data.share_x else None
    for k, (panel, rect) in enumerate(zip(data.panels, layout.rects, strict=True)):
        i, j = divmod(k, data.ncols)
        ax = fig.add_axes(rect)
        _draw_panel(ax, data, panel, labels=(layout.labels[i], rows[i][1]) if j == 0 else None,
                    xlim=shared if data.share_x else _x_limits([panel]))  # fmt: skip
    _draw_legend(fig, entries, layout.legend)
    fig.suptitle(data.title, y=layout.title_y, va="top", parse_math=False)
    return fig


def _draw_one(ax, data: FigureData) -> Figure:
    """The first panel of ``data`` into a caller's axes, with the slice labels."""
    panel = data.panels[0]
    texts, muted = _row_labels(data, [panel])
    wrapped = tuple("\n".join(wrap_label(t, MAX_LABEL_INCHES, LABEL_PT)) for t in texts)
    _draw_panel(ax, data, panel, labels=(wrapped, muted), xlim=_x_limits([panel]))
    return ax.figure


def plot_forest(result: Any, *, metric: str | None = None, model: str | None = None, ax=None) -> Figure:
    """Forest plot of one metric: every slice's estimate and interval, the overall value as a line.

    Parameters
    ----------
    result : AuditResult
        The audit (``result.slices``, ``docs/audit.md`` "Tables").
    metric : str, optional
        Metric name; default the first metric of the slices table.
    model : str, optional
        One model (score column); default every model, one panel each (side by side, at most
        :data:`MAX_COLUMNS` per row), each panel titled with its model and labelled with the slices
        on the first panel of each row.
    ax : matplotlib.axes.Axes, optional
        Draw into this axes (then ``model`` defaults to the first model) and return its figure.

    Returns
    -------
    matplotlib.figure.Figure
        Size in inches grows with the number of slices, models and the longest slice name.

    Raises
    ------
    ValueError
        If ``metric`` or ``model`` is not in the audit.
    """
    metric = check_figure_metric(result.slices, metric, "slices")
    models = result_models(result, model)
    with mpl.rc_context(audit_style()):
        if ax is not None:
            return _draw_one(ax, forest_figure_data(result, metric=metric, models=models[:1]))
        return draw_forest(forest_figure_data(result, metric=metric, models=models))


def plot_controlled(
    result: Any,
    *,
    control: str,
    metric: str | None = None,
    model: str | None = None,
    metrics: Sequence[str] | None = None,
    ax=None,
) -> Figure:
    """Controlled differences ``T_a`` for one control variable ``V``: one panel per metric.

    Parameters
    ----------
    result : AuditResult
        The audit (``result.controlled``).
    control : str
        One of the audit's controls (``none``, ``X``, ``Y``, ``R``).
    metric : str, optional
        Only this metric (one panel); default every metric of the controlled table (or ``metrics``),
        in the order of the audit's options.
    model : str, optional
        Default the first model (a ``T_a`` figure shows one model; its name is in the title).
    metrics : sequence of str, optional
        Metrics to show, in this order.
    ax : matplotlib.axes.Axes, optional
        Draw one panel (``metric``, default the first) into this axes.

    Returns
    -------
    matplotlib.figure.Figure
        One row per slice except ``overall`` (every slice of the audit, also those left out of this
        control's weighted evaluation), at most :data:`MAX_COLUMNS` panels per row.

    Raises
    ------
    ValueError
        If the control, metric or model is not in the audit.
    """
    table = result.controlled
    controls = list(pd.unique(table["control"]))
    if control not in controls:
        raise ValueError(f"control must be one of {controls} (the audit's controls); got {control!r}")
    name = result_models(result, model)[0]
    chosen = controlled_figure_metrics(result, control, name, metric, metrics)
    with mpl.rc_context(audit_style()):
        if ax is not None:
            return _draw_one(ax, controlled_figure_data(result, control=control, model=name, metrics=chosen[:1]))
        return draw_forest(controlled_figure_data(result, control=control, model=name, metrics=chosen))
