"""The audit's figures carry their labels, for any number of models, slices and controls.

Every figure of three audits (1 model and 1 attribute with three controls; 2 models and 2
attributes; 3 models and 3 attributes, 60 slices, one level name long enough to wrap and holding
``$`` signs) is rendered as the output folder renders it, written as SVG (text kept as ``<text>``
elements) and read back: each slice name, model, metric and control must be in the text, each slice
label once per row of panels. The same figures, drawn with Agg, must keep every label inside the
figure and out of the panels, one label per row without overlaps. Rendering is deterministic (same
bytes twice, serial or in worker processes).

The audits are real (small synthetic data, 20 resamples, no permutations): only the figures are under
test here, not the numbers.
"""

from __future__ import annotations

import itertools
import re
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest

from disaggregated_eval import vocabulary
from disaggregated_eval.audit.text import file_component

LONG_REGION = "South-East coastal districts and islands (outlying territories) $5K-$10K"
SVG = "{http://www.w3.org/2000/svg}"
FAST = dict(n_resamples=40, n_permutations=0, max_leaf_nodes=[5], cv_folds=2, crossfit_folds=2)


def synthetic(n: int = 1200, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data = pd.DataFrame({
        "group": rng.choice(["A", "B", "C"], n, p=[0.5, 0.3, 0.2]),
        "sex": rng.choice(["Female", "Male"], n),
        "region": rng.choice(["North", LONG_REGION, "West", "Centre"], n, p=[0.4, 0.2, 0.3, 0.1]),
    })  # fmt: skip
    x = rng.normal(size=n) + 0.5 * (data["group"] == "B")
    data["y"] = rng.binomial(1, 1 / (1 + np.exp(-x)))
    data["model one"] = 1 / (1 + np.exp(-(x + rng.normal(0, 0.5, n))))
    data["model_two"] = 1 / (1 + np.exp(-(0.5 * x + rng.normal(0, 1, n))))
    data["m3"] = rng.uniform(size=n)
    return data


AUDITS = {
    "one_model": dict(scores=["model one"], groups=["group"], controls=["none", "Y", "R"],
                      metrics=["false_positive_rate", "precision", "auc", "accuracy"]),
    "two_models": dict(scores=["model one", "model_two"], groups=["group", "sex"], controls=["none", "Y"],
                       metrics=["false_positive_rate", "auc"], thresholds=["0.3:0.7:0.2"]),
    "three_models": dict(scores=["model one", "model_two", "m3"], groups=["group", "sex", "region"],
                         controls=["none", "Y"], metrics=["false_positive_rate", "auc"]),
}  # fmt: skip


@pytest.fixture(scope="module")
def audits():
    from disaggregated_eval.audit import audit

    data = synthetic()
    return {name: audit(data, label="y", **options, **FAST) for name, options in AUDITS.items()}


@pytest.fixture(scope="module")
def rendered(audits):
    from disaggregated_eval.audit.figure_rendering import render_figures

    return {name: render_figures(result) for name, result in audits.items()}


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def svg_texts(svg: bytes) -> list[str]:
    """One string per text artist: matplotlib writes an artist's lines as <text> children of one <g>."""
    root = ET.fromstring(svg)
    texts = []
    for group in root.iter(f"{SVG}g"):
        lines = [t.text or "" for t in group.findall(f"{SVG}text")]
        if lines:
            texts.append(" ".join(lines))
    return texts


def slice_label_count(texts: list[str], name: str, n: int) -> int:
    """Text artists that are exactly this slice's label, ``name (n=N)`` with an optional status (wrapping allowed)."""
    pattern = re.compile(re.escape(squash(name)) + re.escape(f"(n={n:,}") + r"(,withheld|,notevaluated,seenotes)?\)")
    return sum(bool(pattern.fullmatch(squash(t))) for t in texts)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(AUDITS))
