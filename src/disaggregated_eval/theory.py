"""The paper's theory tables (Table 2, Supplementary Tables B1 and B2) next to the empirical T_a.

Each theory cell says whether a model/setting pair implies ``{R, Y} ⊥ A | V`` (✓) or not (✗). A ✓
implies ``T_a = 0`` for every metric and subgroup, so its bootstrap interval should cover 0 (up to
the 5% of intervals that miss by chance, and up to estimation error of fitted models and weights).
A ✗ only says the property is *not implied*: ``T_a`` may still be 0, so a covering interval there is
no contradiction. :func:`theory_coverage` lays the two side by side; a ``T_a`` that is undefined or
degenerate (a zero-width bootstrap interval) is marked as such and not counted as covering 0.

Correspondences used (paper sections 4.1-4.2 and A.2): ``V = R`` tests sufficiency
(``Y ⊥ A | R``); ``V = Y`` tests separation (``R ⊥ A | Y``); ``V = X`` tests ``{R, Y} ⊥ A | X``.
Model roles: ``bayes_x`` is the population Bayes-optimal ``f*``, ``bayes_xa`` the subgroup
Bayes-optimal ``f*_A``, ``x`` and ``xa`` the arbitrary (fitted) ``f`` with ``Z = X`` and
``Z = {X, A}``.
"""

from __future__ import annotations

import pandas as pd

__all__ = ["EXPECTED", "expected_table", "theory_coverage"]

_MODELS = ("bayes_x", "x", "bayes_xa", "xa")
_OTHER = {  # "Other Y not-independent-of A given X" rows of Table 2
    "none": (False, False, False, False),
    "X": (False, False, False, False),
    "Y": (False, False, False, False),
    "R": (False, False, True, False),
}
_TABLE2 = {
    "covariate_shift": {
        "none": (False, False, False, False),
        "X": (True, True, True, False),
        "Y": (False, False, False, False),
        "R": (True, False, True, False),
    },
    "anticausal_label_shift": {
        "none": (False, False, False, False),
        "X": (False, False, False, False),
        "Y": (True, True, False, False),
        "R": (False, False, True, False),
    },
    "outcome_shift": _OTHER,
    "complex_causal_shift": _OTHER,
    "anticausal_presentation_shift": _OTHER,
    "complex_anticausal_shift": _OTHER,
}
# Supplementary Table B1: (sufficiency Z=X, sufficiency Z={X,A}, separation Z=X, separation Z={X,A}).
_TABLEB1 = {
    "covariate_shift": (True, True, False, False),
    "outcome_shift": (False, True, False, False),
    "complex_causal_shift": (False, True, False, False),
    "anticausal_label_shift": (False, True, True, False),
    "anticausal_presentation_shift": (False, True, False, False),
    "complex_anticausal_shift": (False, True, False, False),
}
# Supplementary Table B2, rows "Other" (the complex causal graph) with selection on X, Y, {A, Y};
# the Bayes-optimal models are those of the selected population. Same column order as B1.
_TABLEB2 = {
    "selection_x": (False, True, False, False),
    "selection_y": (False, True, False, False),
    "selection_ya": (False, False, False, False),
}


def _rows():
    for dataset, cells in _TABLE2.items():
        for control, flags in cells.items():
            for model, flag in zip(_MODELS, flags, strict=True):
                yield ("Table 2", dataset, model, control, "{R,Y} ⊥ A | V", flag)
    for table, source in (("Table B1", _TABLEB1), ("Table B2", _TABLEB2)):
        for dataset, (suff_x, suff_xa, sep_x, sep_xa) in source.items():
            yield (table, dataset, "bayes_x", "R", "sufficiency", suff_x)
            yield (table, dataset, "bayes_xa", "R", "sufficiency", suff_xa)
            yield (table, dataset, "bayes_x", "Y", "separation", sep_x)
            yield (table, dataset, "bayes_xa", "Y", "separation", sep_xa)


#: One row per theory cell: table, dataset (a simulation setting), model, control, property,
#: expected (bool).
EXPECTED = tuple(_rows())


def expected_table() -> pd.DataFrame:
    """Return the theory cells as a frame (columns table, dataset, model, control, property, expected)."""
    return pd.DataFrame(list(EXPECTED), columns=["table", "dataset", "model", "control", "property", "expected"])


def theory_coverage(metrics_table: pd.DataFrame) -> pd.DataFrame:
    """Compare the theory tables with the empirical controlled differences ``T_a``.

    A cell whose ``T_a`` is undefined (no estimate) or degenerate (every bootstrap resample gave one
    value, so the "interval" is a point) carries that word in ``caveat`` and ``covers_zero`` is
    missing (``<NA>``) there: a zero-width interval at exactly 0 says nothing about whether the
    difference is 0 beyond chance, and an undefined one says nothing at all.

    Parameters
    ----------
    metrics_table : pandas.DataFrame
        Tidy metrics table of the simulation study (:func:`disaggregated_eval.evaluation.controlled_evaluation`
        concatenated over settings), with rows of ``comparison == "controlled_difference"`` and its
        ``caveat`` column (``""``, ``"undefined"`` or ``"degenerate"``); a table written before that
        column existed is refused (rerun the rule that wrote it).

    Returns
    -------
    pandas.DataFrame
        One row per theory cell, weight source, subgroup and metric present in the table:
        ``table, dataset, model, control, property, expected, weight_source, group, metric,
        estimate, ci_low, ci_high, caveat, covers_zero``; ``covers_zero`` is a nullable boolean
        (``ci_low <= 0 <= ci_high``; ``<NA>`` where ``caveat`` is not empty). Cells whose dataset or
        model is not in the table are left out.

    Raises
    ------
    ValueError
        If the table lacks the tidy columns (``caveat`` included).
    """
    needed = {"dataset", "model", "comparison", "control", "weight_source", "group", "metric",
              "estimate", "ci_low", "ci_high", "caveat"}  # fmt: skip
    missing = sorted(needed - set(metrics_table.columns))
    if missing:
        raise ValueError(f"metrics table lacks the columns {missing}")
    ta = metrics_table[metrics_table["comparison"] == "controlled_difference"]
    merged = expected_table().merge(ta, on=["dataset", "model", "control"], how="inner")
    merged["caveat"] = merged["caveat"].fillna("").astype(str)
    covers = (merged["ci_low"] <= 0) & (merged["ci_high"] >= 0)
    merged["covers_zero"] = covers.astype("boolean").mask(merged["caveat"] != "")
    cols = ["table", "dataset", "model", "control", "property", "expected", "weight_source",
            "group", "metric", "estimate", "ci_low", "ci_high", "caveat", "covers_zero"]  # fmt: skip
    order = ["table", "dataset", "model", "control", "weight_source", "group", "metric"]
    return merged[cols].sort_values(order, kind="stable").reset_index(drop=True)
