"""Figures of an audit: a forest plot per metric and a ``T_a`` plot per control variable.

- :func:`plot_forest`: every slice of one metric, top to bottom in the order of the slices table
  (overall, then each attribute, then the intersections), its estimate with the 95% interval (and
  the simultaneous band, lighter, when the audit computed one); the overall value is a dashed
  vertical line. Slices withheld for their size (``reported`` false) are drawn as an interval only,
  in grey, without a point; every row is labelled with its ``n`` on the right. One panel per model.
- :func:`plot_controlled`: for one control variable ``V``, the controlled differences
  ``T_a = E[m | A = a] - M_a`` (paper section 4.2) of every slice with their intervals, one panel per
  metric, a dashed line at 0. Withheld slices again show the interval only.

Figures are :class:`matplotlib.figure.Figure` objects built without pyplot, in the house style of
:mod:`disaggregated_eval.plots` (seaborn "ticks", small fonts, colour-blind palette), so importing
or calling this module never changes global matplotlib settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from .. import vocabulary
from .text import figure_text, file_component

__all__ = ["plot_forest", "plot_controlled", "plot_result", "figure_specs"]

_WITHHELD_COLOR = (0.62, 0.62, 0.62)
_OVERALL_COLOR = (0.15, 0.15, 0.15)
_ROW_H = 0.22  # inches per slice row
_PANEL_W = 3.2
_LABEL_W = 2.4  # y tick labels (slice names)
_MARGIN_H = 1.3
_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "p")


def _style() -> dict:
    from disaggregated_eval.plots import _style as house_style

    return house_style()


def _metric_label(metric: str) -> str:
    label = vocabulary.METRIC_LABELS.get(metric, metric)
    better = vocabulary.METRIC_HIGHER_IS_BETTER.get(metric)
    if better is True:
        return f"{label} (higher is better)"
    if better is False:
        return f"{label} (lower is better)"
    return label


def _models(result: Any, model: str | None) -> list[str]:
    models = list(result.options.scores) or list(pd.unique(result.slices["model"]))
    if model is None:
        return models
    if model not in models:
        raise ValueError(f"model must be one of {models}; got {model!r}")
    return [model]


def _check_metric(table: pd.DataFrame, metric: str | None, what: str) -> str:
    available = list(pd.unique(table["metric"]))
    if metric is None:
        if not available:
            raise ValueError(f"the audit has no {what} rows to plot")
        return available[0]
    if metric not in available:
        raise ValueError(f"metric must be one of {available} ({what}); got {metric!r}")
    return metric


def _slice_order(slices: pd.DataFrame) -> list[str]:
    return list(pd.unique(slices["slice"]))


def _family_colors(attributes: Sequence[str]) -> dict[str, tuple]:
    palette = sns.color_palette("colorblind", n_colors=max(len(attributes), 1))
    colors, k = {}, 0
    for attribute in attributes:
        if attribute == vocabulary.OVERALL:
            colors[attribute] = _OVERALL_COLOR
        else:
            colors[attribute] = tuple(palette[k % len(palette)])
            k += 1
    return colors


def _reported_map(result: Any, model: str, metric: str) -> dict[str, tuple[bool, int]]:
    rows = result.slices[(result.slices["model"] == model) & (result.slices["metric"] == metric)]
    return {s: (bool(r), int(n)) for s, r, n in zip(rows["slice"], rows["reported"], rows["n"], strict=True)}


def _draw_rows(
    ax,
    rows: pd.DataFrame,
    *,
    order: Sequence[str],
    value: str,
    low: str,
    high: str,
    band: tuple[str, str] | None,
    colors: dict[str, tuple],
    reported: dict[str, tuple[bool, int]],
) -> None:
    """One horizontal interval (and point, when reported) per slice; ``n`` written at the right."""
    position = {s: i for i, s in enumerate(order)}
    rows = rows[rows["slice"].isin(position)]
    for row in rows.itertuples(index=False):
        y = position[row.slice]
        shown, n = reported.get(row.slice, (True, int(getattr(row, "n", 0) or 0)))
        if hasattr(row, "reported"):  # the row's own rule (e.g. a controlled row's subgroup)
            shown = bool(row.reported)
        color = colors.get(row.attribute, _OVERALL_COLOR) if shown else _WITHHELD_COLOR
        if band is not None:
            b_lo, b_hi = getattr(row, band[0]), getattr(row, band[1])
            if np.isfinite(b_lo) and np.isfinite(b_hi):
                ax.hlines(y, b_lo, b_hi, color=color, alpha=0.35, linewidth=3.5, zorder=1)
        lo, hi, est = getattr(row, low), getattr(row, high), getattr(row, value)
        if np.isfinite(lo) and np.isfinite(hi):
            ax.hlines(y, lo, hi, color=color, linewidth=1.3, zorder=2, linestyle="-" if shown else (0, (2, 1)))
        if shown and np.isfinite(est):
            ax.plot([est], [y], marker="o", markersize=4, color=color, linestyle="", zorder=3)
        label = f"n={n:,}" if shown else f"n={n:,} (withheld)"
        ax.annotate(label, xy=(1.0, y), xycoords=("axes fraction", "data"), xytext=(4, 0),
                    textcoords="offset points", va="center", ha="left", fontsize=6,
                    color="0.25" if shown else "0.5", annotation_clip=False)  # fmt: skip
    ax.set_ylim(len(order) - 0.5, -0.5)
    ax.grid(False, axis="y")


def _family_separators(ax, slices: pd.DataFrame, order: Sequence[str]) -> None:
    attribute_of = dict(zip(slices["slice"], slices["attribute"], strict=False))
    previous = None
    for i, name in enumerate(order):
        attribute = attribute_of.get(name)
        if previous is not None and attribute != previous:
            ax.axhline(i - 0.5, color="0.85", linewidth=0.6, zorder=0)
        previous = attribute


def _legend(fig: Figure, *, band: bool, min_group_size: int, extra: list[Line2D] | None = None) -> None:
    handles = [
        Line2D([], [], color="0.3", marker="o", markersize=4, linewidth=1.3, label="estimate, 95% interval"),
        Line2D([], [], color=_WITHHELD_COLOR, linewidth=1.3, linestyle=(0, (2, 1)),
               label="withheld (too few rows or cases): interval only"),
    ]  # fmt: skip
    if band:
        handles.insert(1, Line2D([], [], color="0.3", alpha=0.35, linewidth=3.5, label="simultaneous band"))
    handles.extend(extra or [])
    width = fig.get_size_inches()[0]
    ncols = int(max(1, min(len(handles), width // 2.9)))  # ~2.9 in per entry at 6-8 pt
    fig.legend(handles=handles, loc="outside lower center", ncols=ncols, frameon=False, fontsize=7)


def _figure(n_rows: int, n_panels: int, ncols: int | None = None) -> tuple[Figure, np.ndarray]:
    ncols = ncols or n_panels
    nrows = int(np.ceil(n_panels / ncols))
    height = max(2.4, nrows * (0.6 + _ROW_H * n_rows) + _MARGIN_H)
    fig = Figure(figsize=(ncols * _PANEL_W + _LABEL_W, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, sharey=True, squeeze=False)
    for ax in axes.ravel()[n_panels:]:
        ax.set_visible(False)
    return fig, axes


def _draw_forest(ax, result: Any, *, metric: str, model: str, label_rows: bool) -> None:
    slices = result.slices[(result.slices["model"] == model) & (result.slices["metric"] == metric)]
    order = _slice_order(slices)
    colors = _family_colors(list(pd.unique(slices["attribute"])))
    has_band = bool(slices[["band_low", "band_high"]].notna().any().any())
    overall = slices[slices["slice"] == vocabulary.OVERALL]
    if len(overall) and np.isfinite(overall["estimate"].iloc[0]):
        ax.axvline(float(overall["estimate"].iloc[0]), color=_OVERALL_COLOR, linewidth=0.8, linestyle="--", zorder=0)
    _family_separators(ax, slices, order)
    _draw_rows(ax, slices, order=order, value="estimate", low="ci_low", high="ci_high",
               band=("band_low", "band_high") if has_band else None, colors=colors,
               reported=_reported_map(result, model, metric))  # fmt: skip
    ax.set_yticks(range(len(order)), labels=[_display_slice(s) for s in order] if label_rows else [])
    ax.set_title(figure_text(model))
    ax.set_xlabel(_metric_label(metric))


def _display_slice(name: str) -> str:
    return "Overall" if name == vocabulary.OVERALL else figure_text(name)


def plot_forest(result: Any, *, metric: str | None = None, model: str | None = None, ax=None) -> Figure:
    """Forest plot of one metric: every slice's estimate and interval, the overall value as a line.

    Parameters
    ----------
    result : AuditResult
        The audit (``result.slices``, ``docs/audit.md`` "Tables").
    metric : str, optional
        Metric name; default the first metric of the slices table.
    model : str, optional
        One model (score column); default every model, one panel each.
    ax : matplotlib.axes.Axes, optional
        Draw into this axes (then ``model`` defaults to the first model) and return its figure.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If ``metric`` or ``model`` is not in the audit.
    """
    metric = _check_metric(result.slices, metric, "slices")
    models = _models(result, model)
    if ax is not None:
        _draw_forest(ax, result, metric=metric, model=models[0], label_rows=True)
        return ax.figure
    n_slices = result.slices[result.slices["metric"] == metric]["slice"].nunique()
    with mpl.rc_context(_style()):
        fig, axes = _figure(n_slices, len(models))
        for j, name in enumerate(models):
            _draw_forest(axes[0, j], result, metric=metric, model=name, label_rows=j == 0)
        has_band = bool(result.slices[["band_low", "band_high"]].notna().any().any())
        overall = Line2D([], [], color=_OVERALL_COLOR, linewidth=0.8, linestyle="--", label="overall value")
        _legend(fig, band=has_band, min_group_size=result.options.min_group_size, extra=[overall])
        fig.suptitle(f"{vocabulary.METRIC_LABELS.get(metric, metric)} by slice")
    return fig


def _controlled_rows(result: Any, *, control: str, model: str, metric: str) -> pd.DataFrame:
    table = result.controlled
    return table[(table["control"] == control) & (table["model"] == model) & (table["metric"] == metric)]


def _draw_controlled(ax, result: Any, *, control: str, metric: str, model: str, label_rows: bool, order) -> None:
    rows = _controlled_rows(result, control=control, model=model, metric=metric)
    colors = _family_colors(list(pd.unique(result.slices["attribute"])))
    ax.axvline(0.0, color="0.35", linewidth=0.8, linestyle="--", zorder=0)
    _family_separators(ax, result.slices, order)
    _draw_rows(ax, rows, order=order, value="T_a", low="T_a_low", high="T_a_high", band=None, colors=colors,
               reported=_reported_map(result, model, metric))  # fmt: skip
    ax.set_yticks(range(len(order)), labels=[_display_slice(s) for s in order] if label_rows else [])
    ax.set_title(vocabulary.METRIC_LABELS.get(metric, metric))
    ax.set_xlabel("T_a = slice - M_a")


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
        Only this metric (one panel); default every metric of the controlled table (or ``metrics``).
    model : str, optional
        Default the first model (a ``T_a`` figure shows one model).
    metrics : sequence of str, optional
        Metrics to show, in this order.
    ax : matplotlib.axes.Axes, optional
        Draw one panel (``metric``, default the first) into this axes.

    Returns
    -------
    matplotlib.figure.Figure

    Raises
    ------
    ValueError
        If the control, metric or model is not in the audit.
    """
    table = result.controlled
    controls = list(pd.unique(table["control"]))
    if control not in controls:
        raise ValueError(f"control must be one of {controls} (the audit's controls); got {control!r}")
    name = _models(result, model)[0]
    rows = table[(table["control"] == control) & (table["model"] == name)]
    if metric is not None:
        chosen = [_check_metric(rows, metric, f"controlled, control {control}")]
    elif metrics is not None:
        chosen = [_check_metric(rows, m, f"controlled, control {control}") for m in metrics]
    else:
        chosen = list(pd.unique(rows["metric"]))
    if not chosen:
        raise ValueError(f"no controlled rows for control {control!r} and model {name!r}")
    order = [s for s in _slice_order(result.slices) if s != vocabulary.OVERALL and s in set(rows["slice"])]
    if ax is not None:
        _draw_controlled(ax, result, control=control, metric=chosen[0], model=name, label_rows=True, order=order)
        return ax.figure
    ncols = min(len(chosen), 3)
    with mpl.rc_context(_style()):
        fig, axes = _figure(len(order), len(chosen), ncols=ncols)
        for k, m in enumerate(chosen):
            _draw_controlled(axes.ravel()[k], result, control=control, metric=m, model=name,
                             label_rows=k % ncols == 0, order=order)  # fmt: skip
        _legend(fig, band=False, min_group_size=result.options.min_group_size)
        what = "no control (slice minus overall)" if control == "none" else f"control V = {control}"
        fig.suptitle(f"Controlled differences T_a, {what}, model {figure_text(name)}")
    return fig


