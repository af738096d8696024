"""Tests of the figure functions: files written, readable PNGs of the expected shape, errors."""

from __future__ import annotations

import subprocess
import sys

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported anywhere in the test process

import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from disaggregated_eval import plots, vocabulary
from disaggregated_eval.calibration import calibration_table

DATASETS = ["covariate_shift", "anticausal_label_shift"]
MODELS = ["x", "xa", "xa_stratified"]
GROUPS = ["A = 0", "A = 1"]
METRICS = ["log_loss", "auc"]
CONTROLS = ["none", "X", "Y", "R"]


def _row(rng, **keys):
    est = float(rng.normal(0.0, 0.05))
    half = float(abs(rng.normal(0.02, 0.005)))
    return {"study": "simulation", **keys, "estimate": est, "ci_low": est - half, "ci_high": est + half,
            "n_resamples": 200, "n_undefined": 0, "caveat": ""}  # fmt: skip


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """Small tidy metrics table in the contract of docs/design.md (2 datasets, 3 models, 2 groups), with
    the column ``caveat`` (all ordinary here)."""
    rng = np.random.default_rng(0)
    rows = []
    for dataset in DATASETS:
        for model in MODELS:
            for metric in METRICS:
                base = {"dataset": dataset, "model": model, "metric": metric}
                for group in [*GROUPS, "overall"]:
                    rows.append(_row(rng, **base, comparison="absolute", control="none",
                                     weight_source="none", group=group))  # fmt: skip
                    if model != "x":
                        rows.append(_row(rng, **base, comparison="relative", control="none",
                                         weight_source="none", group=group, reference="x"))  # fmt: skip
                for group in GROUPS:
                    # control "none" has no weights: recorded once with weight_source "none"
                    for comparison in ("weighted_population", "controlled_difference"):
                        rows.append(_row(rng, **base, comparison=comparison, control="none",
                                         weight_source="none", group=group))  # fmt: skip
                    for control in ("X", "Y", "R"):
                        for source in ("estimated", "oracle"):
                            for comparison in ("weighted_population", "controlled_difference", "shared_space"):
                                rows.append(_row(rng, **base, comparison=comparison, control=control,
                                                 weight_source=source, group=group))  # fmt: skip
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def calibration() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    frames = []
    for dataset in DATASETS:
        n = 2_000
        groups = rng.integers(0, 2, n)
        scores = {m: rng.random(n) for m in MODELS}
        y = (rng.random(n) < scores["x"]).astype(int)
        frame = calibration_table(y, groups, scores, group_labels=GROUPS, n_bins=5)
        frames.append(frame.assign(dataset=dataset))
    return pd.concat(frames, ignore_index=True)


def _check_outputs(written, tmp_path, stem, *, nrows, ncols):
    """Both files exist and are non-empty; the PNG reads back with the grid's rough aspect."""
    png, pdf = tmp_path / f"{stem}.png", tmp_path / f"{stem}.pdf"
    assert written == [png, pdf]
    assert png.stat().st_size > 0 and pdf.stat().st_size > 0
    assert pdf.read_bytes()[:5] == b"%PDF-"
    image = mpimg.imread(png)
    height, width = image.shape[:2]
    assert image.ndim == 3 and 1_000 <= width <= 6_000 and 800 <= height <= 6_000  # 200 dpi, inches
    # panels are ~3 x 2.5 in (calibration ~2.6 x 2.6) plus margins for labels and the legend
    expected = (ncols * 3.0) / (nrows * 2.5)
    assert expected / 1.3 < width / height < expected * 1.3
    assert not list(tmp_path.glob("*.tmp"))  # atomic writes leave no temporaries
    assert plt.get_fignums() == []  # nothing left open


def _paths(tmp_path, stem):
    return [tmp_path / f"{stem}.png", tmp_path / f"{stem}.pdf"]


def test_controlled_differences(table, tmp_path):
    written = plots.plot_controlled_differences(
        table, metric="log_loss", models=MODELS, paths=_paths(tmp_path, "figure_B4"), title="Log loss"
    )
    _check_outputs(written, tmp_path, "figure_B4", nrows=3, ncols=4)


def test_controlled_differences_oracle_two_models(table, tmp_path):
    written = plots.plot_controlled_differences(
        table, metric="auc", models=["x", "xa"], weight_source="oracle",
        datasets=["anticausal_label_shift"], paths=_paths(tmp_path, "figure_1"),
    )  # fmt: skip
    _check_outputs(written, tmp_path, "figure_1", nrows=2, ncols=4)


