"""What an audit's figure shows, as plain data built from the result's tables with pandas.

:class:`FigureData` (panels of rows: a label, an estimate, an interval and a band per slice) for a
forest plot (:func:`forest_figure_data`: every slice of one metric, one panel per model) and a ``T_a``
plot (:func:`controlled_figure_data`: the controlled differences of one control variable, one panel per
metric); the drawing (:mod:`.forest_figures`) and the renderer's worker processes
(:mod:`.figure_rendering`) take it without the result or pandas. Also the colours of the families of
slices, and of the overall and withheld rows (from :mod:`disaggregated_eval.plots`, the drawing's
home), shared with the line figures (:mod:`.line_figures`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import vocabulary
from ..plots import OVERALL_COLOR, WITHHELD_COLOR, palette
from .text import terminal_text

__all__ = [
    "MAX_COLUMNS",
    "WITHHELD_COLOR",
    "OVERALL_COLOR",
    "rgb_palette",
    "Panel",
    "FigureData",
    "result_models",
    "check_figure_metric",
    "slice_rows",
    "forest_figure_data",
    "controlled_figure_data",
    "controlled_figure_metrics",
]


#: Panels side by side before a ``T_a`` figure (or a forest plot of many models) starts a new row.
MAX_COLUMNS = 3


@dataclass(frozen=True)
class Panel:
    """One panel: a value, an interval (and optionally a band) per slice row, in the figure's row order."""

    title: str
    xlabel: str
    value: np.ndarray  # (n_rows,) float; NaN = no point
    low: np.ndarray
    high: np.ndarray
    band_low: np.ndarray | None  # (n_rows,) or None
    band_high: np.ndarray | None
    shown: np.ndarray  # (n_rows,) bool: reported (a point may be drawn)
    present: np.ndarray  # (n_rows,) bool: the panel has a row for this slice
    reference: float | None  # dashed vertical line (overall value, or 0)


@dataclass(frozen=True)
class FigureData:
    """Everything :func:`draw_forest` needs; picklable, so a worker process can draw it."""

    title: str
    labels: tuple[str, ...]  # slice names, top to bottom
    family: np.ndarray  # (n_rows,) int: index into colors
    colors: tuple[tuple[float, float, float], ...]
    n: np.ndarray  # (n_rows,) int rows per slice
    separators: tuple[float, ...]  # y positions of the lines between families
    panels: tuple[Panel, ...]
    ncols: int
    share_x: bool
    reference_label: str  # legend text of the dashed line
    missing_note: str  # label note of a slice without a row in any panel of a row


def _metric_label(metric: str) -> str:
    label = vocabulary.METRIC_LABELS.get(metric, metric)
    better = vocabulary.METRIC_HIGHER_IS_BETTER.get(metric)
    if better is True:
        return f"{label} (higher is better)"
    if better is False:
        return f"{label} (lower is better)"
    return label


def result_models(result: Any, model: str | None) -> list[str]:
    models = list(result.options.scores) or list(pd.unique(result.slices["model"]))
    if model is None:
        return models
    if model not in models:
        raise ValueError(f"model must be one of {models}; got {model!r}")
    return [model]


def check_figure_metric(table: pd.DataFrame, metric: str | None, what: str) -> str:
    available = list(pd.unique(table["metric"]))
    if metric is None:
        if not available:
            raise ValueError(f"the audit has no {what} rows to plot")
        return available[0]
    if metric not in available:
        raise ValueError(f"metric must be one of {available} ({what}); got {metric!r}")
    return metric


def rgb_palette(levels: Sequence[str]) -> list[tuple[float, float, float]]:
    """:func:`disaggregated_eval.plots.palette` of ``levels`` as plain RGB tuples of floats."""
    from matplotlib.colors import to_rgb

    return [tuple(float(c) for c in to_rgb(color)) for color in palette(levels)]


def _family_colors(attributes: Sequence[str]) -> dict[str, tuple]:
    return dict(zip(attributes, rgb_palette(attributes), strict=True))


def slice_rows(result: Any) -> tuple[list[str], dict[str, str], dict[str, int]]:
    """Slice order (as in the slices table), each slice's family and its rows ``n``."""
    table = result.slices
    first = table.drop_duplicates("slice")
    order = list(first["slice"])
    return (
        order,
        dict(zip(first["slice"], first["attribute"], strict=True)),
        dict(zip(first["slice"], first["n"].astype(int), strict=True)),
    )


