"""The paper's figures from the tidy tables (paper Figure 1, Supplementary Figures B1-B40; ``docs/design.md``).

Every plotting function takes a tidy table positionally and everything else keyword-only, checks
that the table has rows for every requested metric, model and dataset (``ValueError`` naming the
missing ones otherwise), draws a grid of small panels, writes it to every path in ``paths`` with
:func:`save_figure` and returns the written paths. A dataset is a simulation setting or an ACS task
(column ``dataset`` of the tables).

Figures are built with :class:`matplotlib.figure.Figure` directly (no pyplot state, no display; the
Agg renderer writes the PNG) under a local style context, so importing or calling this module never
changes global matplotlib settings. Names and display labels come from
:mod:`disaggregated_eval.vocabulary` (no computational module is imported); the module needs
matplotlib, numpy and pandas only.

How estimates are drawn (every figure from a tidy metrics table): the interval is a line with caps at
both ends, drawn over a small filled marker at the estimate, so that an interval shorter than the
marker still shows where it ends (and whether it covers 0). An estimate whose ``caveat`` column says
``"degenerate"`` (every bootstrap resample gave one value: the "interval" is a point) is a hollow
marker without an interval; one that says ``"undefined"`` (no estimate, e.g. the precision of a
model that predicts no positive) is a hollow marker at the panel's left edge. Neither is ever drawn as
an ordinary estimate; the legend says so when a figure has such cells. These rows are drawn by
:func:`draw_interval_rows`, the one drawing of estimates with horizontal intervals, which the audit's
forest and ``T_a`` plots use too (in their own :class:`IntervalStyle`: larger points over capless
intervals, a lighter simultaneous band, withheld rows as a grey dashed interval without a point).

========================================  ======================================================
paper item                                function
========================================  ======================================================
Figure 1, B4-B10, B27-B33                 :func:`plot_controlled_differences` (``T_a``)
B11-B17, B34-B40                          :func:`plot_weighted_population` (``M_a``)
B18-B24                                   :func:`plot_shared_space` (Cai et al. weights)
B1, B25                                   :func:`plot_relative_performance`
B2, B3, B26                               :func:`plot_calibration_curves`
========================================  ======================================================
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator
from matplotlib.transforms import ScaledTranslation

from disaggregated_eval import vocabulary
from disaggregated_eval.io import atomic_path

__all__ = [
    "DATASET_LABELS",
    "house_style",
    "SETTING_LABELS",
    "MODEL_LABELS",
    "CONTROL_LABELS",
    "METRIC_LABELS",
    "COLORBLIND",
    "OKABE_ITO",
    "OVERALL_COLOR",
    "palette",
    "WITHHELD_COLOR",
    "CAVEAT_LEGEND",
    "EXCLUDES_ZERO",
    "IntervalStyle",
    "draw_interval_rows",
    "save_figure",
    "plot_controlled_differences",
    "plot_weighted_population",
    "plot_shared_space",
    "shared_space_title",
    "plot_relative_performance",
    "plot_calibration_curves",
    "plot_coverage",
    "plot_selection_bounds",
]

#: Display names of simulation settings and ACS tasks (paper Table 1, Supplementary A.4).
DATASET_LABELS: dict[str, str] = vocabulary.DATASET_LABELS
#: The same mapping under its earlier name.
SETTING_LABELS: dict[str, str] = DATASET_LABELS
#: Display names of model types.
MODEL_LABELS: dict[str, str] = vocabulary.MODEL_LABELS
#: Display names of control variables ``V``.
CONTROL_LABELS: dict[str, str] = vocabulary.CONTROL_LABELS
#: Display names of metrics.
METRIC_LABELS: dict[str, str] = vocabulary.METRIC_LABELS

_CONTROLS = vocabulary.CONTROLS
_OVERALL = vocabulary.OVERALL
_METRIC_COLUMNS = (
    "dataset", "model", "comparison", "control", "weight_source", "group", "metric",
    "estimate", "ci_low", "ci_high",
)  # fmt: skip
_CALIBRATION_COLUMNS = (
    "dataset", "model", "group", "mean_score", "fraction_positive", "ci_low", "ci_high",
)  # fmt: skip
_DPI = 200
_SAVE_METADATA = {"png": {}, "pdf": {"CreationDate": None}}  # reproducible PDF bytes
_MARKERS = ("o", "s", "D", "^", "v", "P", "X", "p", "<", ">")
#: Colour of the overall population's rows and lines (study and audit).
OVERALL_COLOR: tuple[float, float, float] = (0.15, 0.15, 0.15)
#: Colour of a withheld row (an estimate not reported, e.g. a slice with too few rows): the audit's figures.
WITHHELD_COLOR: tuple[float, float, float] = (0.62, 0.62, 0.62)
#: Colour-blind-safe palette of the groups and models (the ten colours of seaborn's "colorblind").
COLORBLIND: tuple[str, ...] = (
    "#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#fbafe4", "#949494", "#ece133", "#56b4e9",
)  # fmt: skip
#: Okabe-Ito colours (Okabe & Ito 2008, "Color Universal Design"), yellow last (faint on white): seven
#: datasets stay apart for every common colour-vision deficiency (the coverage figure).
OKABE_ITO: tuple[str, ...] = ("#000000", "#e69f00", "#56b4e9", "#009e73", "#0072b2", "#d55e00", "#cc79a7", "#f0e442")
#: Values of the tidy tables' ``caveat`` column that are not ordinary estimates, and how they are drawn.
CAVEAT_LEGEND: dict[str, str] = {
    vocabulary.CAVEAT_DEGENERATE: "hollow: degenerate (every resample one value, no interval)",
    vocabulary.CAVEAT_UNDEFINED: "hollow at the left edge: undefined (no estimate)",
}
#: Legend text of the star that marks an interval excluding 0 in the ``T_a`` figures.
EXCLUDES_ZERO = "star: the interval excludes 0"

# Panel geometry, inches.
_PANEL_W = 3.0
_PANEL_H_MIN = 2.5
_CAL_PANEL = 2.6
_MARGIN_W = 1.8  # y tick labels and row label
_MARGIN_H = 1.1  # column titles, x label and the legend below the grid


def house_style() -> dict:
    """The house style: matplotlib rc parameters used while building and saving every figure of the
    study and of the audit (white "ticks" style, small fonts); use with :func:`matplotlib.rc_context`."""
    return {
        "figure.facecolor": "white",
        "axes.facecolor": "white",
        "axes.edgecolor": ".15",
        "axes.labelcolor": ".15",
        "axes.axisbelow": True,
        "text.color": ".15",
        "xtick.color": ".15",
        "ytick.color": ".15",
        "xtick.direction": "out",
        "ytick.direction": "out",
        "xtick.top": False,
        "ytick.right": False,
        "font.family": ["sans-serif"],
        "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans", "sans-serif"],
        "lines.solid_capstyle": "butt",  # an interval ends where its value does
        "patch.edgecolor": "w",
        "patch.force_edgecolor": True,
        "font.size": 8,
        "axes.titlesize": 9,
        "axes.labelsize": 8,
        "xtick.labelsize": 7,
        "ytick.labelsize": 7,
        "legend.fontsize": 8,
        "legend.title_fontsize": 8,
        "axes.grid": True,
        "axes.grid.axis": "x",
        "grid.color": "0.9",
        "grid.linestyle": "-",
        "grid.linewidth": 0.6,
        "pdf.fonttype": 42,  # embed TrueType, editable text in the PDF
        "svg.fonttype": "none",
    }


# --------------------------------------------------------------------------------------------------
# saving
# --------------------------------------------------------------------------------------------------
def _check_paths(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    targets = [Path(p) for p in paths]
    if not targets:
        raise ValueError("paths must name at least one .png or .pdf file")
    for target in targets:
        if any(ch.isspace() for ch in str(target)):
            raise ValueError(f"figure paths must not contain spaces; got {str(target)!r}")
        if target.suffix not in {".png", ".pdf"}:
            raise ValueError(f"figure paths must end in .png or .pdf; got {str(target)!r}")
    return targets


def save_figure(fig: Figure, paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Write ``fig`` to every path (PNG at 200 dpi, PDF), atomically, then close it.

    Each file is written to a temporary file in the target folder and renamed with ``os.replace``
    (:func:`disaggregated_eval.io.atomic_path`), so an interrupted run leaves no partial figure.
    The figure is closed (released from pyplot if it was created there) even if writing fails.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        The figure to write.
    paths : path or iterable of paths
        Targets ending in ``.png`` or ``.pdf``; folders are created as needed.

    Returns
    -------
    list of pathlib.Path
        The paths written, in the given order.

    Raises
    ------
    ValueError
        If no path is given, a path contains whitespace or does not end in ``.png``/``.pdf``
        (checked before anything is written).
    """
    try:
        targets = _check_paths(paths)
        for target in targets:
            fmt = target.suffix[1:]
            with atomic_path(target) as tmp:
                fig.savefig(tmp, format=fmt, dpi=_DPI, metadata=_SAVE_METADATA[fmt])
    finally:
        import matplotlib.pyplot as plt  # only to release figures that pyplot manages

        plt.close(fig)
    return targets


