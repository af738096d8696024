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
            "n_resamples": 200, "n_undefined": 0}  # fmt: skip


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    """Small tidy metrics table in the contract of docs/design.md (2 datasets, 3 models, 2 groups)."""
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