def _frame_data(result: Any, order: list[str], attribute: Mapping[str, str], n: Mapping[str, int]) -> dict:
    families = list(dict.fromkeys(attribute[s] for s in order))
    palette = _family_colors(list(dict.fromkeys(attribute.values())))
    separators = tuple(i - 0.5 for i in range(1, len(order)) if attribute[order[i]] != attribute[order[i - 1]])
    return dict(
        labels=tuple(order),
        family=np.array([families.index(attribute[s]) for s in order], dtype=np.int64),
        colors=tuple(palette[f] for f in families),
        n=np.array([n[s] for s in order], dtype=np.int64),
        separators=separators,
    )


def _aligned(rows: pd.DataFrame, order: Sequence[str], columns: Sequence[str | None]) -> tuple[np.ndarray, ...]:
    """Columns of ``rows`` (one row per slice) in ``order``; NaN / False where a slice has no row."""
    unique = rows.drop_duplicates("slice").set_index("slice")
    out = []
    for column in columns:
        if column is None:
            out.append(None)
        elif column == "reported":  # filled while reindexing: a fill of NaN would make it object first
            out.append(unique[column].reindex(list(order), fill_value=False).to_numpy(dtype=bool))
        else:
            out.append(unique[column].reindex(list(order)).to_numpy(dtype=float))
    have = set(rows["slice"])
    present = np.asarray([s in have for s in order], dtype=bool)
    return (*out, present)


def forest_figure_data(result: Any, *, metric: str, models: Sequence[str]) -> FigureData:
    order, attribute, n = slice_rows(result)
    table = result.slices[result.slices["metric"] == metric]
    has_band = bool(table[["band_low", "band_high"]].notna().any().any())
    panels = []
    for model in models:
        rows = table[table["model"] == model]
        if rows.empty:  # a model of hard predictions has no score metrics
            continue
        est, lo, hi, b_lo, b_hi, shown, present = _aligned(
            rows, order, ["estimate", "ci_low", "ci_high", "band_low" if has_band else None,
                          "band_high" if has_band else None, "reported"]
        )  # fmt: skip
        overall = rows.loc[rows["slice"] == vocabulary.OVERALL, "estimate"]
        reference = float(overall.iloc[0]) if len(overall) and np.isfinite(overall.iloc[0]) else None
        panels.append(Panel(title=terminal_text(model), xlabel=_metric_label(metric), value=est, low=lo, high=hi,
                             band_low=b_lo, band_high=b_hi, shown=shown, present=present, reference=reference))  # fmt: skip
    if not panels:
        raise ValueError(f"no slices rows for metric {metric!r} and model(s) {list(models)}")
    return FigureData(
        title=f"{vocabulary.METRIC_LABELS.get(metric, metric)} by slice",
        **_frame_data(result, order, attribute, n),
        panels=tuple(panels),
        ncols=min(len(panels), MAX_COLUMNS),
        share_x=True,
        reference_label="overall value",
        missing_note="not computed",
    )


def controlled_figure_data(result: Any, *, control: str, model: str, metrics: Sequence[str]) -> FigureData:
    order, attribute, n = slice_rows(result)
    order = [s for s in order if s != vocabulary.OVERALL]
    table = result.controlled
    table = table[(table["control"] == control) & (table["model"] == model)]
    panels = []
    for metric in metrics:
        rows = table[table["metric"] == metric]
        est, lo, hi, shown, present = _aligned(rows, order, ["T_a", "T_a_low", "T_a_high", "reported"])
        panels.append(Panel(title=vocabulary.METRIC_LABELS.get(metric, metric), xlabel="T_a = slice - M_a",
                             value=est, low=lo, high=hi, band_low=None, band_high=None, shown=shown,
                             present=present, reference=0.0))  # fmt: skip
    what = "no control (slice minus overall)" if control == "none" else f"control V = {control}"
    return FigureData(
        title=f"Controlled differences T_a, {what}, model {terminal_text(model)}",
        **_frame_data(result, order, attribute, n),
        panels=tuple(panels),
        ncols=min(len(panels), MAX_COLUMNS),
        share_x=False,
        reference_label="T_a = 0 (no difference once re-weighted)",
        missing_note="not evaluated, see notes",
    )


def controlled_figure_metrics(result: Any, control: str, model: str, metric, metrics) -> list[str]:
    table = result.controlled
    rows = table[(table["control"] == control) & (table["model"] == model)]
    if metric is not None:
        return [check_figure_metric(rows, metric, f"controlled, control {control}")]
    if metrics is not None:
        return [check_figure_metric(rows, m, f"controlled, control {control}") for m in metrics]
    present = set(rows["metric"])
    chosen = [m for m in result.options.metrics if m in present] + [
        m for m in pd.unique(rows["metric"]) if m not in result.options.metrics
    ]
    if not chosen:
        raise ValueError(f"no controlled rows for control {control!r} and model {model!r}")
    return chosen
