"""Figures of an audit: a forest plot per metric and a ``T_a`` plot per control variable.

- :func:`plot_forest`: every slice of one metric, top to bottom in the order of the slices table
  (overall, then each attribute, then the intersections), its estimate with the 95% interval (and
  the simultaneous band, lighter, when the audit computed one); the overall value is a dashed
  vertical line. Slices withheld for their size (``reported`` false) are drawn as an interval only,
  in grey, without a point. One panel per model (at most :data:`MAX_COLUMNS` side by side), all on
  the same x range.
- :func:`plot_controlled`: for one control variable ``V``, the controlled differences
  ``T_a = E[m | A = a] - M_a`` (paper section 4.2) of every slice with their intervals, one panel per
  metric (at most :data:`MAX_COLUMNS` side by side), a dashed line at 0. Withheld slices again show
  the interval only; slices left out of the control's weighted evaluation (see the audit's notes)
  keep their row, marked "not evaluated", so that every ``T_a`` figure of an audit has the same rows.

- :func:`plot_calibration`: for one family of slices (an attribute or an intersection), the
  calibration curve of every reported slice (mean predicted risk against the observed rate per score
  bin, with Wilson intervals) and the overall one (black, dashed), one panel per model, the diagonal
  dotted;
- :func:`plot_thresholds`: for one family and model, the selection rate, true positive rate and
  false positive rate of every reported slice across the thresholds of the option ``thresholds``
  (one line per slice, its interval shaded), one panel per rate.

These two are line figures: every slice of the family is named in the legend right of the panels,
``race=Black (n=3,175)``, withheld slices included (``withheld``, grey, without a line).

Labels. Left of the first panel of each row of panels, every slice row is labelled with its full
name and size, ``race=Black & sex=Female (n=482)`` (``withheld`` added, in grey, when the slice is
withheld in every panel of that row); every panel has a title (the model of a forest plot, the
metric of a ``T_a`` plot) and an x label; every figure a title naming the metric, or the control
and the model. Text is never parsed as mathtext (a ``$`` in a level stays a ``$``). The layout grows
with the content instead of squeezing it: the label column is as wide as the widest label (measured
with the font's glyph advances), the height follows the number of slices, and a label wider than
:data:`MAX_LABEL_INCHES` is wrapped at its `` & `` separators (then inside a part if one is still
too wide), never shortened: the full name is always in the figure.

Speed. The layout is computed directly in inches from measured text (no ``constrained_layout`` or
``tight_layout``, which lay each figure out again on every save) and cached per figure shape (every
forest plot of an audit shares one, and so do the ``T_a`` plots of one control); the rows are drawn
as a few line collections rather than one artist per interval, the labels and the legend as plain
text; glyphs are unhinted; the PNG is encoded by Pillow as RGB. :func:`start_rendering` renders the
figures in forked worker processes (Linux; elsewhere, or with one CPU, one after the other) while
the caller goes on. The output does not depend on where a figure was rendered: PNG and SVG bytes
are the same for the same audit (:func:`figure_bytes`).

Figures are :class:`matplotlib.figure.Figure` objects built without pyplot, in the house style of
:mod:`disaggregated_eval.plots` ("ticks" style, small fonts, colour-blind palette), so importing
or calling this module never changes global matplotlib settings.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import gc
import io
import multiprocessing
import os
import signal
import sys
import unicodedata
import warnings
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import ScaledTranslation, blended_transform_factory

from .. import vocabulary
from .text import file_component, terminal_text

__all__ = [
    "plot_forest",
    "plot_controlled",
    "plot_calibration",
    "plot_thresholds",
    "plot_result",
    "figure_specs",
    "figure_bytes",
    "render_figures",
    "start_rendering",
    "MAX_COLUMNS",
    "MAX_LABEL_INCHES",
]

#: Panels side by side before a ``T_a`` figure (or a forest plot of many models) starts a new row.
MAX_COLUMNS = 3
#: Widest slice label (inches) before it is wrapped onto several lines.
MAX_LABEL_INCHES = 5.0

_WITHHELD_COLOR = (0.62, 0.62, 0.62)
_OVERALL_COLOR = (0.15, 0.15, 0.15)
_LABEL_PT = 7.0  # slice labels (ytick.labelsize of the house style)
_LEGEND_PT = 7.0
_LINE = 1.22  # line spacing of multi-line labels, in font sizes
# Geometry, inches.
_ROW_H = 0.2  # per slice row (more when labels wrap)
_PANEL_W = 2.8  # data area of one panel
_TICK_PAD = 0.1  # tick mark and its pad, left of the labels
_GAP = 0.3  # between two panels side by side
_EDGE = 0.12  # outer margins
_SUPTITLE_H = 0.32
_TITLE_H = 0.24  # a panel's title
_XAXIS_H = 0.42  # x tick labels and the x label under a panel
_LEGEND_ROW_H = 0.19
_LEGEND_LINE = 0.3  # length of a legend entry's line
_PNG_DPI = 200
_MAX_PNG_PIXELS = 6e6  # larger figures get a lower PNG resolution (the SVG is exact at any size)
_MIN_PNG_DPI = 100
_MAX_RENDERERS = 8  # processes drawing figures at once, the caller included
_SVG_RC = {"svg.fonttype": "none", "svg.hashsalt": "disagg-eval"}


# ----------------------------------------------------------------------------------------------
# what a figure shows: plain data, built from the result with pandas, drawn without it
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Panel:
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
class _FigureData:
    """Everything :func:`_draw` needs; picklable, so a worker process can draw it."""

    title: str
    labels: tuple[str, ...]  # slice names, top to bottom
    family: np.ndarray  # (n_rows,) int: index into colors
    colors: tuple[tuple[float, float, float], ...]
    n: np.ndarray  # (n_rows,) int rows per slice
    separators: tuple[float, ...]  # y positions of the lines between families
    panels: tuple[_Panel, ...]
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


def _family_colors(attributes: Sequence[str]) -> dict[str, tuple]:
    from matplotlib.colors import to_rgb

    from disaggregated_eval.plots import COLORBLIND

    palette = [to_rgb(c) for c in COLORBLIND]
    colors, k = {}, 0
    for attribute in attributes:
        if attribute == vocabulary.OVERALL:
            colors[attribute] = _OVERALL_COLOR
        else:
            colors[attribute] = tuple(float(c) for c in palette[k % len(palette)])
            k += 1
    return colors


def _rows_frame(result: Any) -> tuple[list[str], dict[str, str], dict[str, int]]:
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
    indexed = rows.drop_duplicates("slice").set_index("slice").reindex(list(order))
    out = []
    for column in columns:
        if column is None:
            out.append(None)
        elif column == "reported":
            out.append(indexed[column].fillna(False).to_numpy(dtype=bool))
        else:
            out.append(indexed[column].to_numpy(dtype=float))
    have = set(rows["slice"])
    present = np.asarray([s in have for s in order], dtype=bool)
    return (*out, present)


def _forest_data(result: Any, *, metric: str, models: Sequence[str]) -> _FigureData:
    order, attribute, n = _rows_frame(result)
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
        panels.append(_Panel(title=terminal_text(model), xlabel=_metric_label(metric), value=est, low=lo, high=hi,
                             band_low=b_lo, band_high=b_hi, shown=shown, present=present, reference=reference))  # fmt: skip
    if not panels:
        raise ValueError(f"no slices rows for metric {metric!r} and model(s) {list(models)}")
    return _FigureData(
        title=f"{vocabulary.METRIC_LABELS.get(metric, metric)} by slice",
        **_frame_data(result, order, attribute, n),
        panels=tuple(panels),
        ncols=min(len(panels), MAX_COLUMNS),
        share_x=True,
        reference_label="overall value",
        missing_note="not computed",
    )


def _controlled_data(result: Any, *, control: str, model: str, metrics: Sequence[str]) -> _FigureData:
    order, attribute, n = _rows_frame(result)
    order = [s for s in order if s != vocabulary.OVERALL]
    table = result.controlled
    table = table[(table["control"] == control) & (table["model"] == model)]
    panels = []
    for metric in metrics:
        rows = table[table["metric"] == metric]
        est, lo, hi, shown, present = _aligned(rows, order, ["T_a", "T_a_low", "T_a_high", "reported"])
        panels.append(_Panel(title=vocabulary.METRIC_LABELS.get(metric, metric), xlabel="T_a = slice - M_a",
                             value=est, low=lo, high=hi, band_low=None, band_high=None, shown=shown,
                             present=present, reference=0.0))  # fmt: skip
    what = "no control (slice minus overall)" if control == "none" else f"control V = {control}"
    return _FigureData(
        title=f"Controlled differences T_a, {what}, model {terminal_text(model)}",
        **_frame_data(result, order, attribute, n),
        panels=tuple(panels),
        ncols=min(len(panels), MAX_COLUMNS),
        share_x=False,
        reference_label="T_a = 0 (no difference once re-weighted)",
        missing_note="not evaluated, see notes",
    )


# ----------------------------------------------------------------------------------------------
# measuring text and laying out a figure
# ----------------------------------------------------------------------------------------------
#: Fonts tried, in this order, for a character that the house fonts lack (CJK above all), after
#: them: matplotlib's font fallback draws each character with the first installed font that has it,
#: and :func:`_text_width` measures it with the same font. None of them is needed: a character that
#: no installed font has is drawn as the first font's box and measured without its glyph
#: (:func:`_missing_advance`), with a note naming it. Debian: ``apt-get install fonts-droid-fallback``.
FALLBACK_FONTS = ("Droid Sans Fallback", "Noto Sans CJK JP", "Noto Sans CJK SC", "WenQuanYi Micro Hei",
                  "WenQuanYi Zen Hei", "Unifont")  # fmt: skip


@functools.lru_cache(maxsize=8)
def _fonts(family: tuple[str, ...]) -> tuple[tuple[Any, ...], dict[tuple[str, float], float]]:
    """The fonts matplotlib draws text of ``font.family`` = ``family`` with, in its order (a generic
    name such as ``sans-serif`` is the one font matplotlib finds for it; absent fonts skipped), as
    FreeType faces, and a cache of advances by (character, size)."""
    from matplotlib.font_manager import FontProperties, findfont, get_font

    paths: list[str] = []
    for name in family:
        try:
            path = findfont(FontProperties(family=[name]), fallback_to_default=False)
        except ValueError:  # not installed
            continue
        if path not in paths:
            paths.append(path)
    if not paths:  # nothing of the list is installed: matplotlib's default font
        paths.append(findfont(FontProperties()))
    return tuple(get_font(p) for p in paths), {}


def _installed_fallbacks() -> list[str]:
    """The fonts of :data:`FALLBACK_FONTS` that matplotlib knows (a missing one must not be named in
    ``font.family``: matplotlib would log a warning for it on every text)."""
    from matplotlib import font_manager

    _learn_system_fonts()
    known = {f.name for f in font_manager.fontManager.ttflist}
    return [f for f in FALLBACK_FONTS if f in known]


_SYSTEM_FONTS_LEARNT: list[bool] = []  # not empty once _learn_system_fonts has run in this process


def _learn_system_fonts() -> bool:
    """Add to matplotlib's font list the system fonts it does not know yet (once per process): its
    cache is built when matplotlib first runs, so a font installed later (``apt-get install
    fonts-droid-fallback``) would stay unknown. Called by :func:`_style`, before any figure; about
    20 ms. Returns whether a font was added (always False after the first call)."""
    from matplotlib import font_manager

    if _SYSTEM_FONTS_LEARNT:
        return False
    _SYSTEM_FONTS_LEARNT.append(True)

    known = {os.path.realpath(f.fname) for f in font_manager.fontManager.ttflist}
    added = False
    for path in font_manager.findSystemFonts():
        if os.path.realpath(path) in known or not path.lower().endswith((".ttf", ".otf", ".ttc")):
            continue
        try:
            font_manager.fontManager.addfont(path)
        except (OSError, RuntimeError, ValueError):  # a file FreeType cannot read
            continue
        added = True
    return added


def _missing_advance(ch: str, notdef: float, size: float) -> float:
    """Advance (points) of a character that no installed font has: matplotlib draws the first font's
    box of width ``notdef``; a wide East Asian character is given a whole em, so that the estimate
    is never narrower than a glyph a reader's own font would draw there."""
    wide = unicodedata.east_asian_width(ch) in ("W", "F")
    return max(notdef, size if wide else 0.0)