def test_weighted_population(table, tmp_path):
    written = plots.plot_weighted_population(table, metric="auc", models=MODELS, paths=_paths(tmp_path, "figure_B12"))
    _check_outputs(written, tmp_path, "figure_B12", nrows=2, ncols=3)


def test_shared_space(table, tmp_path):
    written = plots.plot_shared_space(table, metric="log_loss", models=MODELS, paths=_paths(tmp_path, "figure_B18"))
    _check_outputs(written, tmp_path, "figure_B18", nrows=2, ncols=3)


def test_relative_performance(table, tmp_path):
    written = plots.plot_relative_performance(table, metrics=METRICS, paths=_paths(tmp_path, "figure_B1"))
    _check_outputs(written, tmp_path, "figure_B1", nrows=2, ncols=2)


def test_calibration_curves(calibration, tmp_path):
    written = plots.plot_calibration_curves(calibration, paths=_paths(tmp_path, "figure_B2"))
    # square panels: 3 model rows x 2 setting columns is taller than wide
    _check_outputs(written, tmp_path, "figure_B2", nrows=3 * 3.0 / 2.5, ncols=2)


@pytest.mark.parametrize(
    ("func", "kwargs", "match"),
    [
        (plots.plot_controlled_differences, {"metric": "brier", "models": MODELS}, "metric 'brier'"),
        (plots.plot_controlled_differences, {"metric": "auc", "models": ["x", "bayes_x"]}, r"model\(s\) \['bayes_x'\]"),
        (plots.plot_controlled_differences, {"metric": "auc", "models": MODELS, "datasets": ["outcome_shift"]},
         r"dataset\(s\) \['outcome_shift'\]"),
        (plots.plot_controlled_differences, {"metric": "auc", "models": MODELS, "weight_source": "nope"},
         "no rows for weight_source 'nope'"),
        (plots.plot_weighted_population, {"metric": "precision", "models": MODELS}, "metric 'precision'"),
        (plots.plot_weighted_population, {"metric": "auc", "models": MODELS, "weight_source": "nope"},
         "no rows for weight_source 'nope'"),
        (plots.plot_shared_space, {"metric": "auc", "models": MODELS, "weight_source": "nope"},
         "no rows for weight_source 'nope'"),
        (plots.plot_weighted_population, {"metric": "auc", "models": ["bayes_xa"]}, "bayes_xa"),
        (plots.plot_shared_space, {"metric": "net_benefit", "models": MODELS}, "metric 'net_benefit'"),
        (plots.plot_shared_space, {"metric": "auc", "models": MODELS, "datasets": ["acs_income"]}, "acs_income"),
        (plots.plot_relative_performance, {"metrics": ["auc", "label_rate"]}, r"metric\(s\) \['label_rate'\]"),
        (plots.plot_relative_performance, {"metrics": METRICS, "models": ["x"]}, r"model\(s\) \['x'\]"),
    ],
)  # fmt: skip
def test_missing_rows_raise(table, tmp_path, func, kwargs, match):
    with pytest.raises(ValueError, match=match):
        func(table, paths=_paths(tmp_path, "figure"), **kwargs)
    assert not list(tmp_path.iterdir())


def test_calibration_missing_rows_raise(calibration, tmp_path):
    with pytest.raises(ValueError, match=r"model\(s\) \['bayes_x'\]"):
        plots.plot_calibration_curves(calibration, models=["x", "bayes_x"], paths=_paths(tmp_path, "f"))
    with pytest.raises(ValueError, match="selection_x"):
        plots.plot_calibration_curves(calibration, datasets=["selection_x"], paths=_paths(tmp_path, "f"))
    with pytest.raises(ValueError, match=r"missing columns \['dataset'\]"):
        plots.plot_calibration_curves(calibration.drop(columns="dataset"), paths=_paths(tmp_path, "f"))


def test_save_figure_rejects_bad_paths_and_closes(tmp_path):
    for bad in (tmp_path / "with space.png", tmp_path / "figure.jpg"):
        fig = plt.figure()
        with pytest.raises(ValueError, match=r"spaces|\.png or \.pdf"):
            plots.save_figure(fig, [tmp_path / "ok.png", bad])
        assert not plt.fignum_exists(fig.number)
    assert not list(tmp_path.iterdir())  # validated before anything is written

    fig, ax = plt.subplots(figsize=(2, 1))
    ax.plot([0, 1], [0, 1])
    written = plots.save_figure(fig, tmp_path / "sub" / "line.png")
    assert written == [tmp_path / "sub" / "line.png"]
    assert mpimg.imread(written[0]).shape[:2] == (200, 400)  # 200 dpi
    assert plt.get_fignums() == []


