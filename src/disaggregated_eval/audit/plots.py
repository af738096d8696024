"""The figures of an audit: which figures a result has, and each drawn by its kind.

:func:`figure_specs` lists the figures of an audit's output folder (a forest plot per metric, a
``T_a`` plot per control, a calibration figure per family of slices, a threshold figure per family
when the audit has a threshold analysis) with their file names; :func:`plot_result` is
``AuditResult.plot`` (one figure by kind); :func:`spec_figure_data` gives the plain data of a listed
figure for the renderer (:mod:`.figure_rendering`). The figures themselves: :mod:`.forest_figures`
(:func:`~.forest_figures.plot_forest`, :func:`~.forest_figures.plot_controlled`) and
:mod:`.line_figures` (:func:`~.line_figures.plot_calibration`, :func:`~.line_figures.plot_thresholds`),
from the data of :mod:`.figure_data`, laid out by :mod:`.figure_layout`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from .. import vocabulary
from .figure_data import (
    FigureData,
    controlled_figure_data,
    controlled_figure_metrics,
    forest_figure_data,
    result_models,
)
from .forest_figures import plot_controlled, plot_forest
from .line_figures import (
    LineFigureData,
    calibration_figure_data,
    plot_calibration,
    plot_thresholds,
    thresholds_figure_data,
)
from .text import file_component

__all__ = [
    "plot_result",
    "figure_specs",
    "spec_figure_data",
]


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
    models = [m for m in result_models(result, None) if m in set(result.controlled["model"])]
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
        models = [m for m in result_models(result, None) if m in set(thresholds["model"])]
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


def spec_figure_data(result: Any, spec: Mapping[str, Any]) -> FigureData | LineFigureData:
    if spec["kind"] == "forest":
        return forest_figure_data(result, metric=spec["metric"], models=result_models(result, None))
    if spec["kind"] == "calibration":
        return calibration_figure_data(result, family=spec["family"])
    if spec["kind"] == "thresholds":
        return thresholds_figure_data(result, family=spec["family"], model=spec["model"])
    metrics = controlled_figure_metrics(result, spec["control"], spec["model"], None, None)
    return controlled_figure_data(result, control=spec["control"], model=spec["model"], metrics=metrics)