def _char_advance(ch: str, size: float) -> tuple[float, bool]:
    """Advance of one character at ``size`` points, in points, and whether an installed font has it."""
    fonts, cache = _fonts(tuple(mpl.rcParams["font.family"]))
    key = (ch, size)
    if key in cache:
        width = cache[key]
        return abs(width), width >= 0
    code = ord(ch)
    for font in fonts:
        if font.get_char_index(code):
            font.set_size(size, 72)
            try:
                width = font.load_char(code).linearHoriAdvance / 65536.0
            except RuntimeError:  # a glyph FreeType cannot load: as if it were missing
                continue
            cache[key] = width
            return width, True
    fonts[0].set_size(size, 72)
    notdef = fonts[0].load_glyph(0).linearHoriAdvance / 65536.0
    width = _missing_advance(ch, notdef, size)
    cache[key] = -width  # negative: missing (every advance is >= 0)
    return width, False


def _text_width(text: str, size: float) -> float:
    """Width of one line of ``text`` at ``size`` points, in inches (sum of the glyph advances).

    Each character is measured with the font that draws it (the house fonts, then
    :data:`FALLBACK_FONTS`); a character that none of them has, with the estimate of
    :func:`_missing_advance`, so that no label can fail a figure. Kerning is ignored, which
    over-estimates by a point or two: labels never overlap the axes.
    """
    return sum(_char_advance(ch, size)[0] for ch in text) / 72.0