def test_every_figure_carries_every_slice_model_metric_and_control_label(audits, rendered, name):
    result, figures = audits[name], rendered[name]
    options = AUDITS[name]
    first = result.slices.drop_duplicates("slice")
    sizes = dict(zip(first["slice"], first["n"], strict=True))
    assert LONG_REGION in " ".join(first["slice"]) or "region" not in options["groups"]
    expected = {f"forest_{m}" for m in options["metrics"]}
    several = len(options["scores"]) > 1
    # model names become file-name parts through text.file_component ("model one" -> "model_one-<hash>")
    expected |= {f"controlled_{c}_{file_component(s)}" if several else f"controlled_{c}" for c in options["controls"]
                 for s in options["scores"]}  # fmt: skip
    families = [f for f in pd.unique(first["attribute"]) if f != vocabulary.OVERALL]
    stems = {f: "_x_".join(f.split(" & ")) for f in families}
    expected |= {f"calibration_{stems[f]}" for f in families}
    if "thresholds" in options:
        expected |= {f"thresholds_{stems[f]}_{file_component(s)}" for f in families for s in options["scores"]}
    assert set(figures) == expected
    attribute = dict(zip(first["slice"], first["attribute"], strict=True))
    rates = ["Predicted positive rate", "True positive rate", "False positive rate"]
    for fig_name, (spec, images) in figures.items():
        texts = svg_texts(images["svg"])
        joined = "\n".join(texts)
        if spec["kind"] in ("calibration", "thresholds"):
            # a line figure: every slice of the family (and overall) named once in the legend, with its size
            family = spec["family"]
            heading = (
                "Calibration by slice: " if spec["kind"] == "calibration" else "Rates across thresholds by slice: "
            )
            assert any(t.startswith(heading + family) for t in texts), fig_name
            if spec["kind"] == "calibration":
                for model in options["scores"]:  # a panel per model, titled with it
                    assert texts.count(model) == 1, (fig_name, model)
            else:
                assert f"model {spec['model']}" in next(t for t in texts if t.startswith(heading)), fig_name
                for rate in rates:  # a panel per rate: its title and its y label
                    assert texts.count(rate) == 2, (fig_name, rate)
            for slice_name in ["overall"] + [s for s in sizes if attribute[s] == family]:
                assert slice_label_count(texts, slice_name, int(sizes[slice_name])) == 1, (fig_name, slice_name)
            others = [s for s in sizes if attribute[s] not in (family, vocabulary.OVERALL)]
            assert not any(slice_label_count(texts, s, int(sizes[s])) for s in others), fig_name
            continue
        if spec["kind"] == "forest":
            slices = list(sizes)
            panel_rows = -(-len(options["scores"]) // 3)
            metric = vocabulary.METRIC_LABELS[spec["metric"]]
            assert f"{metric} by slice" in texts, fig_name
            for model in options["scores"]:  # every panel is titled with its model
                assert texts.count(model) == 1, (fig_name, model)
            xlabels = [t for t in texts if t.startswith(metric) and t != f"{metric} by slice"]
            assert len(xlabels) == len(options["scores"]), fig_name  # every panel's x label names the metric
        else:
            slices = [s for s in sizes if s != vocabulary.OVERALL]
            panel_rows = -(-len(options["metrics"]) // 3)
            what = "no control" if spec["control"] == "none" else f"control V = {spec['control']}"
            assert any(what in t and f"model {spec['model']}" in t for t in texts), fig_name
            for metric in options["metrics"]:  # a panel per metric, titled with it
                assert texts.count(vocabulary.METRIC_LABELS[metric]) == 1, (fig_name, metric)
        for slice_name in slices:  # once on each row of panels, in full, with its size
            count = slice_label_count(texts, slice_name, int(sizes[slice_name]))
            assert count == panel_rows, (fig_name, slice_name, count)
        assert "$" in joined or "region" not in options["groups"]  # a '$' stays text, never mathtext


@pytest.mark.slow
def test_the_label_test_fails_when_a_label_is_missing(audits):
    # The reader above is not vacuous: drop one slice label from a rendered SVG and it is missed.
    from disaggregated_eval.audit.figure_rendering import render_figures

    result = audits["two_models"]
    _, images = render_figures(result, n_jobs=1)["forest_auc"]
    name = "group=B & sex=Male"
    n = int(result.slices.loc[result.slices["slice"] == name, "n"].iloc[0])
    svg = images["svg"].decode()
    assert slice_label_count(svg_texts(svg.encode()), name, n) == 1
    broken = svg.replace(f"{name.replace('&', '&amp;')} (n={n:,})", "")
    assert slice_label_count(svg_texts(broken.encode()), name, n) == 0


@pytest.mark.slow
@pytest.mark.parametrize("name", list(AUDITS))
def test_labels_stay_inside_the_figure_and_clear_of_the_panels(audits, name):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from disaggregated_eval.audit import forest_figures, line_figures

    result = audits[name]
    figures = [forest_figures.plot_forest(result, metric=m) for m in AUDITS[name]["metrics"]]
    figures += [forest_figures.plot_controlled(result, control=c, model=s) for c in AUDITS[name]["controls"]
                for s in AUDITS[name]["scores"]]  # fmt: skip
    figures += [line_figures.plot_calibration(result, family=f) for f in AUDITS[name]["groups"]]
    if "thresholds" in AUDITS[name]:
        figures += [
            line_figures.plot_thresholds(result, family=AUDITS[name]["groups"][-1], model=AUDITS[name]["scores"][-1])
        ]
    for fig in figures:
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        renderer = canvas.get_renderer()
        width, height = fig.bbox.width, fig.bbox.height
        panels = [ax.get_window_extent(renderer) for ax in fig.axes]
        texts = drawn_texts(fig)
        for text in texts:
            box = text.get_window_extent(renderer)
            # 1 pixel of slack: anti-aliased glyph edges
            assert box.x0 >= -1 and box.y0 >= -1 and box.x1 <= width + 1 and box.y1 <= height + 1, text.get_text()
        labels = [t for t in texts if "(n=" in t.get_text()]
        assert labels
        boxes = [t.get_window_extent(renderer) for t in labels]
        for box, label in zip(boxes, labels, strict=True):
            assert not any(box.overlaps(p) for p in panels), label.get_text()
        boxes.sort(key=lambda b: -b.y1)
        for upper, lower in itertools.pairwise(boxes):
            if upper.x0 < lower.x1 and lower.x0 < upper.x1:  # same column of labels
                assert lower.y1 <= upper.y0 + 0.5, "slice labels overlap"


def drawn_texts(fig) -> list:
    """The figure's non-empty texts that are drawn: titles, labels, legend, and the tick labels in view."""
    texts = list(fig.texts)
    for ax in fig.axes:
        texts += [*ax.texts, ax.title, ax.xaxis.label]
        low, high = sorted(ax.get_xlim())
        texts += [t.label1 for t in ax.xaxis.get_major_ticks() if low <= t.get_loc() <= high]
    return [t for t in texts if t.get_visible() and t.get_text()]


@pytest.mark.slow
def test_the_figure_grows_with_the_slices_and_the_models(rendered):
    one = rendered["one_model"]["forest_auc"][0]
    three = rendered["three_models"]["forest_auc"][0]
    # 60 slices in rows of 0.2 inches, 3 panels of 2.8 inches, a label column for 70-character names
    assert three["height_in"] > one["height_in"] + 0.2 * (60 - 4)
    assert three["width_in"] > one["width_in"] + 2 * 2.8


@pytest.mark.slow
def test_rendering_is_deterministic_in_any_process(audits):
    from disaggregated_eval.audit.figure_rendering import render_figures

    result = audits["two_models"]
    serial = render_figures(result, n_jobs=1)
    parallel = render_figures(result, n_jobs=2)
    again = render_figures(result)
    assert list(serial) == list(parallel) == list(again)
    for name in serial:
        assert serial[name] == parallel[name] == again[name], name
        png, svg = serial[name][1]["png"], serial[name][1]["svg"]
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and b"tIME" not in png  # no time stamp chunk
        assert b"<dc:date>" not in svg


def test_n_jobs_is_checked():
    from disaggregated_eval.audit.figure_rendering import _renderers

    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="n_jobs must be a positive number"):
            _renderers(5, bad)
    assert _renderers(5, 1) == 1
    assert _renderers(1, 4) == 1  # one figure: nothing to share


def test_the_audit_draws_its_rows_with_the_librarys_one_drawing(monkeypatch):
    """draw_forest draws every panel's rows with disaggregated_eval.plots.draw_interval_rows (the study's
    drawing too): a withheld slice as its interval only, a slice missing from a panel not at all."""
    import matplotlib as mpl

    from disaggregated_eval.audit import forest_figures
    from disaggregated_eval.audit.figure_data import FigureData, Panel
    from disaggregated_eval.audit.figure_layout import audit_style
    from disaggregated_eval.plots import WITHHELD_COLOR, draw_interval_rows

    calls = []

    def spy(ax, *args, **kwargs):
        calls.append(ax)
        return draw_interval_rows(ax, *args, **kwargs)

    monkeypatch.setattr(forest_figures, "draw_interval_rows", spy)
    nan = np.nan

    def panel(title, present):
        return Panel(title=title, xlabel="AUC", value=np.array([0.7, nan, 0.6]), low=np.array([0.6, 0.5, 0.5]),
                     high=np.array([0.8, 0.9, 0.7]), band_low=None, band_high=None,
                     shown=np.array([True, False, True]), present=np.array(present), reference=0.7)  # fmt: skip

    data = FigureData(title="AUC by slice", labels=("overall", "A=a", "A=b"), family=np.array([0, 1, 1]),
                      colors=((0.15, 0.15, 0.15), (0.0, 0.45, 0.7)), n=np.array([100, 4, 96]), separators=(0.5,),
                      panels=(panel("m1", [True, True, True]), panel("m2", [True, True, False])), ncols=2,
                      share_x=True, reference_label="overall value", missing_note="not computed")  # fmt: skip
    with mpl.rc_context(audit_style()):
        fig = forest_figures.draw_forest(data)
    panels = [ax for ax in fig.axes if ax.get_title() in ("m1", "m2")]
    assert calls == panels
    for ax, rows in zip(panels, ([0.0, 2.0], [0.0]), strict=True):
        solid, dashed = ax.collections
        assert [seg[0][1] for seg in solid.get_segments()] == rows  # m2 has no row for A=b
        assert [seg[0][1] for seg in dashed.get_segments()] == [1.0]
        assert tuple(dashed.get_colors()[0][:3]) == WITHHELD_COLOR
        points = [ln for ln in ax.get_lines() if ln.get_marker() == "o"]
        assert sorted(float(y) for ln in points for y in ln.get_ydata()) == rows  # no point for the withheld slice