def plot_result(result: Any, kind: str = "forest", *, metric=None, model=None, control=None, ax=None) -> Figure:
    """``AuditResult.plot``: ``kind="forest"`` (:func:`plot_forest`) or ``"controlled"`` (:func:`plot_controlled`)."""
    if kind == "forest":
        return plot_forest(result, metric=metric, model=model, ax=ax)
    if kind == "controlled":
        if control is None:
            controls = list(pd.unique(result.controlled["control"]))
            if not controls:
                raise ValueError("the audit has no controlled rows")
            control = controls[-1]
        return plot_controlled(result, control=control, metric=metric, model=model, ax=ax)
    raise ValueError(f"kind must be 'forest' or 'controlled'; got {kind!r}")


def figure_specs(result: Any) -> list[dict]:
    """The figures of an audit's output folder: name, kind, metric / control, title.

    A forest plot per metric (in the order of the options; every model a panel), a ``T_a`` plot per
    control (``controlled_<control>``; with several models, per control and model:
    ``controlled_<control>_<model>``, where a model name that is not a safe file name is replaced by
    :func:`.text.file_component`'s slug and hash).
    """
    specs = []
    metrics = [m for m in result.options.metrics if m in set(result.slices["metric"])]
    for metric in metrics:
        specs.append(dict(name=f"forest_{metric}", kind="forest", metric=metric, control=None,
                          title=f"Forest plot: {vocabulary.METRIC_LABELS.get(metric, metric)}"))  # fmt: skip
    controls = [c for c in result.options.controls if c in set(result.controlled["control"])]
    models = [m for m in _models(result, None) if m in set(result.controlled["model"])]
    # model names become part of file names: safe and distinct (text.file_component)
    hashed = len({m.lower() for m in models}) < len(models)
    stems = {m: file_component(m, always_hash=hashed) for m in models}
    for control in controls:
        what = "no control" if control == "none" else f"V = {control}"
        for model in models:
            # one figure per control; with several models one per control and model
            name = f"controlled_{control}" if len(models) == 1 else f"controlled_{control}_{stems[model]}"
            title = f"Controlled differences T_a, {what}" + (f", model {model}" if len(models) > 1 else "")
            specs.append(dict(name=name, kind="controlled", metric=None, control=control, model=model, title=title))
    return specs