def missing_glyphs(texts: Sequence[str]) -> list[str]:
    """The distinct characters of ``texts`` that no installed font of the figures has, in order of
    first appearance (drawn as boxes; line breaks and spaces are not counted).

    Parameters
    ----------
    texts : sequence of str

    Returns
    -------
    list of str
    """
    seen: dict[str, None] = {}
    with mpl.rc_context(_style()):
        for text in texts:
            for ch in text:
                if ch not in seen and not ch.isspace() and not _char_advance(ch, _LABEL_PT)[1]:
                    seen[ch] = None
    return list(seen)


def _wrap(name: str, limit: float, size: float) -> list[str]:
    """``name`` on lines no wider than ``limit`` inches: at `` & `` first, inside a part if needed."""
    if _text_width(name, size) <= limit:
        return [name]
    parts = name.split(" & ")
    pieces = [p + " &" for p in parts[:-1]] + [parts[-1]]
    lines: list[str] = []
    for piece in pieces:
        if lines and _text_width(lines[-1] + " " + piece, size) <= limit:
            lines[-1] = lines[-1] + " " + piece
            continue
        while _text_width(piece, size) > limit and len(piece) > 1:  # a part too wide on its own: cut it
            cut = len(piece) - 1
            while cut > 1 and _text_width(piece[:cut], size) > limit:
                cut -= 1
            lines.append(piece[:cut])
            piece = piece[cut:]
        lines.append(piece)
    return lines


@dataclass(frozen=True)
class _Layout:
    size: tuple[float, float]  # inches
    rects: tuple[tuple[float, float, float, float], ...]  # per panel, figure fractions
    labels: tuple[tuple[str, ...], ...]  # per row of panels: the row labels, wrapped
    legend: tuple[tuple[float, float], ...]  # per legend entry: left end of its line, its baseline (inches)
    title_y: float