def test_labels_cover_the_contract():
    assert set(plots.CONTROL_LABELS) == {"none", "X", "Y", "R"}
    assert {"x", "xa", "xa_stratified", "bayes_x", "bayes_xa"} <= set(plots.MODEL_LABELS)
    # Every metric of the pipeline's tables has a label (the library labels more metrics).
    assert {"log_loss", "auc", "sensitivity", "specificity", "precision", "net_benefit", "label_rate",
            "predicted_positive_rate"} <= set(plots.METRIC_LABELS)  # fmt: skip
    assert plots.SETTING_LABELS["low_overlap_causal"] == "Separable"
    assert plots.DATASET_LABELS["acs_income"] == "ACSIncome"
    # One home for names: the labels are the vocabulary's own objects.
    assert plots.METRIC_LABELS is vocabulary.METRIC_LABELS and plots.MODEL_LABELS is vocabulary.MODEL_LABELS
    assert plots.CONTROL_LABELS is vocabulary.CONTROL_LABELS and plots.SETTING_LABELS is vocabulary.DATASET_LABELS


def test_plots_imports_no_computational_module():
    """plots takes its names from the vocabulary: importing it loads neither acs (folktables) nor
    simulate, evaluation, metrics or bootstrap (so editing them reruns no figure job)."""
    code = (
        "import sys, disaggregated_eval.plots\n"
        "heavy = ['acs', 'simulate', 'evaluation', 'metrics', 'bootstrap', 'models', 'calibration']\n"
        "print(sorted(m for m in heavy if 'disaggregated_eval.' + m in sys.modules), 'folktables' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[] False"


def test_unweighted_control_rows_are_shared_by_weight_sources():
    """``control == "none"`` rows may carry weight_source "none"; a duplicate under the requested
    source wins, and other sources are dropped."""
    base = {"dataset": "s", "model": "x", "group": "A = 0", "metric": "auc"}
    rows = pd.DataFrame(
        [
            {**base, "control": "none", "weight_source": "none", "estimate": 1.0},
            {**base, "control": "none", "weight_source": "oracle", "estimate": 2.0},
            {**base, "control": "X", "weight_source": "oracle", "estimate": 3.0},
            {**base, "control": "X", "weight_source": "estimated", "estimate": 4.0},
        ]
    )
    assert plots._with_weight_source(rows, "oracle", "ctx")["estimate"].tolist() == [2.0, 3.0]
    assert plots._with_weight_source(rows, "estimated", "ctx")["estimate"].tolist() == [1.0, 4.0]


# ---- undefined and degenerate estimates, intervals, labels (issue: figures a reader can trust) ----
def _capture(monkeypatch) -> list:
    """Replace save_figure so that the built figure is kept for inspection instead of written."""
    figures = []

    def keep(fig, paths):
        figures.append(fig)
        return []

    monkeypatch.setattr(plots, "save_figure", keep)
    return figures


def _with_caveats(table: pd.DataFrame) -> pd.DataFrame:
    """The fixture's table with the tidy column ``caveat``: T_a of x in covariate_shift (log loss, V = Y)
    degenerate at exactly 0, T_a of xa there (V = R) undefined (NaN estimate and interval)."""
    out = table.copy()
    cell = (out["dataset"] == "covariate_shift") & (out["metric"] == "log_loss")
    cell &= out["comparison"] == "controlled_difference"
    degenerate = cell & (out["model"] == "x") & (out["control"] == "Y")
    undefined = cell & (out["model"] == "xa") & (out["control"] == "R")
    out.loc[degenerate, ["estimate", "ci_low", "ci_high", "caveat"]] = [0.0, 0.0, 0.0, "degenerate"]
    out.loc[undefined, ["estimate", "ci_low", "ci_high", "caveat"]] = [np.nan, np.nan, np.nan, "undefined"]
    return out


def _hollow(line) -> bool:
    return line.get_markerfacecolor() in ("white", "w", (1.0, 1.0, 1.0, 1.0))


def test_degenerate_and_undefined_estimates_are_hollow_without_interval(table, monkeypatch):
    figures = _capture(monkeypatch)
    marked = _with_caveats(table)
    plots.plot_controlled_differences(marked, metric="log_loss", models=MODELS, paths=["f.png"])
    (fig,) = figures
    axes = np.array(fig.axes[: 3 * 4]).reshape(3, 4)  # rows x, xa, xa_stratified; columns none, X, Y, R
    row = DATASETS.index("covariate_shift")  # y position of the dataset
    # Degenerate (x, V = Y): a hollow marker at 0 for each group, no interval on that row.
    ax = axes[0, 2]
    hollow = [ln for ln in ax.get_lines() if _hollow(ln) and len(ln.get_xdata())]
    assert sorted(float(x) for ln in hollow for x in ln.get_xdata()) == [0.0, 0.0]
    assert all(abs(float(y) - row) < 0.5 for ln in hollow for y in ln.get_ydata())
    segments = [seg for coll in ax.collections for seg in coll.get_segments()]
    assert segments and all(abs(seg[0][1] - row) >= 0.5 for seg in segments)  # other rows keep theirs
    points = [ln for ln in ax.get_lines() if ln.get_linestyle() == "None" and ln.get_marker() != "|"]
    filled = [y for ln in points if not _hollow(ln) for y in ln.get_ydata()]
    assert all(abs(y - row) >= 0.5 for y in filled)  # never drawn as an ordinary estimate
    # Undefined (xa, V = R): hollow markers at the panel's left edge (axes fraction), off the data axis.
    ax = axes[1, 3]
    edge = [ln for ln in ax.get_lines() if _hollow(ln) and len(ln.get_xdata())]
    assert len(edge) == 2 and all(ln.get_transform() != ax.transData for ln in edge)
    assert all(float(x) == pytest.approx(0.02) for ln in edge for x in ln.get_xdata())
    # The legend says what hollow means, once per kind present.
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend.count(plots.CAVEAT_LEGEND["degenerate"]) == 1
    assert legend.count(plots.CAVEAT_LEGEND["undefined"]) == 1


def test_figures_without_marked_cells_have_no_hollow_legend(table, monkeypatch):
    figures = _capture(monkeypatch)
    plots.plot_controlled_differences(table, metric="auc", models=MODELS, paths=["f.png"])
    legend = [t.get_text() for t in figures[0].legends[0].get_texts()]
    assert not set(plots.CAVEAT_LEGEND.values()) & set(legend)


@pytest.mark.parametrize(
    ("func", "kwargs"),
    [
        (plots.plot_weighted_population, {"metric": "log_loss", "models": MODELS}),
        (plots.plot_shared_space, {"metric": "log_loss", "models": MODELS}),
        (plots.plot_relative_performance, {"metrics": METRICS}),
    ],
)
def test_every_forest_figure_marks_caveats(table, monkeypatch, func, kwargs):
    """The other figures of tidy tables draw marked cells hollow too (one drawing routine)."""
    figures = _capture(monkeypatch)
    marked = table.copy()
    comparison = {"plot_weighted_population": "weighted_population", "plot_shared_space": "shared_space",
                  "plot_relative_performance": "relative"}[func.__name__]  # fmt: skip
    cell = (marked["comparison"] == comparison) & (marked["dataset"] == "covariate_shift")
    cell &= (marked["metric"] == "log_loss") & (marked["model"] == "xa") & (marked["group"] == "A = 0")
    assert cell.any()
    marked.loc[cell, ["ci_low", "ci_high", "caveat"]] = [0.1, 0.1, "degenerate"]
    marked.loc[cell, "estimate"] = 0.1
    func(marked, paths=["f.png"], **kwargs)
    hollow = [ln for ax in figures[0].axes for ln in ax.get_lines() if _hollow(ln) and len(ln.get_xdata())]
    assert hollow and all(float(x) == 0.1 for ln in hollow for x in ln.get_xdata())
    assert plots.CAVEAT_LEGEND["degenerate"] in [t.get_text() for t in figures[0].legends[0].get_texts()]


def test_intervals_are_drawn_over_small_markers_with_caps(monkeypatch):
    """An interval narrower than a marker stays visible: its line and caps lie over the marker."""
    figures = _capture(monkeypatch)
    rows = []
    for control in CONTROLS:
        for group, (est, half) in zip(GROUPS, [(0.001, 1e-4), (-0.02, 0.01)]):
            rows.append({"dataset": "covariate_shift", "model": "x", "comparison": "controlled_difference",
                         "control": control, "weight_source": "none" if control == "none" else "estimated",
                         "group": group, "metric": "auc", "estimate": est, "ci_low": est - half,
                         "ci_high": est + half, "caveat": ""})  # fmt: skip
    plots.plot_controlled_differences(pd.DataFrame(rows), metric="auc", models=["x"], paths=["f.png"])
    ax = figures[0].axes[0]
    intervals = [c for c in ax.collections if len(c.get_segments())]
    markers = [ln for ln in ax.get_lines() if ln.get_marker() not in ("|", "*", "None", None, "")]  # "*": excludes 0
    caps = [ln for ln in ax.get_lines() if ln.get_marker() == "|"]
    assert len(intervals) == 2 and min(c.get_zorder() for c in intervals) > max(ln.get_zorder() for ln in markers)
    assert min(c.get_zorder() for c in caps) >= max(c.get_zorder() for c in intervals)
    assert max(ln.get_markersize() for ln in markers) <= 3.5  # points; the caps are taller
    cap_x = sorted(float(x) for c in caps for x in c.get_xdata())
    assert cap_x == pytest.approx(sorted([0.001 - 1e-4, 0.001 + 1e-4, -0.03, -0.01]))


def _texts(fig) -> list[str]:
    texts = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    return [t for t in texts if t]


def test_one_spelling_of_the_controls_in_every_figure(table, monkeypatch):
    """Every figure names the controls as the vocabulary does ("Control: X"), never "control: x"."""
    figures = _capture(monkeypatch)
    plots.plot_controlled_differences(table, metric="auc", models=MODELS, paths=["f.png"])
    plots.plot_weighted_population(table, metric="auc", models=MODELS, paths=["f.png"])
    plots.plot_shared_space(table, metric="auc", models=MODELS, paths=["f.png"])
    texts = [t for fig in figures for t in _texts(fig)]
    for label in vocabulary.CONTROL_LABELS.values():
        assert any(label in t for t in texts), label
    assert not [t for t in texts if "control:" in t]  # the lower-case spelling of the old legends
    legend = [t.get_text() for t in figures[1].legends[0].get_texts()]
    assert "$M_a$ (Control: X)" in legend and "$M_a$ (Control: none)" in legend


def test_tables_without_the_caveat_column_are_refused(table, monkeypatch):
    _capture(monkeypatch)
    with pytest.raises(ValueError, match="no 'caveat' column"):
        plots.plot_controlled_differences(table.drop(columns="caveat"), metric="auc", models=MODELS, paths=["f.png"])


def test_plots_imports_no_seaborn():
    """The paper's figures need matplotlib only (seaborn belongs to no install extra of the library)."""
    code = "import sys, disaggregated_eval.plots\nprint('seaborn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# ---- the coverage figure ----------------------------------------------------------------------------
def _coverage_table(n_datasets: int = 7) -> pd.DataFrame:
    """A coverage table of the study's shape: every cell at one of a few coverages (so that many cells
    share a value), some at exactly 1, and the degenerate cells of xa with V = R (width 0)."""
    rows = []
    values = [0.9, 0.95, 1.0]
    for d, dataset in enumerate(vocabulary.MAIN_SETTINGS[:n_datasets]):
        for model in ("x", "xa"):
            for control in CONTROLS:
                for group in GROUPS:
                    for m, metric in enumerate(METRICS):
                        degenerate = model == "xa" and control == "R"
                        rows.append({"dataset": dataset, "model": model, "control": control,
                                     "weight_source": "none" if control == "none" else "estimated", "group": group,
                                     "metric": metric, "coverage": 1.0 if degenerate else values[(d + m) % 3],
                                     "n_replicates": 200, "nominal_band_low": 0.92, "nominal_band_high": 0.98,
                                     "mean_width": 0.0 if degenerate else 0.01})  # fmt: skip
    return pd.DataFrame(rows)


def test_coverage_figure_keeps_every_cell_apart_and_unclipped(monkeypatch):
    figures = _capture(monkeypatch)
    table = _coverage_table()
    plots.plot_coverage(table, paths=["coverage.png"])
    (fig,) = figures
    axes = [ax for ax in fig.axes if ax.get_lines()]
    n_points = 0
    for ax in axes:
        points = [
            (float(x), float(y))
            for ln in ax.get_lines()
            if ln.get_linestyle() == "None"
            for x, y in zip(ln.get_xdata(), ln.get_ydata())
        ]
        n_points += len(points)
        assert len(set(points)) == len(points), "two cells drawn at one position"
        assert ax.get_xlim()[1] > 1.0  # a point at coverage 1 is drawn whole
        assert all(not ln.get_clip_on() for ln in ax.get_lines() if ln.get_linestyle() == "None")
    # every cell is drawn once (V = none is shared by the weight sources of a model: one row per model here)
    assert n_points == len(table)
    # seven settings, seven distinct colour-blind-safe colours, in the legend's order
    legend = fig.legends[0]
    labels = [t.get_text() for t in legend.get_texts()]
    colors = [
        h.get_color() for h, lab in zip(legend.legend_handles, labels) if lab in vocabulary.SETTING_LABELS.values()
    ]
    assert len(colors) == 7 and len(set(colors)) == 7 and set(colors) <= set(plots.OKABE_ITO)
    # the degenerate cells (xa, V = R: intervals of width 0) are hollow, and the legend says so
    hollow = [ln for ax in axes for ln in ax.get_lines() if _hollow(ln)]
    assert sum(len(ln.get_xdata()) for ln in hollow) == int((table["mean_width"] == 0).sum())
    assert any("width 0" in lab for lab in labels)


def test_coverage_figure_refuses_more_datasets_than_colours(tmp_path):
    table = _coverage_table()
    extra = table[table["dataset"] == "covariate_shift"]
    many = pd.concat([table] + [extra.assign(dataset=f"other_{i}") for i in range(2)], ignore_index=True)
    with pytest.raises(ValueError, match="at most 8 datasets apart; got 9"):
        plots.plot_coverage(many, paths=[tmp_path / "c.png"])


def test_shared_space_figure_says_what_it_shows(table, tmp_path, monkeypatch):
    """B18-B24 read without the report: a title and x labels saying "shared space" (issue 22, item 11)."""
    figures = _capture(monkeypatch)
    plots.plot_shared_space(table, metric="auc", models=MODELS, paths=_paths(tmp_path, "figure_B19"))
    (fig,) = figures
    assert fig._suptitle is not None
    assert fig._suptitle.get_text() == plots.shared_space_title("auc")
    assert "AUC" in fig._suptitle.get_text() and "shared space (Cai et al.)" in fig._suptitle.get_text()
    xlabels = {ax.get_xlabel() for ax in fig.axes if ax.get_xlabel()}
    assert xlabels == {f"{plots.METRIC_LABELS['auc']} (shared space)"}


def test_a_controlled_difference_interval_that_excludes_0_is_starred(table, tmp_path, monkeypatch):
    """An interval 1e-4 wide sits under its marker, so whether it covers 0 cannot be seen (``xa`` with
    ``V = R``): every interval that excludes 0 gets a star, and no other (issue 22, item 11)."""
    data = table.copy()
    short = (data["comparison"] == "controlled_difference") & (data["model"] == "xa") & (data["control"] == "R")
    short &= data["weight_source"] == "estimated"
    lows = np.where(np.arange(short.sum()) % 2 == 0, 4e-5, -2e-5)  # excludes 0, covers 0, ...
    data.loc[short, "ci_low"] = lows
    data.loc[short, "ci_high"] = lows + 1e-4
    data.loc[short, "estimate"] = lows + 5e-5
    figures = _capture(monkeypatch)
    plots.plot_controlled_differences(data, metric="log_loss", models=MODELS, paths=_paths(tmp_path, "figure_B4"))
    (fig,) = figures
    rows = data[(data["comparison"] == "controlled_difference") & (data["metric"] == "log_loss")]
    rows = rows[rows["weight_source"].isin(["estimated", "none"])]
    panels = fig.axes[: len(MODELS) * len(CONTROLS)]
    for k, ax in enumerate(panels):
        model, control = MODELS[k // len(CONTROLS)], CONTROLS[k % len(CONTROLS)]
        panel = rows[(rows["model"] == model) & (rows["control"] == control)]
        expected = int(((panel["ci_low"] > 0) | (panel["ci_high"] < 0)).sum())
        stars = sum(len(line.get_xdata()) for line in ax.get_lines() if line.get_marker() == "*")
        assert stars == expected, (model, control)
    assert sum((rows["model"] == "xa") & (rows["control"] == "R") & (rows["ci_low"] > 0)) > 0  # the case exists
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert plots.EXCLUDES_ZERO in legend


def test_selection_figure_says_why_a_panel_is_empty(monkeypatch):
    """A slice with fewer than 10 rows in the metric's denominator is withheld (as the study withholds it):
    its panel says so with the rows, draws no band and no truth line; a panel without finite bounds says
    "no estimate"; one of width 0 at every Gamma draws a line and says so; the others draw the two bands."""
    figures = _capture(monkeypatch)
    gammas = [1.0, 1.5, 2.0]
    rows, truth = [], []
    for slice_, n in (("A = 0", 4), ("A = 1", 120), ("overall", 124)):
        for metric in ("sensitivity", "label_rate"):
            nan = slice_ == "A = 1" and metric == "label_rate"  # undefined bounds, enough rows
            flat = slice_ == "A = 1" and metric == "sensitivity"  # e.g. no predicted positive: 0 whatever the weights
            for g in gammas:
                half = 0.0 if flat else 0.02 * g
                mid = 0.0 if flat else 0.5
                rows.append({"slice": slice_, "metric": metric, "quantity": "metric", "gamma": g,
                             "bound_low": np.nan if nan else mid - half, "bound_high": np.nan if nan else mid + half,
                             "bound_ci_low": mid - 5 * half, "bound_ci_high": mid + 5 * half,
                             "n_denominator": n})  # fmt: skip
            truth.append({"slice": slice_, "metric": metric, "quantity": "metric", "truth": 0.52})
    plots.plot_selection_bounds(pd.DataFrame(rows), pd.DataFrame(truth), paths=["s.png"], gamma_star=1.4)
    (fig,) = figures
    panels = [ax for ax in fig.axes if ax.get_title() or ax.get_ylabel() or ax.get_xlabel() or ax.collections
              or ax.texts]  # fmt: skip
    texts = {(ax.get_subplotspec().rowspan.start, ax.get_subplotspec().colspan.start): [t.get_text() for t in ax.texts]
             for ax in panels}  # fmt: skip
    # columns: A = 0, A = 1, overall (metric); rows: sensitivity, label_rate (the vocabulary's order)
    withheld = "withheld: 4 rows\nin the denominator\n(fewer than 10)"
    assert texts[(0, 0)] == [withheld] and texts[(1, 0)] == [withheld]
    assert texts[(1, 1)] == ["no estimate"]
    assert texts[(0, 1)] == ["0 at every Gamma:\nevery row gives the same value"] and texts[(0, 2)] == []
    by_position = {(ax.get_subplotspec().rowspan.start, ax.get_subplotspec().colspan.start): ax for ax in panels}
    assert not by_position[(0, 0)].collections and len(by_position[(0, 2)].collections) == 2  # two bands
    solid = [ln for ln in by_position[(0, 1)].get_lines() if ln.get_linestyle() == "-"]
    assert [list(ln.get_ydata()) for ln in solid] == [[0.0, 0.0, 0.0]]  # the collapsed band, drawn as a line
    dashed = [ln for ln in by_position[(0, 0)].get_lines() if ln.get_linestyle() == "--"]
    assert not dashed  # no truth line around which an empty box would be scaled
    assert list(by_position[(1, 0)].get_xticks()) == gammas  # the Gamma grid still labelled under a withheld panel


# ---- the one drawing of estimates with intervals (the study's figures and the audit's) -------------
def _draw_rows(style=None):
    """Five rows on fresh axes: ordinary, withheld (interval only), degenerate, undefined, and an
    ordinary one of a second family whose interval excludes 0; with a band."""
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    nan = np.nan
    plots.draw_interval_rows(
        ax, np.arange(5.0), [0.1, nan, 0.3, nan, 0.5], [-0.1, -0.2, nan, nan, 0.4], [0.2, 0.3, nan, nan, 0.6],
        colors=["#0173b2", "#de8f05"], family=[0, 0, 0, 0, 1], marker="s",
        caveat=["", "", "degenerate", "undefined", ""], shown=[True, False, True, True, True],
        band_low=[-0.3, -0.4, nan, nan, 0.35], band_high=[0.4, 0.5, nan, nan, 0.65], star_excluding_zero=True,
        **({} if style is None else {"style": style}),
    )  # fmt: skip
    return ax


def _ys(artists) -> list[float]:
    return sorted(float(y) for a in artists for y in (a.get_ydata() if hasattr(a, "get_ydata") else []))


def test_draw_interval_rows_draws_each_kind_of_row():
    from matplotlib.colors import to_rgba

    ax = _draw_rows()
    band, solid, dashed = ax.collections  # bands, shown intervals, withheld intervals
    assert [seg[0][1] for seg in band.get_segments()] == [0.0, 1.0, 4.0] and band.get_alpha() == 0.35
    assert tuple(band.get_colors()[1][:3]) == plots.WITHHELD_COLOR  # the withheld row's band is grey
    assert [seg[0][1] for seg in solid.get_segments()] == [0.0, 4.0]
    assert [seg[0][1] for seg in dashed.get_segments()] == [1.0]
    assert tuple(dashed.get_colors()[0][:3]) == plots.WITHHELD_COLOR and dashed.get_linestyles()[0][1] is not None
    assert solid.get_zorder() > max(ln.get_zorder() for ln in ax.get_lines() if ln.get_marker() == "s"
                                    and not _hollow(ln))  # fmt: skip
    lines = ax.get_lines()
    points = [ln for ln in lines if ln.get_marker() == "s" and not _hollow(ln)]
    assert _ys(points) == [0.0, 4.0]  # none for the withheld row nor the caveats
    assert [to_rgba(ln.get_color()) for ln in points] == [to_rgba("#0173b2"), to_rgba("#de8f05")]  # per family
    caps = [ln for ln in lines if ln.get_marker() == "|"]
    assert sorted(float(x) for ln in caps for x in ln.get_xdata()) == pytest.approx([-0.1, 0.2, 0.4, 0.6])
    stars = [ln for ln in lines if ln.get_marker() == "*"]
    assert _ys(stars) == [4.0]  # only the interval that excludes 0
    hollow = [ln for ln in lines if _hollow(ln)]
    assert [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in hollow] == [([0.3], [2.0]), ([0.02], [3.0])]
    assert hollow[1].get_transform() is ax.get_yaxis_transform()  # undefined: left edge, x in axes fraction


def test_draw_interval_rows_in_the_audits_style():
    from disaggregated_eval.audit.forest_figures import _STYLE

    ax = _draw_rows(_STYLE)
    points = [ln for ln in ax.get_lines() if ln.get_marker() == "s" and not _hollow(ln)]
    _, solid, dashed = ax.collections
    assert min(ln.get_zorder() for ln in points) > max(solid.get_zorder(), dashed.get_zorder())  # points on top
    assert not [ln for ln in ax.get_lines() if ln.get_marker() == "|"]  # no caps
    assert {ln.get_markersize() for ln in points} == {_STYLE.point_size}


def test_draw_interval_rows_refuses_arrays_of_other_shapes():
    from matplotlib.figure import Figure

    ax = Figure().add_subplot()
    ok = dict(colors=["k"])
    with pytest.raises(ValueError, match=r"low must have one value per row, shape \(3,\); got shape \(2,\)"):
        plots.draw_interval_rows(ax, [0, 1, 2], [0, 0, 0], [0, 0], [1, 1, 1], **ok)
    with pytest.raises(ValueError, match="family must index colors"):
        plots.draw_interval_rows(ax, [0, 1], [0, 0], [0, 0], [1, 1], colors=["k"], family=[0, 1])
    with pytest.raises(ValueError, match="band_low and band_high must be given together"):
        plots.draw_interval_rows(ax, [0, 1], [0, 0], [0, 0], [1, 1], band_low=[0, 0], **ok)
    rows = ([0, 1], [0, 0], [0, 0], [1, 1])
    with pytest.raises(ValueError, match=r"family must be integer indices into colors; got 0, 0\.7"):
        plots.draw_interval_rows(ax, *rows, colors=["k", "r"], family=[0, 0.7])
    with pytest.raises(ValueError, match=r"shown must be booleans \(False: a withheld row\); got 'no'"):
        plots.draw_interval_rows(ax, *rows, shown=["no", "no"], **ok)
    with pytest.raises(
        ValueError, match=r"caveat must be one of \['', 'degenerate', 'undefined'\] per row; got 'bogus'"
    ):
        plots.draw_interval_rows(ax, *rows, caveat=["", "bogus"], **ok)
    with pytest.raises(ValueError, match="colors must hold at least one colour"):
        plots.draw_interval_rows(ax, *rows, colors=[])
    assert not ax.collections and not ax.get_lines()


def test_the_study_figures_draw_their_rows_with_the_one_drawing(table, monkeypatch):
    """Every panel's rows go through draw_interval_rows, one call per group shown (no second drawing)."""
    figures = _capture(monkeypatch)
    calls = []
    original = plots.draw_interval_rows
    monkeypatch.setattr(plots, "draw_interval_rows", lambda ax, *a, **k: calls.append(ax) or original(ax, *a, **k))
    plots.plot_controlled_differences(table, metric="auc", models=MODELS, paths=["f.png"])
    panels = figures[0].axes[: len(MODELS) * len(CONTROLS)]
    assert [calls.count(ax) for ax in panels] == [len(GROUPS)] * len(panels)