# --------------------------------------------------------------------------------------------------
# table selection helpers
# --------------------------------------------------------------------------------------------------
def _require_columns(table: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    if not isinstance(table, pd.DataFrame):
        raise ValueError(f"{what} must be a pandas DataFrame; got {type(table).__name__}")
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ValueError(f"{what} is missing columns {missing}")


def _as_list(values: str | Sequence[str], name: str) -> list[str]:
    out = [values] if isinstance(values, str) else list(values)
    if not out:
        raise ValueError(f"{name} must not be empty")
    return out


def _require_levels(available: Iterable[str], requested: Sequence[str], kind: str, context: str) -> None:
    have = set(available)
    missing = [v for v in requested if v not in have]
    if missing:
        raise ValueError(f"no rows for {kind} {missing} ({context})")


def _dataset_order(available: pd.Series, datasets: Sequence[str] | None, context: str) -> list[str]:
    """Requested datasets (checked), or all present: known ids in DATASET_LABELS order, then others."""
    present = list(pd.unique(available))
    if datasets is not None:
        order = _as_list(datasets, "datasets")
        _require_levels(present, order, "dataset(s)", context)
        return order
    known = [s for s in DATASET_LABELS if s in present]
    return known + [s for s in present if s not in DATASET_LABELS]


def _group_order(groups: pd.Series, *, include_overall: bool) -> list[str]:
    """Groups in order of first appearance; ``overall`` last (or dropped)."""
    levels = [g for g in pd.unique(groups) if g != _OVERALL]
    if include_overall and (groups == _OVERALL).any():
        levels.append(_OVERALL)
    return levels


def _group_label(group: str) -> str:
    return "Overall" if group == _OVERALL else str(group)


def _with_weight_source(rows: pd.DataFrame, weight_source: str, context: str) -> pd.DataFrame:
    """Rows of ``weight_source``; for ``control == "none"`` (no weights) also ``weight_source == "none"``.

    If the unweighted control appears under both, the row of the requested source is kept. Raises
    if no row has the requested source (e.g. ``"oracle"`` for an ACS table).
    """
    if not (rows["weight_source"] == weight_source).any():
        raise ValueError(f"no rows for weight_source {weight_source!r} ({context})")
    keep = (rows["weight_source"] == weight_source) | ((rows["control"] == "none") & (rows["weight_source"] == "none"))
    rows = rows[keep]
    preferred = (rows["weight_source"] != weight_source).astype(int)  # 0 = requested source first
    rows = rows.assign(_pref=preferred).sort_values("_pref", kind="stable")
    rows = rows.drop_duplicates(["dataset", "model", "control", "group", "metric"], keep="first")
    return rows.drop(columns="_pref").sort_index()


def _check_unique(rows: pd.DataFrame, keys: Sequence[str], context: str) -> None:
    dup = rows.duplicated(list(keys), keep=False)
    if dup.any():
        example = rows.loc[dup, list(keys)].iloc[0].to_dict()
        raise ValueError(
            f"several rows per {list(keys)} ({context}); e.g. {example}. "
            "Filter the table (e.g. by study) before plotting."
        )


def _metric_rows(table: pd.DataFrame, comparison: str, metric: str, context: str) -> pd.DataFrame:
    _require_columns(table, _METRIC_COLUMNS, "table")
    _require_caveat(table)
    if not isinstance(metric, str):
        raise ValueError(f"metric must be a metric name; got {metric!r}")
    rows = table[(table["comparison"] == comparison) & (table["metric"] == metric)]
    if rows.empty:
        raise ValueError(f"no rows for metric {metric!r} ({context})")
    return rows


# --------------------------------------------------------------------------------------------------
# estimates with horizontal intervals: the one drawing of the study's and the audit's forest plots
# --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class IntervalStyle:
    """How :func:`draw_interval_rows` draws its rows; sizes and widths in points.

    The default is the study's look: a small filled marker under its interval line, with caps, so
    that an interval shorter than the marker still shows where it ends. The audit's figures draw
    larger points over intervals without caps (``points_on_top``).

    Attributes
    ----------
    point_size : float
        Marker size of an estimate.
    point_edge_width : float or None
        Edge width of an estimate's marker; None: matplotlib's ``lines.markeredgewidth``.
    interval_width : float
        Line width of an interval (and of a withheld row's dashed interval).
    cap_size : float or None
        Height of the caps at both ends of a shown interval; None: no caps.
    points_on_top : bool
        Draw the estimates over their intervals (else the intervals and caps over the estimates).
    hollow_size, hollow_edge_width : float
        Marker size and edge width of a degenerate or undefined estimate (hollow).
    star_size, star_offset : float
        Size of the star marking an interval that excludes 0, and its distance right of the
        interval's upper end.
    band_width, band_alpha : float
        Line width and opacity of the simultaneous band, drawn under the interval.
    withheld_dashes : tuple
        Dash pattern of a withheld row's interval (matplotlib's ``(offset, (on, off))``).
    """

    point_size: float = 3.2
    point_edge_width: float | None = 0.0
    interval_width: float = 1.1
    cap_size: float | None = 4.0
    points_on_top: bool = False
    hollow_size: float = 4.2
    hollow_edge_width: float = 1.0
    star_size: float = 5.0
    star_offset: float = 5.0
    band_width: float = 3.5
    band_alpha: float = 0.35
    withheld_dashes: tuple = (0, (2, 1))


_STUDY_STYLE = IntervalStyle()


def _row_array(values, n: int, name: str, dtype) -> np.ndarray:
    out = np.asarray(values, dtype=dtype)
    if out.shape != (n,):
        raise ValueError(f"{name} must have one value per row, shape ({n},); got shape {out.shape}")
    return out


def draw_interval_rows(
    ax,
    y,
    estimate,
    low,
    high,
    *,
    colors: Sequence,
    family=None,
    marker: str = "o",
    caveat=None,
    shown=None,
    band_low=None,
    band_high=None,
    star_excluding_zero: bool = False,
    style: IntervalStyle = _STUDY_STYLE,
) -> None:
    """Draw rows of estimates with horizontal intervals on ``ax`` (a forest plot's rows).

    The one drawing of the study's figures of tidy tables (:func:`plot_controlled_differences` and
    the other forest grids) and of the audit's forest and ``T_a`` plots; each caller keeps its own
    layout, labels, reference lines and legend. Per row:

    - a shown row with no caveat: its interval (a line, with caps unless ``style.cap_size`` is None)
      and, when its estimate is finite, a filled marker at the estimate; with ``band_low`` and
      ``band_high``, the simultaneous band as a wider, lighter line under the interval;
    - a withheld row (``shown`` false): its interval only, dashed, in :data:`WITHHELD_COLOR` (its
      band too), never a point; nothing when it also has a caveat (no interval to show);
    - a shown row whose ``caveat`` is ``"degenerate"`` and whose estimate is finite: a hollow marker
      at the estimate, no interval; any other shown row with a caveat (``"undefined"``): a hollow
      marker at the axes' left edge (2% of its width), no interval;
    - with ``star_excluding_zero``, a shown interval that excludes 0 gets a star a few points right
      of its upper end (:data:`EXCLUDES_ZERO`): an interval narrower than its marker does not show
      on its own whether it covers 0.

    Rows with a non-finite bound have no interval (nor band). One artist per kind of mark (intervals,
    bands and withheld intervals one line collection each; points, caps, stars and hollow markers one
    line per family), so a panel of many rows stays cheap to draw. Nothing is drawn for an empty
    kind. Axis limits, ticks and labels are left to the caller.

    Parameters
    ----------
    ax : matplotlib.axes.Axes
        Where to draw (data coordinates: x the estimate, y the row's position).
    y : array_like of float, shape (n,)
        The rows' y positions.
    estimate, low, high : array_like of float, shape (n,)
        Estimates and interval bounds; NaN where there is none.
    colors : sequence of k matplotlib colours
        One colour per family.
    family : array_like of int, shape (n,), optional
        Each row's family, an index into ``colors``; default 0 for every row.
    marker : str, default "o"
        Marker of the estimates (filled) and of the caveat markers (hollow).
    caveat : array_like of str, shape (n,), optional
        The tidy tables' ``caveat`` per row (``""`` ordinary, ``"degenerate"``, ``"undefined"``);
        default every row ordinary.
    shown : array_like of bool, shape (n,), optional
        False for a withheld row; default every row shown.
    band_low, band_high : array_like of float, shape (n,), optional
        A simultaneous band per row (both or neither), drawn with ``style.band_width`` and
        ``style.band_alpha``.
    star_excluding_zero : bool, default False
        Star the shown intervals that exclude 0.
    style : IntervalStyle, optional
        Sizes and layering; default the study's look.

    Raises
    ------
    ValueError
        If an array does not have one value per row, only one of ``band_low`` and ``band_high`` is
        given, ``colors`` is empty, a ``family`` is not an integer index into ``colors``, a ``caveat``
        is not one of ``""``, ``"degenerate"`` and ``"undefined"``, or ``shown`` is not boolean.

    Notes
    -----
    How the study's figures draw estimates: ``docs/design.md`` ("Tables and figures") and this
    module's docstring; the audit's figures: ``docs/audit.md`` (forest plots and ``T_a`` plots).
    """
    y = np.asarray(y, dtype=float)
    if y.ndim != 1:
        raise ValueError(f"y must be one position per row, shape (n,); got shape {y.shape}")
    n = y.shape[0]
    est = _row_array(estimate, n, "estimate", float)
    lo = _row_array(low, n, "low", float)
    hi = _row_array(high, n, "high", float)
    if len(colors) == 0:
        raise ValueError("colors must hold at least one colour (one per family)")
    rgb = np.array([to_rgb(c) for c in colors], dtype=float).reshape(-1, 3)
    if family is None:
        family = np.zeros(n, dtype=np.int64)
    else:
        given = _row_array(family, n, "family", object)
        if not all(isinstance(f, (int, np.integer)) and not isinstance(f, (bool, np.bool_)) for f in given):
            raise ValueError(
                f"family must be integer indices into colors; got {', '.join(sorted(set(map(repr, given))))}"
            )
        family = given.astype(np.int64)
    if n and (family.min() < 0 or family.max() >= len(rgb)):
        raise ValueError(f"family must index colors (0 to {len(rgb) - 1}); got values {sorted(set(family.tolist()))}")
    caveat = np.full(n, "", dtype=object) if caveat is None else _row_array(caveat, n, "caveat", object)
    unknown = sorted({repr(c) for c in caveat if c not in ("", *vocabulary.CAVEATS)})
    if unknown:
        raise ValueError(f"caveat must be one of {['', *vocabulary.CAVEATS]} per row; got {', '.join(unknown)}")
    if shown is None:
        shown = np.ones(n, dtype=bool)
    else:
        shown = _row_array(shown, n, "shown", object)
        if not all(isinstance(v, (bool, np.bool_)) for v in shown):
            raise ValueError(
                f"shown must be booleans (False: a withheld row); got {', '.join(sorted(set(map(repr, shown))))}"
            )
        shown = shown.astype(bool)
    if (band_low is None) != (band_high is None):
        raise ValueError("band_low and band_high must be given together")
    row_colors = rgb[family]
    ordinary = caveat == ""
    has_interval = ordinary & np.isfinite(lo) & np.isfinite(hi)
    solid, dashed = has_interval & shown, has_interval & ~shown
    points = shown & ordinary & np.isfinite(est)
    degenerate = shown & (caveat == vocabulary.CAVEAT_DEGENERATE) & np.isfinite(est)
    undefined = shown & ~ordinary & ~degenerate
    excludes = solid & ((lo > 0.0) | (hi < 0.0)) if star_excluding_zero else np.zeros(n, dtype=bool)
    z_interval, z_point = (2, 3) if style.points_on_top else (3, 2)
    if band_low is not None:
        b_lo = _row_array(band_low, n, "band_low", float)
        b_hi = _row_array(band_high, n, "band_high", float)
        band = ordinary & np.isfinite(b_lo) & np.isfinite(b_hi)
        if band.any():
            band_colors = np.where(shown[band, None], row_colors[band], np.asarray(WITHHELD_COLOR))
            ax.hlines(y[band], b_lo[band], b_hi[band], colors=band_colors, alpha=style.band_alpha,
                      linewidth=style.band_width, zorder=1)  # fmt: skip
    if solid.any():
        ax.hlines(y[solid], lo[solid], hi[solid], colors=row_colors[solid], linewidth=style.interval_width,
                  zorder=z_interval)  # fmt: skip
    if dashed.any():
        ax.hlines(y[dashed], lo[dashed], hi[dashed], colors=[WITHHELD_COLOR], linewidth=style.interval_width,
                  linestyles=[style.withheld_dashes], zorder=z_interval)  # fmt: skip
    edge = ax.get_yaxis_transform()  # x in axes fraction, y in data: the left edge of the panel
    shift = ax.transData + ScaledTranslation(style.star_offset / 72.0, 0.0, ax.figure.dpi_scale_trans)
    hollow = dict(linestyle="", marker=marker, markersize=style.hollow_size, markerfacecolor="white",
                  markeredgewidth=style.hollow_edge_width, zorder=4)  # fmt: skip
    for k, color in enumerate(colors):
        mine = family == k
        caps = solid & mine
        if style.cap_size is not None and caps.any():
            ax.plot(np.concatenate([lo[caps], hi[caps]]), np.concatenate([y[caps], y[caps]]), linestyle="",
                    marker="|", markersize=style.cap_size, markeredgewidth=style.interval_width, color=color,
                    zorder=z_interval)  # fmt: skip
        if (points & mine).any():
            m = points & mine
            ax.plot(est[m], y[m], linestyle="", marker=marker, markersize=style.point_size,
                    markeredgewidth=style.point_edge_width, color=color, zorder=z_point)  # fmt: skip
        if (excludes & mine).any():
            m = excludes & mine
            ax.plot(hi[m], y[m], linestyle="", marker="*", markersize=style.star_size, markeredgewidth=0,
                    color=color, transform=shift, clip_on=False, zorder=4)  # fmt: skip
        if (degenerate & mine).any():
            m = degenerate & mine
            ax.plot(est[m], y[m], markeredgecolor=color, **hollow)
        if (undefined & mine).any():  # (an empty line outside the clip box would break the layout)
            m = undefined & mine
            ax.plot(np.full(int(m.sum()), 0.02), y[m], markeredgecolor=color, transform=edge, clip_on=False,
                    **hollow)  # fmt: skip


# --------------------------------------------------------------------------------------------------
# drawing helpers
# --------------------------------------------------------------------------------------------------
def palette(levels: Sequence[str]) -> list[str | tuple[float, float, float]]:
    """The colour of each level: :data:`OVERALL_COLOR` for the overall population, the others
    :data:`COLORBLIND` in turn (cycling), in the order given; one home for the study's groups and the
    audit's families.

    Parameters
    ----------
    levels : sequence of str, length n

    Returns
    -------
    list of matplotlib colours, length n
    """
    colors, k = [], 0
    for level in levels:
        if level == _OVERALL:
            colors.append(OVERALL_COLOR)
        else:
            colors.append(COLORBLIND[k % len(COLORBLIND)])
            k += 1
    return colors


def _caveats(rows: pd.DataFrame) -> np.ndarray:
    """The ``caveat`` of every row (``""`` for an ordinary estimate)."""
    return rows["caveat"].fillna("").astype(str).to_numpy(dtype=object)


def _require_caveat(table: pd.DataFrame) -> None:
    """The tidy tables carry ``caveat`` (``evaluation.TIDY_COLUMNS``); a table without it is from an older run."""
    if "caveat" not in table.columns:
        raise ValueError(
            "the metrics table has no 'caveat' column, so undefined and degenerate estimates cannot be drawn "
            "apart from ordinary ones: it was written by an older version; rerun the bootstrap (rule "
            "bootstrap_metrics, e.g. snakemake --forcerun bootstrap_metrics)"
        )


def _caveat_handles(rows: pd.DataFrame) -> list[Line2D]:
    """Legend entries for the kinds of marked estimates the figure shows (none if it has none)."""
    present = set(_caveats(rows))
    return [
        Line2D([], [], color="0.3", marker="o", markersize=5, markerfacecolor="white", markeredgewidth=1.0,
               linestyle="", label=text)
        for caveat, text in CAVEAT_LEGEND.items()
        if caveat in present
    ]  # fmt: skip


def _excludes_zero_handle() -> Line2D:
    """Legend entry of the star that marks an interval excluding 0 (:func:`_forest_panel`)."""
    return Line2D([], [], color="0.3", marker="*", markersize=_STUDY_STYLE.star_size, markeredgewidth=0, linestyle="",
                  label=EXCLUDES_ZERO)  # fmt: skip


def _legend_handles(labels: Sequence[str], colors: Sequence, *, line: bool = True) -> list[Line2D]:
    return [
        Line2D([], [], color=c, marker=_MARKERS[i % len(_MARKERS)], markersize=5,
               linestyle="-" if line else "", linewidth=1.2, label=lab)
        for i, (lab, c) in enumerate(zip(labels, colors, strict=True))
    ]  # fmt: skip


def _add_legend(fig: Figure, handles: list[Line2D], title: str, width: float) -> None:
    longest = max(len(h.get_label()) for h in handles)
    per_entry = 0.45 + 0.065 * longest  # inches per legend entry at 8 pt
    ncols = int(max(1, min(len(handles), width // per_entry)))
    fig.legend(handles=handles, title=title, loc="outside lower center", ncols=ncols, frameon=False)


def _panel_height(n_categories: int, n_hues: int) -> float:
    # ~0.2 in per category row, more when many dodged points share the row.
    return max(_PANEL_H_MIN, 0.8 + 0.2 * n_categories * max(1.0, n_hues / 2.5))


def _forest_panel(
    ax,
    rows: pd.DataFrame,
    *,
    cat_col: str,
    categories: Sequence[str],
    hue_col: str,
    hues: Sequence[str],
    colors: Sequence,
    zero_line: bool = False,
) -> None:
    """Dodged estimates with horizontal intervals: y = category, x = estimate, one offset per hue.

    The interval (line with caps) is drawn over a small marker, so short intervals stay visible;
    degenerate and undefined estimates (``caveat``) are hollow markers without an interval, the
    undefined ones at the left edge (module docstring). With ``zero_line``, an interval that excludes
    0 gets a star (:data:`EXCLUDES_ZERO`) a few points right of its upper end: an interval narrower
    than the marker (``T_a`` of ``xa`` with ``V = R`` is 1e-4 wide) does not show on its own whether
    it covers 0.
    """
    position = {c: i for i, c in enumerate(categories)}
    step = min(0.8 / max(len(hues), 1), 0.25)
    offsets = (np.arange(len(hues)) - (len(hues) - 1) / 2) * step
    for j, hue in enumerate(hues):
        sub = rows[(rows[hue_col] == hue) & rows[cat_col].isin(position)]
        if sub.empty:
            continue
        draw_interval_rows(
            ax,
            sub[cat_col].map(position).to_numpy(dtype=float) + offsets[j],
            sub["estimate"].to_numpy(dtype=float),
            sub["ci_low"].to_numpy(dtype=float),
            sub["ci_high"].to_numpy(dtype=float),
            colors=[colors[j]],
            marker=_MARKERS[j % len(_MARKERS)],
            caveat=_caveats(sub),
            star_excluding_zero=zero_line,
        )
    if rows.empty:
        ax.text(0.5, 0.5, "no estimates", transform=ax.transAxes, ha="center", va="center",
                color="0.5", fontsize=7)  # fmt: skip
    ax.set_ylim(len(categories) - 0.5, -0.5)  # first category on top
    ax.xaxis.set_major_locator(MaxNLocator(nbins=4))
    ax.grid(False, axis="y")


def _forest_grid(
    rows: pd.DataFrame,
    *,
    row_col: str,
    row_levels: Sequence[str],
    row_labels: Sequence[str],
    col_col: str,
    col_levels: Sequence[str],
    col_titles: Sequence[str],
    cat_col: str,
    categories: Sequence[str],
    cat_labels: Sequence[str],
    hue_col: str,
    hues: Sequence[str],
    hue_labels: Sequence[str],
    legend_title: str,
    xlabel: str | Sequence[str],
    sharex: bool | str,
    zero_line: bool,
    title: str | None = None,
) -> Figure:
    nrows, ncols = len(row_levels), len(col_levels)
    panel_h = _panel_height(len(categories), len(hues))
    width = ncols * _PANEL_W + _MARGIN_W
    fig = Figure(figsize=(width, nrows * panel_h + _MARGIN_H + (0.3 if title else 0.0)), layout="constrained")
    axes = fig.subplots(nrows, ncols, sharex=sharex, sharey=True, squeeze=False)
    colors = palette(hues)
    xlabels = [xlabel] * ncols if isinstance(xlabel, str) else list(xlabel)
    for i, row_level in enumerate(row_levels):
        for j, col_level in enumerate(col_levels):
            ax = axes[i, j]
            panel = rows[(rows[row_col] == row_level) & (rows[col_col] == col_level)]
            if zero_line:
                ax.axvline(0.0, color="0.35", linewidth=0.8, linestyle="--", zorder=1)
            _forest_panel(ax, panel, cat_col=cat_col, categories=categories, hue_col=hue_col,
                          hues=hues, colors=colors, zero_line=zero_line)  # fmt: skip
            if i == 0:
                ax.set_title(col_titles[j])
            if j == 0:
                ax.set_yticks(range(len(categories)), labels=list(cat_labels))
                ax.set_ylabel(row_labels[i])
            if i == nrows - 1:
                ax.set_xlabel(xlabels[j])
    extra = [_excludes_zero_handle()] if zero_line else []
    _add_legend(fig, _legend_handles(hue_labels, colors) + _caveat_handles(rows) + extra, legend_title, width)
    if title:
        fig.suptitle(title)
    return fig


# --------------------------------------------------------------------------------------------------
# figures
# --------------------------------------------------------------------------------------------------
def plot_controlled_differences(
    table: pd.DataFrame,
    *,
    metric: str,
    models: Sequence[str],
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    weight_source: str = "estimated",
    datasets: Sequence[str] | None = None,
    title: str | None = None,
) -> list[Path]:
    """Controlled differences ``T_a`` (paper Figure 1, B4-B10, B27-B33).

    Grid: one row per model, one column per control ``V`` (none, X, Y, R). In each panel the y axis
    lists the datasets (in the given order), x is ``T_a`` with its interval, one dodged point per
    group, and a dashed line marks 0.

    Parameters
    ----------
    table : pandas.DataFrame
        Tidy metrics table (``docs/design.md``); rows with ``comparison == "controlled_difference"``
        are used.
    metric : str
        Metric name, e.g. ``"log_loss"``.
    models : sequence of str
        Model types, one grid row each (Figure 1: ``("x", "xa")``; B4-B10: all three).
    paths : path or iterable of paths
        ``.png``/``.pdf`` targets (see :func:`save_figure`).
    weight_source : {"estimated", "oracle"}, default "estimated"
        Which weights; rows of ``control == "none"`` may carry ``weight_source == "none"``.
    datasets : sequence of str, optional
        Datasets to show, top to bottom; default all in the table.
    title : str, optional
        Figure title.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        If the table lacks required columns, or has no rows for the metric, a model or a dataset;
        if a path is invalid.
    """
    targets = _check_paths(paths)
    models = _as_list(models, "models")
    context = f"comparison controlled_difference, weight_source {weight_source!r}"
    rows = _metric_rows(table, "controlled_difference", metric, context)
    rows = _with_weight_source(rows, weight_source, f"metric {metric!r}, comparison controlled_difference")
    _require_levels(rows["model"], models, "model(s)", f"metric {metric!r}, {context}")
    rows = rows[rows["model"].isin(models)]
    order = _dataset_order(rows["dataset"], datasets, f"metric {metric!r}, {context}")
    rows = rows[rows["dataset"].isin(order) & rows["control"].isin(_CONTROLS)]
    _check_unique(rows, ["dataset", "model", "control", "group"], context)
    groups = _group_order(rows["group"], include_overall=False)
    metric_label = METRIC_LABELS.get(metric, metric)
    with mpl.rc_context(house_style()):
        fig = _forest_grid(
            rows,
            row_col="model", row_levels=models, row_labels=[MODEL_LABELS.get(m, m) for m in models],
            col_col="control", col_levels=_CONTROLS, col_titles=[CONTROL_LABELS[c] for c in _CONTROLS],
            cat_col="dataset", categories=order, cat_labels=[DATASET_LABELS.get(s, s) for s in order],
            hue_col="group", hues=groups, hue_labels=[_group_label(g) for g in groups],
            legend_title="Group", xlabel=f"$T_a$ ({metric_label})", sharex=True, zero_line=True,
            title=title,
        )  # fmt: skip
        return save_figure(fig, targets)


def plot_weighted_population(
    table: pd.DataFrame,
    *,
    metric: str,
    models: Sequence[str],
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    weight_source: str = "estimated",
    datasets: Sequence[str] | None = None,
) -> list[Path]:
    """Weighted population metrics ``M_a`` next to the subgroup metric (paper B11-B17, B34-B40).

    Grid: one row per dataset, one column per model. In each panel the y axis lists the groups, x is
    the metric; entries (hue) are "Subgroup" (``comparison == "absolute"``, the unweighted metric of
    the group) and ``M_a`` for each control (``comparison == "weighted_population"``; "Control:
    none" is the plain population metric), each with its interval.

    Parameters
    ----------
    table : pandas.DataFrame
        Tidy metrics table (``docs/design.md``).
    metric : str
        Metric name.
    models : sequence of str
        Model types, one grid column each.
    paths : path or iterable of paths
        ``.png``/``.pdf`` targets.
    weight_source : {"estimated", "oracle"}, default "estimated"
        Which weights for ``M_a``.
    datasets : sequence of str, optional
        Datasets to show, one row each, top to bottom; default all in the table.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        If the table has no ``M_a`` or subgroup rows for the metric, a model or a dataset.
    """
    targets = _check_paths(paths)
    models = _as_list(models, "models")
    context = f"comparison weighted_population, weight_source {weight_source!r}"
    weighted = _metric_rows(table, "weighted_population", metric, context)
    weighted = _with_weight_source(weighted, weight_source, f"metric {metric!r}, comparison weighted_population")
    absolute = _metric_rows(table, "absolute", metric, "comparison absolute")
    for rows, ctx in ((weighted, context), (absolute, "comparison absolute")):
        _require_levels(rows["model"], models, "model(s)", f"metric {metric!r}, {ctx}")
    weighted = weighted[weighted["model"].isin(models) & weighted["control"].isin(_CONTROLS)]
    absolute = absolute[absolute["model"].isin(models) & (absolute["group"] != _OVERALL)]
    order = _dataset_order(weighted["dataset"], datasets, f"metric {metric!r}, {context}")
    _require_levels(absolute["dataset"], order, "dataset(s)", f"metric {metric!r}, comparison absolute")
    weighted = weighted[weighted["dataset"].isin(order)].assign(entry=lambda d: d["control"].map(CONTROL_LABELS))
    absolute = absolute[absolute["dataset"].isin(order)].assign(entry="Subgroup")
    _check_unique(weighted, ["dataset", "model", "control", "group"], context)
    _check_unique(absolute, ["dataset", "model", "group"], "comparison absolute")
    rows = pd.concat([absolute, weighted], ignore_index=True)
    groups = _group_order(weighted["group"], include_overall=False)
    groups += [g for g in _group_order(absolute["group"], include_overall=False) if g not in groups]
    entries = ["Subgroup", *(CONTROL_LABELS[c] for c in _CONTROLS)]
    # Legend: the unweighted subgroup metric, then M_a for each control variable.
    entry_labels = ["Subgroup (unweighted)", *(f"$M_a$ ({CONTROL_LABELS[c]})" for c in _CONTROLS)]
    with mpl.rc_context(house_style()):
        fig = _forest_grid(
            rows,
            row_col="dataset", row_levels=order, row_labels=[DATASET_LABELS.get(s, s) for s in order],
            col_col="model", col_levels=models, col_titles=[MODEL_LABELS.get(m, m) for m in models],
            cat_col="group", categories=groups, cat_labels=[_group_label(g) for g in groups],
            hue_col="entry", hues=entries, hue_labels=entry_labels, legend_title="Estimate",
            xlabel=METRIC_LABELS.get(metric, metric), sharex="row", zero_line=False,
        )  # fmt: skip
        return save_figure(fig, targets)


def plot_shared_space(
    table: pd.DataFrame,
    *,
    metric: str,
    models: Sequence[str],
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    weight_source: str = "estimated",
    datasets: Sequence[str] | None = None,
    title: str | None = None,
) -> list[Path]:
    """Subgroup metrics weighted to a shared space (Cai et al.; paper B18-B24).

    Grid: one row per dataset, one column per control (X, Y, R). In each panel the y axis lists the
    groups, x is the shared-space weighted group metric (``comparison == "shared_space"``) with its
    interval, one dodged point per model. The figure's title says what the numbers are (default:
    :func:`shared_space_title`), so that the PNG reads without the report's caption.

    Parameters
    ----------
    table : pandas.DataFrame
        Tidy metrics table (``docs/design.md``).
    metric : str
        Metric name.
    models : sequence of str
        Model types (hue).
    paths : path or iterable of paths
        ``.png``/``.pdf`` targets.
    weight_source : {"estimated", "oracle"}, default "estimated"
        Which weights.
    datasets : sequence of str, optional
        Datasets to show, one row each; default all in the table.
    title : str, optional
        Figure title; default :func:`shared_space_title` of the metric.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        If the table has no shared-space rows for the metric, a model or a dataset.
    """
    targets = _check_paths(paths)
    models = _as_list(models, "models")
    context = f"comparison shared_space, weight_source {weight_source!r}"
    rows = _metric_rows(table, "shared_space", metric, context)
    rows = rows[rows["weight_source"] == weight_source]
    if rows.empty:
        raise ValueError(f"no rows for weight_source {weight_source!r} (metric {metric!r}, comparison shared_space)")
    _require_levels(rows["model"], models, "model(s)", f"metric {metric!r}, {context}")
    rows = rows[rows["model"].isin(models)]
    order = _dataset_order(rows["dataset"], datasets, f"metric {metric!r}, {context}")
    controls = vocabulary.WEIGHT_CONTROLS
    rows = rows[rows["dataset"].isin(order) & rows["control"].isin(controls)]
    _check_unique(rows, ["dataset", "model", "control", "group"], context)
    groups = _group_order(rows["group"], include_overall=False)
    with mpl.rc_context(house_style()):
        fig = _forest_grid(
            rows,
            row_col="dataset", row_levels=order, row_labels=[DATASET_LABELS.get(s, s) for s in order],
            col_col="control", col_levels=controls, col_titles=[CONTROL_LABELS[c] for c in controls],
            cat_col="group", categories=groups, cat_labels=[_group_label(g) for g in groups],
            hue_col="model", hues=models, hue_labels=[MODEL_LABELS.get(m, m) for m in models],
            legend_title="Model", xlabel=f"{METRIC_LABELS.get(metric, metric)} (shared space)", sharex="row",
            zero_line=False, title=shared_space_title(metric) if title is None else title,
        )  # fmt: skip
        return save_figure(fig, targets)


def shared_space_title(metric: str) -> str:
    """Title of a shared-space figure (B18-B24): what its numbers are, in a line."""
    return (
        f"{METRIC_LABELS.get(metric, metric)} of each group in the shared space (Cai et al.): "
        f"its rows weighted to where the group and the rest overlap in V"
    )


def plot_relative_performance(
    table: pd.DataFrame,
    *,
    metrics: Sequence[str] = vocabulary.RELATIVE_METRICS,
    models: Sequence[str] = vocabulary.RELATIVE_FIGURE_MODELS,
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    datasets: Sequence[str] | None = None,
) -> list[Path]:
    """Relative performance of subgroup-aware models (paper B1, B25).

    Grid: one row per compared model (e.g. ``xa - x``, ``xa_stratified - x``), one column per
    metric. In each panel the y axis lists the datasets, x is the difference (``comparison ==
    "relative"``) with its interval, one dodged point per group and for "Overall"; a dashed line
    marks 0.

    Parameters
    ----------
    table : pandas.DataFrame
        Tidy metrics table; ``model`` is the compared model and ``reference`` (if present) the model
        it is compared with.
    metrics : sequence of str
        Metrics, one grid column each.
    models : sequence of str
        Compared models, one grid row each.
    paths : path or iterable of paths
        ``.png``/``.pdf`` targets.
    datasets : sequence of str, optional
        Datasets to show, top to bottom; default all in the table.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        If the table has no relative rows for a metric, a model or a dataset.
    """
    targets = _check_paths(paths)
    metrics = _as_list(metrics, "metrics")
    models = _as_list(models, "models")
    _require_columns(table, _METRIC_COLUMNS, "table")
    _require_caveat(table)
    rows = table[table["comparison"] == "relative"]
    _require_levels(rows["metric"], metrics, "metric(s)", "comparison relative")
    _require_levels(rows["model"], models, "model(s)", "comparison relative")
    rows = rows[rows["metric"].isin(metrics) & rows["model"].isin(models)]
    order = _dataset_order(rows["dataset"], datasets, "comparison relative")
    rows = rows[rows["dataset"].isin(order)]
    keys = ["dataset", "model", "metric", "group"] + (["reference"] if "reference" in rows.columns else [])
    _check_unique(rows, keys, "comparison relative")
    if "reference" in rows.columns:
        _check_unique(rows, keys[:-1], "comparison relative: one reference model per compared model")
    groups = _group_order(rows["group"], include_overall=True)
    row_labels = []
    for m in models:
        refs = list(pd.unique(rows.loc[rows["model"] == m, "reference"])) if "reference" in rows.columns else []
        ref_text = " / ".join(MODEL_LABELS.get(r, r) for r in refs) if refs else "reference"
        row_labels.append(f"{MODEL_LABELS.get(m, m)}\nminus {ref_text}")
    with mpl.rc_context(house_style()):
        fig = _forest_grid(
            rows,
            row_col="model", row_levels=models, row_labels=row_labels,
            col_col="metric", col_levels=metrics, col_titles=[METRIC_LABELS.get(m, m) for m in metrics],
            cat_col="dataset", categories=order, cat_labels=[DATASET_LABELS.get(s, s) for s in order],
            hue_col="group", hues=groups, hue_labels=[_group_label(g) for g in groups],
            legend_title="Group", xlabel="Difference", sharex="col", zero_line=True,
        )  # fmt: skip
        return save_figure(fig, targets)


def plot_calibration_curves(
    calibration: pd.DataFrame,
    *,
    models: Sequence[str] = vocabulary.MODEL_TYPES,
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    datasets: Sequence[str] | None = None,
) -> list[Path]:
    """Calibration curves per group (paper B2, B3, B26).

    Grid: one row per model type, one column per dataset. In each panel, one line per group of
    ``fraction_positive`` against ``mean_score`` with vertical Wilson intervals, the diagonal
    (perfect calibration) dashed, both axes on [0, 1]. The ``"overall"`` curve is not drawn.

    Parameters
    ----------
    calibration : pandas.DataFrame
        Calibration table (:func:`disaggregated_eval.calibration.calibration_table`) with an extra
        ``dataset`` column.
    models : sequence of str
        Model types, one grid row each.
    paths : path or iterable of paths
        ``.png``/``.pdf`` targets.
    datasets : sequence of str, optional
        Datasets to show, left to right; default all in the table.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        If the table lacks required columns or has no rows for a model or a dataset.
    """
    targets = _check_paths(paths)
    models = _as_list(models, "models")
    _require_columns(calibration, _CALIBRATION_COLUMNS, "calibration")
    rows = calibration[calibration["group"] != _OVERALL]
    if rows.empty:
        raise ValueError("no rows for any group in calibration (only 'overall' or empty)")
    _require_levels(rows["model"], models, "model(s)", "calibration")
    rows = rows[rows["model"].isin(models)]
    order = _dataset_order(rows["dataset"], datasets, "calibration")
    rows = rows[rows["dataset"].isin(order)]
    groups = _group_order(rows["group"], include_overall=False)
    colors = palette(groups)
    nrows, ncols = len(models), len(order)
    width = ncols * _CAL_PANEL + 1.3
    with mpl.rc_context({**house_style(), "axes.grid.axis": "both"}):
        fig = Figure(figsize=(width, nrows * _CAL_PANEL + _MARGIN_H), layout="constrained")
        axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
        for i, model in enumerate(models):
            for j, dataset in enumerate(order):
                ax = axes[i, j]
                ax.plot([0, 1], [0, 1], color="0.5", linestyle="--", linewidth=0.8, zorder=1)
                panel = rows[(rows["model"] == model) & (rows["dataset"] == dataset)]
                for k, group in enumerate(groups):
                    sub = panel[panel["group"] == group]
                    if "bin" in sub.columns:
                        sub = sub.sort_values("bin")
                    if sub.empty:
                        continue
                    x = sub["mean_score"].to_numpy(dtype=float)
                    y = sub["fraction_positive"].to_numpy(dtype=float)
                    err = np.vstack([y - sub["ci_low"].to_numpy(dtype=float),
                                     sub["ci_high"].to_numpy(dtype=float) - y])  # fmt: skip
                    err = np.clip(np.nan_to_num(err, nan=0.0), 0.0, None)
                    # interval bars over the markers, with caps: a short interval stays visible
                    ax.errorbar(x, y, yerr=err, color=colors[k], marker=_MARKERS[k % len(_MARKERS)],
                                markersize=3, linewidth=1.0, elinewidth=0.8, capsize=2.0, barsabove=True,
                                zorder=3)  # fmt: skip
                if panel.empty:
                    ax.text(0.5, 0.5, "no estimates", transform=ax.transAxes, ha="center",
                            va="center", color="0.5", fontsize=7)  # fmt: skip
                ax.set_xlim(0.0, 1.0)
                ax.set_ylim(0.0, 1.0)
                ax.set_box_aspect(1.0)
                ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
                ax.yaxis.set_major_locator(MaxNLocator(nbins=5))
                if i == 0:
                    ax.set_title(DATASET_LABELS.get(dataset, dataset))
                if j == 0:
                    ax.set_ylabel(f"{MODEL_LABELS.get(model, model)}\nFraction positive")
                if i == nrows - 1:
                    ax.set_xlabel("Mean score")
        _add_legend(fig, _legend_handles([_group_label(g) for g in groups], colors), "Group", width)
        return save_figure(fig, targets)


# --------------------------------------------------------------------------------------------------
# coverage study (docs/method.md, "Coverage study"); appended by the coverage study's owner
# --------------------------------------------------------------------------------------------------
_COVERAGE_COLUMNS = (
    "dataset", "model", "control", "weight_source", "group", "metric", "coverage", "n_replicates",
    "nominal_band_low", "nominal_band_high",
)  # fmt: skip
_GROUP_MARKERS = ("o", "^", "s", "D", "v", "P")
_COVERAGE_ROW_H = 0.42  # inches per metric row (one lane per dataset and group)


def plot_coverage(
    coverage: pd.DataFrame,
    *,
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    nominal: float = 0.95,
    datasets: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
) -> list[Path]:
    """Coverage of the ``T_a`` intervals per cell (coverage study; ``docs/method.md``).

    Grid: one row per (model, weight source) present in the table (Bayes-optimal scores with
    oracle weights, fitted models with estimated and with oracle weights), one column per control
    ``V`` (none, X, Y, R; ``V = none`` has no weights and is repeated in every row of its model). In
    each panel the y axis lists the metrics and every point is one cell: its coverage (share of
    replicates whose 95% interval covers the population ``T_a``). Within a metric's row each dataset
    and group has its own lane (datasets top to bottom in the legend's order, groups next to each
    other), so no two cells share a position; datasets are told apart by colour (Okabe-Ito, safe for
    colour-vision deficiencies), groups by marker. Points at coverage 1 are drawn whole (the x axis
    ends beyond 1). A cell whose intervals all had width 0 (``mean_width == 0``: degenerate, e.g.
    ``T_a`` exactly 0 by construction) is a hollow marker. A dashed line marks the nominal level, the
    grey band the range a correct interval's coverage falls in with probability 95%
    (``nominal_band_low`` .. ``nominal_band_high`` at the panel's median number of replicates).

    Parameters
    ----------
    coverage : pandas.DataFrame
        Coverage table (:func:`disaggregated_eval.coverage.coverage_table`), columns
        ``dataset, model, control, weight_source, group, metric, coverage, n_replicates,
        nominal_band_low, nominal_band_high`` (and ``mean_width``, for the degenerate cells).
    paths : path or iterable of paths
        ``.png``/``.pdf`` targets (see :func:`save_figure`).
    nominal : float, default 0.95
        Nominal coverage (the dashed line).
    datasets : sequence of str, optional
        Datasets to show (colours, lanes); default all in the table. At most eight (the palette).
    metrics : sequence of str, optional
        Metrics to show, top to bottom; default those in the table, in ``vocabulary.METRICS`` order.

    Returns
    -------
    list of pathlib.Path
        The files written.

    Raises
    ------
    ValueError
        If the table lacks required columns, has no cell with a replicate, has no rows for a
        requested dataset or metric, or holds more than eight datasets; if a path is invalid.
    """
    targets = _check_paths(paths)
    _require_columns(coverage, _COVERAGE_COLUMNS, "coverage")
    rows = coverage[(coverage["n_replicates"] > 0) & coverage["coverage"].notna()]  # undefined truth: left out
    if rows.empty:
        raise ValueError("coverage has no cell with a defined replicate")
    order = _dataset_order(rows["dataset"], datasets, "coverage")
    if len(order) > len(OKABE_ITO):
        raise ValueError(f"plot_coverage tells at most {len(OKABE_ITO)} datasets apart; got {len(order)}: {order}")
    rows = rows[rows["dataset"].isin(order)]
    if metrics is None:
        present = set(rows["metric"])
        metric_order = [m for m in vocabulary.METRICS if m in present] + sorted(present - set(vocabulary.METRICS))
    else:
        metric_order = _as_list(metrics, "metrics")
        _require_levels(rows["metric"], metric_order, "metric(s)", "coverage")
    rows = rows[rows["metric"].isin(metric_order)]
    _check_unique(rows, ["dataset", "model", "control", "weight_source", "group", "metric"], "coverage")
    models = [m for m in vocabulary.SIMULATION_MODELS if m in set(rows["model"])]
    models += sorted(set(rows["model"]) - set(models))
    panel_rows = []  # (model, weight source) with weights, in model order; estimated first
    for model in models:
        sources = set(rows.loc[(rows["model"] == model) & (rows["control"] != "none"), "weight_source"])
        panel_rows += [(model, s) for s in ("estimated", "oracle") if s in sources]
        panel_rows += [(model, s) for s in sorted(sources - {"estimated", "oracle"})]
        if not sources:  # only V = none
            panel_rows.append((model, "none"))
    groups = _group_order(rows["group"], include_overall=False)
    colors = list(OKABE_ITO[: len(order)])
    position = {m: i for i, m in enumerate(metric_order)}
    # One lane per (dataset, group) inside a metric's row: dataset-major, so a dataset's groups are adjacent.
    n_lanes = len(order) * len(groups)
    lane_step = 0.84 / max(n_lanes, 1)
    lane = {
        (d, g): (k * len(groups) + i - (n_lanes - 1) / 2) * lane_step
        for k, d in enumerate(order)
        for i, g in enumerate(groups)
    }
    low = float(np.nanmin(rows["coverage"].to_numpy(dtype=float)))
    xlim = (max(0.0, min(low, nominal - 0.1) - 0.02), 1.0 + 0.03)  # whole markers at coverage 1
    degenerate_cells = rows["mean_width"].to_numpy(dtype=float) == 0 if "mean_width" in rows.columns else None
    rows = rows.assign(_degenerate=False if degenerate_cells is None else degenerate_cells)
    panel_h = max(_PANEL_H_MIN, 0.5 + _COVERAGE_ROW_H * len(metric_order))
    width = len(_CONTROLS) * _PANEL_W + _MARGIN_W
    with mpl.rc_context(house_style()):
        fig = Figure(figsize=(width, len(panel_rows) * panel_h + _MARGIN_H + 0.6), layout="constrained")
        axes = fig.subplots(len(panel_rows), len(_CONTROLS), sharex=True, sharey=True, squeeze=False)
        for i, (model, source) in enumerate(panel_rows):
            for j, control in enumerate(_CONTROLS):
                ax = axes[i, j]
                keep = (rows["model"] == model) & (rows["control"] == control)
                keep &= (rows["weight_source"] == "none") if control == "none" else (rows["weight_source"] == source)
                panel = rows[keep]
                if not panel.empty:
                    n = float(np.median(panel["n_replicates"]))
                    at = panel["n_replicates"] == panel["n_replicates"].iloc[(panel["n_replicates"] - n).abs().argmin()]
                    band = panel.loc[at, ["nominal_band_low", "nominal_band_high"]].iloc[0].to_numpy(dtype=float)
                    ax.axvspan(band[0], band[1], color="0.88", zorder=0, linewidth=0)
                ax.axvline(nominal, color="0.35", linewidth=0.8, linestyle="--", zorder=1)
                for m in range(1, len(metric_order)):  # separate the metrics' rows
                    ax.axhline(m - 0.5, color="0.93", linewidth=0.5, zorder=0)
                for k, dataset in enumerate(order):
                    for g, group in enumerate(groups):
                        sub = panel[(panel["dataset"] == dataset) & (panel["group"] == group)]
                        if sub.empty:
                            continue
                        y = sub["metric"].map(position).to_numpy(dtype=float) + lane[(dataset, group)]
                        x = sub["coverage"].to_numpy(dtype=float)
                        hollow = sub["_degenerate"].to_numpy(dtype=bool)
                        for mask, face in ((~hollow, colors[k]), (hollow, "white")):
                            if not mask.any():  # an empty line outside the clip box breaks the layout
                                continue
                            ax.plot(x[mask], y[mask], linestyle="", marker=_GROUP_MARKERS[g % len(_GROUP_MARKERS)],
                                    markersize=3.2, markerfacecolor=face, markeredgecolor=colors[k],
                                    markeredgewidth=0.7, clip_on=False, zorder=3)  # fmt: skip
                if panel.empty:
                    ax.text(0.5, 0.5, "not computed", transform=ax.transAxes, ha="center", va="center",
                            color="0.5", fontsize=7)  # fmt: skip
                else:
                    reps = sorted(set(panel["n_replicates"].astype(int)))
                    text = f"R = {reps[0]}" if len(reps) == 1 else f"R = {reps[0]}-{reps[-1]}"
                    ax.text(0.02, 0.01, text, transform=ax.transAxes, ha="left", va="bottom", fontsize=6,
                            color="0.4")  # fmt: skip
                ax.set_xlim(*xlim)
                ax.set_ylim(len(metric_order) - 0.5, -0.5)
                ax.xaxis.set_major_locator(MaxNLocator(nbins=5))
                ax.grid(False, axis="y")
                if i == 0:
                    ax.set_title(CONTROL_LABELS[control])
                if j == 0:
                    ax.set_yticks(range(len(metric_order)), labels=[METRIC_LABELS.get(m, m) for m in metric_order])
                    weights = "no weights" if source == "none" else f"{source} weights"
                    ax.set_ylabel(f"{MODEL_LABELS.get(model, model)}\n{weights}")
                if i == len(panel_rows) - 1:
                    ax.set_xlabel("Coverage of the 95% interval of $T_a$")
        handles = [
            Line2D([], [], color=c, marker="s", markersize=5, linestyle="", label=DATASET_LABELS.get(d, d))
            for d, c in zip(order, colors, strict=True)
        ] + [
            Line2D([], [], color="0.3", marker=_GROUP_MARKERS[g % len(_GROUP_MARKERS)], markersize=5, linestyle="",
                   label=_group_label(group))
            for g, group in enumerate(groups)
        ]  # fmt: skip
        if rows["_degenerate"].any():
            handles.append(
                Line2D([], [], color="0.3", marker="o", markersize=5, markerfacecolor="white", linestyle="",
                       label="hollow: every interval of width 0 (degenerate)")
            )  # fmt: skip
        _add_legend(fig, handles, "Dataset (colour; lanes top to bottom), group (marker)", width)
        return save_figure(fig, targets)


# --------------------------------------------------------------------------------------------------
# selection study: bounds against Gamma
# --------------------------------------------------------------------------------------------------
#: Background of a note written across a panel (over the grid and the Gamma* line).
_NOTE_BOX = {"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.5}
_SELECTION_COLUMNS = (
    "slice", "metric", "quantity", "gamma", "bound_low", "bound_high", "bound_ci_low", "bound_ci_high",
)  # fmt: skip


def plot_selection_bounds(
    rows: pd.DataFrame,
    truth: pd.DataFrame,
    *,
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    gamma_star: float,
    title: str = "",
    min_denominator: int | None = None,
) -> list[Path]:
    """Sensitivity bounds against ``Gamma`` per metric and slice, with the full-population truth.

    Selection study (:mod:`disaggregated_eval.selection_study`; ``docs/method.md``, "Evaluation under
    selection"). One row of panels per metric, one column per slice and quantity (each group's metric,
    the overall metric, each group's ``T_a``). In a panel: the bounds of one selected test set
    against ``Gamma`` (log axis; dark band), their 95% bootstrap interval (light band), the
    full-population truth (dashed line) and the setting's true selection strength ``Gamma*`` (dotted
    vertical line, when finite). At ``Gamma = 1`` the band is the (corrected) estimate and its interval.
    A panel whose slice has fewer than ``min_denominator`` rows in the metric's denominator (column
    ``n_denominator``, when ``rows`` has it) is withheld, as the study and the audit withhold it, and says
    so with the number of rows; a panel without any finite bound says "no estimate"; one whose bounds and
    intervals have width 0 at every Gamma (every row in the denominator gives the same value, e.g. a
    slice without predicted positives: its sensitivity is 0 whatever the weights) draws a line and says so.

    Parameters
    ----------
    rows : pandas.DataFrame
        One replicate's :func:`disaggregated_eval.selection.selection_analysis` rows of one model and
        margins (columns ``slice, metric, quantity, gamma, bound_low, bound_high, bound_ci_low,
        bound_ci_high``).
    truth : pandas.DataFrame
        Columns ``slice, metric, quantity, truth`` (:func:`disaggregated_eval.selection_study.population_truth`).
    paths : path or iterable of paths
        ``.png``/``.pdf`` targets (see :func:`save_figure`).
    gamma_star : float
        The true selection strength of the weight box (``inf`` when positivity fails).
    title : str, optional
        Figure title.
    min_denominator : int, optional
        Fewest rows in a metric's denominator for a panel to be drawn (default
        :data:`disaggregated_eval.vocabulary.MIN_DENOMINATOR`, the audit's ``min_denominator`` default).

    Returns
    -------
    list of pathlib.Path

    Raises
    ------
    ValueError
        If columns are missing or ``rows`` is empty.
    """
    from disaggregated_eval.intervals import zero_width  # numba and scipy: only for this figure

    if min_denominator is None:
        min_denominator = vocabulary.MIN_DENOMINATOR
    targets = _check_paths(paths)
    _require_columns(rows, _SELECTION_COLUMNS, "rows")
    _require_columns(truth, ("slice", "metric", "quantity", "truth"), "truth")
    if rows.empty:
        raise ValueError("rows is empty")
    present = set(rows["metric"])
    metric_order = [m for m in vocabulary.METRICS if m in present]
    slices = list(dict.fromkeys(rows["slice"]))
    columns = [(s, "metric") for s in slices] + [(s, "difference") for s in slices if s != _OVERALL]
    columns = [c for c in columns if ((rows["slice"] == c[0]) & (rows["quantity"] == c[1])).any()]
    merged = rows.merge(truth, on=["slice", "metric", "quantity"], how="left")
    with mpl.rc_context(house_style()):
        fig = Figure(figsize=(2.2 * len(columns) + 1.2, 1.6 * len(metric_order) + 1.2), layout="constrained")
        axes = fig.subplots(len(metric_order), len(columns), sharex=True, squeeze=False)
        for i, metric in enumerate(metric_order):
            for j, (name, quantity) in enumerate(columns):
                ax = axes[i, j]
                part = merged[
                    (merged["metric"] == metric) & (merged["slice"] == name) & (merged["quantity"] == quantity)
                ]
                part = part.sort_values("gamma")
                grid = part["gamma"].to_numpy(float)
                few = (part["n_denominator"] < min_denominator).to_numpy(bool) if "n_denominator" in part else grid < 0
                drawn = ~few & np.isfinite(part[["bound_low", "bound_high"]].to_numpy(float)).all(axis=1)
                if drawn.any():
                    part, g = part[drawn], grid[drawn]
                    flat = part[["bound_ci_low", "bound_ci_high"]].to_numpy(float)
                    if zero_width(flat.min(), flat.max()):  # width 0 at every Gamma: a band would be invisible
                        ax.plot(g, flat[:, 0], color=COLORBLIND[0], linewidth=2.0)
                        ax.text(0.5, 0.95, f"{flat[0, 0]:g} at every Gamma:\nevery row gives the same value",
                                transform=ax.transAxes, ha="center", va="top", color="0.4", fontsize=7,
                                bbox=_NOTE_BOX)  # fmt: skip
                    ax.fill_between(g, part["bound_ci_low"], part["bound_ci_high"], color=COLORBLIND[0], alpha=0.2,
                                    linewidth=0)  # fmt: skip
                    ax.fill_between(g, part["bound_low"], part["bound_high"], color=COLORBLIND[0], alpha=0.55,
                                    linewidth=0)  # fmt: skip
                    t = part["truth"].dropna()
                    if not t.empty:
                        ax.axhline(float(t.iloc[0]), color=COLORBLIND[3], linestyle="--", linewidth=1.0)
                    if quantity == "difference":
                        ax.axhline(0.0, color="0.5", linewidth=0.6)
                else:  # nothing to draw: say why, instead of an empty box around the truth's line
                    text = "no estimate"
                    if few.any():
                        n = int(part["n_denominator"].max())
                        text = f"withheld: {n} row{'s' * (n != 1)}\nin the denominator\n(fewer than {min_denominator})"
                    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", color="0.4",
                            fontsize=7, bbox=_NOTE_BOX)  # fmt: skip
                    ax.set_yticks([])
                if np.isfinite(gamma_star) and len(grid) and gamma_star <= grid.max():
                    ax.axvline(gamma_star, color="0.3", linestyle=":", linewidth=1.0)
                ax.set_xscale("log")
                ax.grid(True, axis="y")
                if i == 0:
                    what = "$T_a$" if quantity == "difference" else "metric"
                    ax.set_title(f"{name}: {what}")
                if j == 0:
                    ax.set_ylabel(METRIC_LABELS.get(metric, metric))
                if i == len(metric_order) - 1:
                    ax.set_xlabel("Gamma")
                    ax.set_xticks(grid, labels=[f"{v:g}" for v in grid], minor=False)
                    ax.minorticks_off()
        handles = [
            Line2D([], [], color=COLORBLIND[0], alpha=0.55, linewidth=6, label="bounds"),
            Line2D([], [], color=COLORBLIND[0], alpha=0.2, linewidth=6, label="95% interval of the bounds"),
            Line2D([], [], color=COLORBLIND[3], linestyle="--", label="full-population truth"),
            Line2D([], [], color="0.3", linestyle=":", label="true selection strength Gamma*"),
        ]
        if title:
            fig.suptitle(title)
        _add_legend(fig, handles, "", 2.2 * len(columns) + 1.2)
        return save_figure(fig, targets)