@functools.lru_cache(maxsize=64)
def _layout(labels: tuple[tuple[str, ...], ...], n_panels: int, ncols: int, legend: tuple[str, ...]) -> _Layout:
    """Figure size and panel positions for these row labels and panels (cached: reused per shape).

    ``labels`` holds the row labels of each row of panels. Horizontally: the label column (as wide
    as the widest label line) and ``ncols`` panels of :data:`_PANEL_W` inches; vertically: the
    title, then per row of panels a panel title, the slice rows (:data:`_ROW_H` inches each, more
    when labels wrap) and the x axis, then the legend (as many rows as its entries need).
    """
    wrapped = [[_wrap(text, MAX_LABEL_INCHES, _LABEL_PT) for text in row] for row in labels]
    lines = [line for row in wrapped for label in row for line in label]
    label_w = max((_text_width(line, _LABEL_PT) for line in lines), default=0.0)
    lines_per_row = max((len(label) for row in wrapped for label in row), default=1)
    row_h = max(_ROW_H, lines_per_row * _LINE * _LABEL_PT / 72 + 0.06)
    nrows = -(-n_panels // ncols)
    panel_h = max(len(row) for row in labels) * row_h + 0.1
    left = _EDGE + label_w + _TICK_PAD
    width = left + ncols * _PANEL_W + (ncols - 1) * _GAP + _EDGE
    # legend entries (a line, then its text) in rows centred under the panels, as many per row as fit
    entry_w = [_LEGEND_LINE + 0.08 + _text_width(t, _LEGEND_PT) + 0.3 for t in legend]
    legend_rows: list[list[int]] = [[]]
    for k, w in enumerate(entry_w):
        if legend_rows[-1] and sum(entry_w[i] for i in legend_rows[-1]) + w > width - 2 * _EDGE:
            legend_rows.append([])
        legend_rows[-1].append(k)
    legend_h = len(legend_rows) * _LEGEND_ROW_H + 0.08
    block_h = _TITLE_H + panel_h + _XAXIS_H
    height = _EDGE + _SUPTITLE_H + nrows * block_h + legend_h + _EDGE
    places = [(0.0, 0.0)] * len(legend)
    for r, row in enumerate(legend_rows):
        x = (width - sum(entry_w[i] for i in row) + 0.3) / 2
        for i in row:
            places[i] = (x, _EDGE + (len(legend_rows) - 1 - r + 0.5) * _LEGEND_ROW_H)
            x += entry_w[i]
    rects = []
    for k in range(n_panels):
        i, j = divmod(k, ncols)
        x = left + j * (_PANEL_W + _GAP)
        y = height - _EDGE - _SUPTITLE_H - i * block_h - _TITLE_H - panel_h
        rects.append((x / width, y / height, _PANEL_W / width, panel_h / height))
    return _Layout(
        size=(round(width, 3), round(height, 3)),
        rects=tuple(rects),
        labels=tuple(tuple("\n".join(label) for label in row) for row in wrapped),
        legend=tuple(places),
        title_y=1.0 - _EDGE / height,
    )


# ----------------------------------------------------------------------------------------------
# drawing
# ----------------------------------------------------------------------------------------------
def _row_labels(data: _FigureData, panels: Sequence[_Panel]) -> tuple[tuple[str, ...], tuple[bool, ...]]:
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


def _panel_rows(data: _FigureData) -> list[tuple[_Panel, ...]]:
    return [data.panels[i : i + data.ncols] for i in range(0, len(data.panels), data.ncols)]


def _legend_entries(data: _FigureData) -> list[tuple[str, dict[str, Any]]]:
    """The legend: (text, line style) per entry; drawn by :func:`_draw_legend` (a matplotlib Legend
    costs more to draw than all of a forest plot's intervals)."""
    entries = [("estimate, 95% interval", dict(color="0.3", marker="o", markersize=4, linewidth=1.3))]
    if any(p.band_low is not None for p in data.panels):
        entries.append(("simultaneous band", dict(color="0.3", alpha=0.35, linewidth=3.5)))
    entries.append(("withheld (too few rows or cases): interval only",
                    dict(color=_WITHHELD_COLOR, linewidth=1.3, linestyle=(0, (2, 1)))))  # fmt: skip
    if any(p.reference is not None for p in data.panels):
        color = _OVERALL_COLOR if data.share_x else "0.35"
        entries.append((data.reference_label, dict(color=color, linewidth=0.8, linestyle="--")))
    return entries


def _draw_legend(fig: Figure, entries: Sequence[tuple[str, dict]], places: Sequence[tuple[float, float]]) -> None:
    inches = fig.dpi_scale_trans
    for (text, style), (x, y) in zip(entries, places, strict=True):
        line = {k: v for k, v in style.items() if k not in ("marker", "markersize")}
        fig.add_artist(Line2D([x, x + _LEGEND_LINE], [y, y], transform=inches, **line))
        if "marker" in style:
            fig.add_artist(Line2D([x + _LEGEND_LINE / 2], [y], transform=inches, marker=style["marker"],
                                  markersize=style["markersize"], color=style["color"], linestyle=""))  # fmt: skip
        fig.text(x + _LEGEND_LINE + 0.08, y, text, transform=inches, va="center", ha="left", fontsize=_LEGEND_PT,
                 parse_math=False)  # fmt: skip


def _x_limits(panels: Sequence[_Panel]) -> tuple[float, float] | None:
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


def _draw_panel(ax, data: _FigureData, panel: _Panel, *, labels: tuple[Sequence[str], Sequence[bool]] | None,
                xlim: tuple[float, float] | None) -> None:  # fmt: skip
    """One panel: a few line collections (bands, intervals, withheld intervals), one point line per
    family, and, on the first panel of a row, the slice labels as text left of the axes."""
    n_rows = len(data.labels)
    y = np.arange(n_rows, dtype=float)
    colors = np.asarray(data.colors, dtype=float)[data.family] if n_rows else np.empty((0, 3))
    grey = np.asarray(_WITHHELD_COLOR)
    shown = panel.shown & panel.present
    for sep in data.separators:
        ax.axhline(sep, color="0.85", linewidth=0.6, zorder=0)
    if panel.reference is not None:
        ref_color = _OVERALL_COLOR if data.share_x else "0.35"
        ax.axvline(panel.reference, color=ref_color, linewidth=0.8, linestyle="--", zorder=0)
    if panel.band_low is not None:
        ok = np.isfinite(panel.band_low) & np.isfinite(panel.band_high) & panel.present
        if ok.any():
            band_colors = np.where(shown[ok, None], colors[ok], grey)
            ax.hlines(y[ok], panel.band_low[ok], panel.band_high[ok], colors=band_colors, alpha=0.35,
                      linewidth=3.5, zorder=1)  # fmt: skip
    ok = np.isfinite(panel.low) & np.isfinite(panel.high) & panel.present
    solid, dashed = ok & shown, ok & ~shown
    if solid.any():
        ax.hlines(y[solid], panel.low[solid], panel.high[solid], colors=colors[solid], linewidth=1.3, zorder=2)
    if dashed.any():
        ax.hlines(y[dashed], panel.low[dashed], panel.high[dashed], colors=[_WITHHELD_COLOR], linewidth=1.3,
                  linestyles=[(0, (2, 1))], zorder=2)  # fmt: skip
    points = shown & np.isfinite(panel.value)
    for k, color in enumerate(data.colors):
        mask = points & (data.family == k)
        if mask.any():
            ax.plot(panel.value[mask], y[mask], marker="o", markersize=4, color=color, linestyle="", zorder=3)
    ax.set_ylim(n_rows - 0.5, -0.5)
    ax.set_yticks([])
    if labels is not None:
        # Plain text rather than tick labels: as readable, and a fraction of the drawing cost.
        to_labels = blended_transform_factory(ax.transAxes, ax.transData) + ScaledTranslation(
            -_TICK_PAD, 0, ax.figure.dpi_scale_trans
        )
        for i, (text, muted) in enumerate(zip(*labels, strict=True)):
            ax.text(0.0, i, text, transform=to_labels, va="center", ha="right", fontsize=_LABEL_PT,
                    parse_math=False, color="0.45" if muted else "0.1", clip_on=False)  # fmt: skip
    ax.grid(False, axis="y")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # a few ticks: each tick label is drawn twice (PNG, SVG)
    if xlim is not None:
        ax.set_xlim(*xlim)
    ax.set_title(panel.title, parse_math=False)
    ax.set_xlabel(panel.xlabel, parse_math=False)


def _draw(data: _FigureData) -> Figure:
    """The figure of ``data`` (call under the house style's rc context)."""
    rows = [_row_labels(data, row) for row in _panel_rows(data)]
    entries = _legend_entries(data)
    layout = _layout(tuple(texts for texts, _ in rows), len(data.panels), data.ncols, tuple(t for t, _ in entries))
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


def _draw_one(ax, data: _FigureData) -> Figure:
    """The first panel of ``data`` into a caller's axes, with the slice labels."""
    panel = data.panels[0]
    texts, muted = _row_labels(data, [panel])
    wrapped = tuple("\n".join(_wrap(t, MAX_LABEL_INCHES, _LABEL_PT)) for t in texts)
    _draw_panel(ax, data, panel, labels=(wrapped, muted), xlim=_x_limits([panel]))
    return ax.figure


def _style() -> dict:
    """The house style, with unhinted glyphs: at 200 dpi hinting changes nothing visible and costs
    about a tenth of the drawing time (the SVG keeps text as text either way)."""
    from disaggregated_eval.plots import house_style

    style = house_style()
    family = list(style["font.family"])
    family += [f for f in _installed_fallbacks() if f not in family]  # matplotlib's font fallback
    return {**style, "font.family": family, "text.hinting": "no_hinting"}


# ----------------------------------------------------------------------------------------------
# public plotting functions
# ----------------------------------------------------------------------------------------------
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
    metric = _check_metric(result.slices, metric, "slices")
    models = _models(result, model)
    with mpl.rc_context(_style()):
        if ax is not None:
            return _draw_one(ax, _forest_data(result, metric=metric, models=models[:1]))
        return _draw(_forest_data(result, metric=metric, models=models))


def _controlled_metrics(result: Any, control: str, model: str, metric, metrics) -> list[str]:
    table = result.controlled
    rows = table[(table["control"] == control) & (table["model"] == model)]
    if metric is not None:
        return [_check_metric(rows, metric, f"controlled, control {control}")]
    if metrics is not None:
        return [_check_metric(rows, m, f"controlled, control {control}") for m in metrics]
    present = set(rows["metric"])
    chosen = [m for m in result.options.metrics if m in present] + [
        m for m in pd.unique(rows["metric"]) if m not in result.options.metrics
    ]
    if not chosen:
        raise ValueError(f"no controlled rows for control {control!r} and model {model!r}")
    return chosen


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
    name = _models(result, model)[0]
    chosen = _controlled_metrics(result, control, name, metric, metrics)
    with mpl.rc_context(_style()):
        if ax is not None:
            return _draw_one(ax, _controlled_data(result, control=control, model=name, metrics=chosen[:1]))
        return _draw(_controlled_data(result, control=control, model=name, metrics=chosen))


def plot_result(
    result: Any, kind: str = "forest", *, metric=None, model=None, control=None, ax=None, family=None
) -> Figure:
    """``AuditResult.plot``: ``kind="forest"`` (:func:`plot_forest`), ``"controlled"`` (:func:`plot_controlled`),
    ``"calibration"`` (:func:`plot_calibration`) or ``"thresholds"`` (:func:`plot_thresholds`)."""
    if kind == "calibration":
        return plot_calibration(result, family=family)
    if kind == "thresholds":
        return plot_thresholds(result, family=family, model=model)
    if kind == "forest":
        return plot_forest(result, metric=metric, model=model, ax=ax)
    if kind == "controlled":
        if control is None:
            controls = list(pd.unique(result.controlled["control"]))
            if not controls:
                raise ValueError("the audit has no controlled rows")
            control = controls[-1]
        return plot_controlled(result, control=control, metric=metric, model=model, ax=ax)
    raise ValueError(f"kind must be 'forest', 'controlled', 'calibration' or 'thresholds'; got {kind!r}")


def figure_specs(result: Any) -> list[dict]:
    """The figures of an audit's output folder: name, kind, metric / control, title.

    A forest plot per metric (in the order of the options; every model a panel), a ``T_a`` plot per
    control (``controlled_<control>``; with several models, per control and model:
    ``controlled_<control>_<model>``, where a model name that is not a safe file name is replaced by
    :func:`.text.file_component`'s slug and hash), a calibration figure per family of slices
    (``calibration_<family>``, attributes joined by ``_x_``: ``calibration_race_x_sex``) and, when the
    audit has a threshold analysis, a threshold figure per family (``thresholds_<family>``; with several
    models per family and model).
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
    families = [f for f in pd.unique(result.slices["attribute"]) if f != vocabulary.OVERALL]
    stems = _family_stems(families)
    calibration = getattr(result, "calibration", None)
    if calibration is not None and len(calibration):
        for family in families:
            specs.append(dict(name=f"calibration_{stems[family]}", kind="calibration", metric=None, control=None,
                              family=family, title=f"Calibration by slice: {family}"))  # fmt: skip
    thresholds = getattr(result, "thresholds", None)
    if thresholds is not None and len(thresholds):
        models = [m for m in _models(result, None) if m in set(thresholds["model"])]
        model_stems = {m: file_component(m, always_hash=len({x.lower() for x in models}) < len(models)) for m in models}
        for family in families:
            for model in models:
                name = f"thresholds_{stems[family]}" + (f"_{model_stems[model]}" if len(models) > 1 else "")
                title = f"Rates across thresholds by slice: {family}" + (f", model {model}" if len(models) > 1 else "")
                specs.append(dict(name=name, kind="thresholds", metric=None, control=None, family=family, model=model,
                                  title=title))  # fmt: skip
    return specs


def _family_stems(families: Sequence[str]) -> dict[str, str]:
    """File-name part of each family: attribute names joined by ``_x_`` (``race_x_sex``), made safe and
    distinct (:func:`.text.file_component`)."""
    plain = {f: "_x_".join(f.split(" & ")) for f in families}
    clash = len({v.lower() for v in plain.values()}) < len(plain)
    return {f: file_component(v, always_hash=clash) for f, v in plain.items()}


# ----------------------------------------------------------------------------------------------
# line figures: calibration and thresholds per family of slices
# ----------------------------------------------------------------------------------------------
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
class _LineFigureData:
    """Everything :func:`_draw_lines` needs; picklable (drawn in worker processes too)."""

    title: str
    entries: tuple[tuple[str, tuple[float, float, float], Any, bool], ...]  # label, colour, line style, muted
    panels: tuple[_LinePanel, ...]
    ncols: int


def _slice_styles(names: Sequence[str]) -> dict[str, tuple[tuple[float, float, float], Any]]:
    """Colour and line style of each slice of a family (colour-blind palette, then line styles); overall black."""
    from matplotlib.colors import to_rgb

    from disaggregated_eval.plots import COLORBLIND

    out, k = {}, 0
    for name in names:
        if name == vocabulary.OVERALL:
            out[name] = (_OVERALL_COLOR, (0, (3, 2)))
            continue
        color = tuple(float(c) for c in to_rgb(COLORBLIND[k % len(COLORBLIND)]))
        out[name] = (color, _LINE_STYLES[(k // len(COLORBLIND)) % len(_LINE_STYLES)])
        k += 1
    return out


def _family_entries(result: Any, family: str, reported: Mapping[str, bool]):
    """Legend entries of a family's line figure: overall, then every slice of the family in table order."""
    order, attribute, n = _rows_frame(result)
    names = [vocabulary.OVERALL] + [s for s in order if attribute[s] == family]
    if len(names) == 1:
        raise ValueError(f"family must be one of the audit's attributes or intersections; got {family!r}")
    styles = _slice_styles(names)
    entries = []
    for name in names:
        shown = bool(reported.get(name, False))
        text = f"{terminal_text(name)} (n={int(n[name]):,}" + (")" if shown else ", withheld)")
        color, style = styles[name]
        entries.append((text, color if shown else _WITHHELD_COLOR, style, not shown))
    return names, entries


def _calibration_data(result: Any, *, family: str) -> _LineFigureData:
    table = result.calibration
    if table is None or table.empty:
        raise ValueError("the audit has no calibration table (its models give hard 0/1 predictions)")
    table = table[(table["slice"] == vocabulary.OVERALL) | (table["attribute"] == family)]
    first = table.drop_duplicates("slice")
    names, entries = _family_entries(result, family, dict(zip(first["slice"], first["reported"], strict=True)))
    panels = []
    models = [m for m in _models(result, None) if m in set(table["model"])]
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
    return _LineFigureData(title=f"Calibration by slice: {terminal_text(family)} (observed rate per score bin, 95% "
                                 "Wilson intervals)", entries=tuple(entries), panels=tuple(panels),
                           ncols=min(len(panels), MAX_COLUMNS))  # fmt: skip


def _thresholds_data(result: Any, *, family: str, model: str) -> _LineFigureData:
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
    return _LineFigureData(title=f"Rates across thresholds by slice: {terminal_text(family)}, model "
                                 f"{terminal_text(model)} (95% Wilson intervals shaded)", entries=tuple(entries),
                           panels=tuple(panels), ncols=min(len(panels), MAX_COLUMNS))  # fmt: skip


def _draw_lines(data: _LineFigureData) -> Figure:
    """A line figure: panels in rows of ``ncols``, a legend column right of them naming every slice."""
    nrows = -(-len(data.panels) // data.ncols)
    legend_w = max(_text_width(text, _LEGEND_PT) for text, *_ in data.entries) + _LEGEND_LINE + 0.25
    y_label_w = 0.45
    block_h = _TITLE_H + _LINE_PANEL_H + _XAXIS_H
    panels_h = nrows * block_h
    legend_h = len(data.entries) * _LINE_LEGEND_ROW_H
    width = _EDGE + data.ncols * (y_label_w + _LINE_PANEL_W) + (data.ncols - 1) * 0.15 + 0.2 + legend_w + _EDGE
    title_pt = mpl.font_manager.FontProperties(size=mpl.rcParams["figure.titlesize"]).get_size_in_points()
    width = max(width, _text_width(data.title, title_pt) + 2 * _EDGE + 0.1)  # the title never leaves the figure
    height = _EDGE + _SUPTITLE_H + max(panels_h, legend_h) + _EDGE
    fig = Figure(figsize=(round(width, 3), round(height, 3)))
    top = height - _EDGE - _SUPTITLE_H
    for k, panel in enumerate(data.panels):
        i, j = divmod(k, data.ncols)
        x0 = _EDGE + y_label_w + j * (y_label_w + _LINE_PANEL_W + 0.15)
        y0 = top - i * block_h - _TITLE_H - _LINE_PANEL_H
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
    x_legend = width - _EDGE - legend_w + 0.1
    inches = fig.dpi_scale_trans
    for r, (text, color, style, muted) in enumerate(data.entries):
        y = top - (r + 0.5) * _LINE_LEGEND_ROW_H
        if not muted:
            fig.add_artist(Line2D([x_legend, x_legend + _LEGEND_LINE], [y, y], transform=inches, color=color,
                                  linestyle=style, linewidth=1.3))  # fmt: skip
        fig.text(x_legend + _LEGEND_LINE + 0.08, y, text, transform=inches, va="center", ha="left",
                 fontsize=_LEGEND_PT, parse_math=False, color="0.45" if muted else "0.1")  # fmt: skip
    fig.suptitle(data.title, y=1.0 - _EDGE / height, va="top", parse_math=False)
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
    with mpl.rc_context(_style()):
        return _draw_lines(_calibration_data(result, family=family))


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
    name = _models(result, model)[0]
    with mpl.rc_context(_style()):
        return _draw_lines(_thresholds_data(result, family=family, model=name))


# ----------------------------------------------------------------------------------------------
# rendering to bytes, in parallel
# ----------------------------------------------------------------------------------------------
def _png_dpi(width: float, height: float) -> int:
    """200 dpi; less for large figures, down to 100 dpi, so that a PNG has at most 6 million pixels."""
    if width * height * _PNG_DPI**2 <= _MAX_PNG_PIXELS:
        return _PNG_DPI
    return max(_MIN_PNG_DPI, int((_MAX_PNG_PIXELS / (width * height)) ** 0.5))


def _png(fig: Figure, dpi: int) -> bytes:
    """The figure drawn by Agg at ``dpi`` and written by Pillow as an RGB PNG (compression level 3).

    What ``savefig(format="png")`` does, minus the alpha channel (the figure is opaque) and with a
    lighter compression: 40% less time and smaller files than matplotlib's RGBA at level 6.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image, PngImagePlugin

    canvas = FigureCanvasAgg(fig)
    original = fig.dpi
    fig.dpi = dpi
    try:
        canvas.draw()
        image = Image.fromarray(np.asarray(canvas.buffer_rgba())).convert("RGB")
    finally:
        fig.dpi = original
    info = PngImagePlugin.PngInfo()
    info.add_text("Software", f"Matplotlib version{mpl.__version__}, https://matplotlib.org/")
    out = io.BytesIO()
    image.save(out, format="png", compress_level=3, dpi=(dpi, dpi), pnginfo=info)
    return out.getvalue()


def figure_bytes(fig: Figure, *, dpi: int | None = None) -> dict[str, bytes]:
    """``{"png": ..., "svg": ...}``: the figure as PNG and SVG, both byte-reproducible.

    The PNG is 200 dpi (``dpi``; by default lower for a figure that would exceed 6 million pixels,
    down to 100 dpi: drawing and compressing pixels is most of the cost of a large figure), RGB,
    with no date in its metadata. The SVG keeps text as ``<text>`` elements (smaller, sharp,
    searchable, and readable back by tests) with a fixed id salt and no date, so the same figure
    gives the same bytes in any process.
    """
    width, height = fig.get_size_inches()
    out = {"png": _png(fig, dpi or _png_dpi(width, height))}
    svg = io.BytesIO()
    with mpl.rc_context(_SVG_RC):
        fig.savefig(svg, format="svg", metadata={"Date": None})
    out["svg"] = svg.getvalue()
    return out


def _figure_data(result: Any, spec: Mapping[str, Any]) -> _FigureData | _LineFigureData:
    if spec["kind"] == "forest":
        return _forest_data(result, metric=spec["metric"], models=_models(result, None))
    if spec["kind"] == "calibration":
        return _calibration_data(result, family=spec["family"])
    if spec["kind"] == "thresholds":
        return _thresholds_data(result, family=spec["family"], model=spec["model"])
    metrics = _controlled_metrics(result, spec["control"], spec["model"], None, None)
    return _controlled_data(result, control=spec["control"], model=spec["model"], metrics=metrics)


def _render(data: _FigureData | _LineFigureData, rc: Mapping[str, Any]) -> tuple[tuple[float, float], dict[str, bytes]]:
    """Draw and save one figure (in this process or a worker): its size in inches and its bytes.

    A character that no installed font has is drawn as a box; matplotlib's warning about it is
    silenced here (one per character and figure), :meth:`_Rendering.notes` names it once."""
    with mpl.rc_context(rc), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Glyph \d+ .*missing from font", category=UserWarning)
        fig = _draw_lines(data) if isinstance(data, _LineFigureData) else _draw(data)
        width, height = fig.get_size_inches()
        return (float(width), float(height)), figure_bytes(fig)


def _cost(data: _FigureData | _LineFigureData) -> int:
    if isinstance(data, _LineFigureData):
        return len(data.panels) * max(len(data.entries), 1)
    return len(data.panels) * max(len(data.labels), 1)


def _renderers(n_figures: int, n_jobs: int | None) -> int:
    """Processes drawing figures, the caller included: ``n_jobs``, default the CPUs this process may
    use; at most one per figure and 8."""
    if n_jobs is not None:
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
            raise ValueError(f"n_jobs must be a positive number of processes or None; got {n_jobs!r}")
        wanted = n_jobs
    else:
        try:
            wanted = len(os.sched_getaffinity(0))
        except AttributeError:  # pragma: no cover (not Linux)
            wanted = os.cpu_count() or 1
    wanted = min(wanted, n_figures, _MAX_RENDERERS)
    # Workers are forked (fast: matplotlib is already imported and nothing is pickled but the
    # figures' data): only on Linux, and never from a daemonic process, which cannot have children.
    if wanted < 2 or not sys.platform.startswith("linux") or multiprocessing.current_process().daemon:
        return 1
    return wanted


_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_SHOW_GLYPHS = 5  # characters named by the note on missing glyphs


def _first_line(text: str, limit: int = 200) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


def _texts(data: _FigureData | _LineFigureData) -> list[str]:
    """The data-derived text of a figure as it is drawn: its title and slice labels (or legend entries),
    with control characters escaped (:func:`.text.terminal_text`, as the figures draw them)."""
    if isinstance(data, _LineFigureData):
        texts = [data.title, *(entry[0] for entry in data.entries)]
    else:
        texts = [data.title, *data.labels, *(panel.title for panel in data.panels)]
    return [terminal_text(t) for t in texts]


def _close_fonts() -> None:
    """Close the font files this process holds open, before it forks renderers.

    matplotlib keeps each font it has used open (``font_manager._get_font``'s cache). A forked
    child shares every open file's offset with its parent, so parent and child drawing text at once
    can read each other's glyph bytes (FreeType's "invalid outline"). With no font open at the
    fork, each process opens its own files.
    """
    from matplotlib import font_manager

    _fonts.cache_clear()
    clear = getattr(getattr(font_manager, "_get_font", None), "cache_clear", None)
    if clear is not None:
        clear()
        gc.collect()  # the cached FT2Font objects close their files when collected


def _init_worker(parent: int) -> None:
    """Worker initializer: Ctrl-C is the caller's to handle (it stops the workers), not each worker's;
    and a worker dies with its parent.

    A parent killed with SIGKILL runs no cleanup, and a worker waiting for its next figure would
    wait for ever (the other workers hold the pipe open). On Linux the kernel sends the worker
    SIGKILL when the parent dies (``prctl(PR_SET_PDEATHSIG)``); a parent that died before that call
    is seen by its pid having changed.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


class _Rendering:
    """Figures being rendered (:func:`start_rendering`); :meth:`result` waits for them."""

    def __init__(self, result: Any, n_jobs: int | None) -> None:
        self._specs = figure_specs(result)
        self._data = [_figure_data(result, spec) for spec in self._specs]
        # before the style and any fork: the fonts learnt here (_learn_system_fonts) are then used
        self._missing = missing_glyphs([t for data in self._data for t in _texts(data)])
        self._rc = _style()
        self._pool: ProcessPoolExecutor | None = None
        self._futures: dict[int, Future] = {}
        self._failed: dict[str, str] = {}
        renderers = _renderers(len(self._specs), n_jobs)
        if renderers > 1:
            _close_fonts()
            with warnings.catch_warnings():
                # Python >= 3.12 warns that forking a process with threads may deadlock the child;
                # the children only draw with Agg and never touch the parent's thread pools or locks.
                warnings.filterwarnings("ignore", message=r".*fork\(\) may lead to deadlocks.*")
                self._pool = ProcessPoolExecutor(renderers - 1, mp_context=multiprocessing.get_context("fork"),
                                                 initializer=_init_worker, initargs=(os.getpid(),))  # fmt: skip
                # largest first, so that no worker starts a long figure last
                for k in sorted(range(len(self._data)), key=lambda k: -_cost(self._data[k])):
                    self._futures[k] = self._pool.submit(_render, self._data[k], self._rc)

    def result(self) -> dict[str, tuple[dict, dict[str, bytes]]]:
        """Every figure, ``name -> (spec, {"png": bytes, "svg": bytes})``, in the order of :func:`figure_specs`.

        The caller draws too: it takes the figures no worker has started, smallest first.
        """
        done: dict[int, tuple[tuple[float, float], dict[str, bytes]] | None] = {}

        def draw_here(k: int) -> None:
            try:
                done[k] = _render(self._data[k], self._rc)
            except Exception as exc:  # a figure never fails the audit: it is left out, with a note
                self._failed[self._specs[k]["name"]] = f"{type(exc).__name__}: {exc}"
                done[k] = None

        try:
            for k in sorted(self._futures, key=lambda k: _cost(self._data[k])):
                if self._futures[k].cancel():
                    draw_here(k)
            for k in range(len(self._specs)):
                if k in done:
                    continue
                if k not in self._futures:
                    draw_here(k)
                    continue
                try:
                    done[k] = self._futures[k].result()
                except Exception as exc:  # raised in the worker (a broken pool included)
                    self._failed[self._specs[k]["name"]] = f"{type(exc).__name__}: {exc}"
                    done[k] = None
        except BaseException:
            self.close(abort=True)
            raise
        self.close()
        out = {}
        for k, spec in enumerate(self._specs):
            if done[k] is None:
                continue
            (width, height), images = done[k]
            out[spec["name"]] = ({**spec, "width_in": width, "height_in": height}, images)
        return out

    def notes(self) -> list[str]:
        """Notes on the figures, after :meth:`result`: each figure that could not be drawn (left out of
        the folder and the report, the tables unaffected), and the characters drawn as boxes."""
        notes = [
            f"figure {name} could not be drawn and is left out (the tables are complete): {_first_line(error)}"
            for name, error in self._failed.items()
        ]
        missing = self._missing
        if missing:
            shown = ", ".join(f"{ch!r} (U+{ord(ch):04X})" for ch in missing[:_SHOW_GLYPHS])
            more = f" and {len(missing) - _SHOW_GLYPHS} more" if len(missing) > _SHOW_GLYPHS else ""
            notes.append(
                f"figures: no installed font has a glyph for {shown}{more}; the figures draw a box in its place "
                f"(the tables and the report's text keep every character); a font with it, such as Debian's "
                f"fonts-droid-fallback for CJK, draws it"
            )
        return notes

    def close(self, *, abort: bool = False) -> None:
        """Stop the workers: figures not started are cancelled; those being drawn are waited for, or,
        with ``abort`` (the caller failed or was interrupted), the workers are terminated at once."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if abort:
            terminate = getattr(pool, "terminate_workers", None)  # Python >= 3.14
            if terminate is not None:
                terminate()
            else:  # the workers (before shutdown, which forgets them)
                for process in list((getattr(pool, "_processes", None) or {}).values()):
                    process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> _Rendering:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        self.close(abort=exc_type is not None)


def start_rendering(result: Any, *, n_jobs: int | None = None) -> _Rendering:
    """Start rendering every figure of the audit; ``.result()`` returns them as :func:`render_figures` does.

    With ``n_jobs`` (default: the CPUs this process may use, ``os.sched_getaffinity``, at most 8)
    above 1 on Linux, ``n_jobs - 1`` forked worker processes start drawing at once, while the caller goes on
    (e.g. writing the tables); :meth:`result` then draws the figures no worker has started yet in the
    caller. Use it as a context manager so that the workers stop if the caller fails.

    Raises
    ------
    ValueError
        If ``n_jobs`` is not a positive integer or None.
    """
    return _Rendering(result, n_jobs)


def render_figures(result: Any, *, n_jobs: int | None = None) -> dict[str, tuple[dict, dict[str, bytes]]]:
    """Every figure of the audit (:func:`figure_specs`) as ``name -> (spec, {"png": bytes, "svg": bytes})``.

    ``spec`` gains the figure's ``width_in`` and ``height_in``. The figures are rendered in parallel
    (see :func:`start_rendering`); the bytes do not depend on ``n_jobs``.

    Raises
    ------
    ValueError
        If ``n_jobs`` is not a positive integer or None.
    """
    with start_rendering(result, n_jobs=n_jobs) as rendering:
        return rendering.result()
