"""The theory tables are encoded as the paper states them and merged correctly with T_a rows."""

import pandas as pd
import pytest

from disaggregated_eval.theory import expected_table, theory_coverage


def test_expected_cells_match_the_paper():
    t = expected_table()
    t2 = t[t.table == "Table 2"].set_index(["dataset", "model", "control"]).expected
    # Covariate shift: control for X explains differences for f*, f and f_A*, not for fitted xa.
    assert t2[("covariate_shift", "bayes_x", "X")] and t2[("covariate_shift", "x", "X")]
    assert t2[("covariate_shift", "bayes_xa", "X")] and not t2[("covariate_shift", "xa", "X")]
    # Label shift: control for Y, subgroup-agnostic only.
    assert t2[("anticausal_label_shift", "bayes_x", "Y")] and not t2[("anticausal_label_shift", "xa", "Y")]
    # Subgroup Bayes-optimal models satisfy sufficiency everywhere (V = R).
    assert all(t2[(s, "bayes_xa", "R")] for s in t2.index.get_level_values(0).unique())
    # No model and setting has {R, Y} independent of A without a control.
    assert not t2.xs("none", level="control").any()
    b1 = t[t.table == "Table B1"].set_index(["dataset", "model", "property"]).expected
    assert b1[("anticausal_label_shift", "bayes_x", "separation")]
    assert b1.xs("separation", level="property").sum() == 1
    b2 = t[t.table == "Table B2"].set_index(["dataset", "model", "property"]).expected
    assert b2[("selection_y", "bayes_xa", "sufficiency")] and not b2[("selection_ya", "bayes_xa", "sufficiency")]
    assert len(t) == 6 * 4 * 4 + 6 * 4 + 3 * 4


def test_coverage_flags_intervals_around_zero():
    rows = [
        # covers zero
        dict(
            dataset="covariate_shift",
            model="bayes_x",
            comparison="controlled_difference",
            control="X",
            weight_source="oracle",
            group="A = 0",
            metric="auc",
            estimate=0.001,
            ci_low=-0.01,
            ci_high=0.012,
        ),
        # excludes zero
        dict(
            dataset="covariate_shift",
            model="bayes_x",
            comparison="controlled_difference",
            control="Y",
            weight_source="oracle",
            group="A = 0",
            metric="auc",
            estimate=0.05,
            ci_low=0.04,
            ci_high=0.06,
        ),
        # not a controlled difference: ignored
        dict(
            dataset="covariate_shift",
            model="bayes_x",
            comparison="absolute",
            control="none",
            weight_source="none",
            group="A = 0",
            metric="auc",
            estimate=0.6,
            ci_low=0.5,
            ci_high=0.7,
        ),
    ]
    cov = theory_coverage(pd.DataFrame(rows).assign(caveat=""))
    # The V = Y row is a cell of Table 2 and of Table B1 (separation of f* with Z = X).
    assert len(cov) == 3
    assert sorted(cov[cov.control == "Y"].table) == ["Table 2", "Table B1"]
    x = cov[cov.control == "X"].iloc[0]
    assert x.expected and x.covers_zero and x.table == "Table 2"
    y = cov[cov.control == "Y"].iloc[0]
    assert not y.expected and not y.covers_zero


def _ta(control, estimate, ci_low, ci_high, caveat):
    return dict(dataset="covariate_shift", model="bayes_x", comparison="controlled_difference", control=control,
                weight_source="oracle", group="A = 0", metric="precision", estimate=estimate, ci_low=ci_low,
                ci_high=ci_high, caveat=caveat)  # fmt: skip


def test_undefined_and_degenerate_cells_do_not_count_as_covering_zero():
    """A zero-width interval at exactly 0 (every resample one value) and an undefined T_a are marked,
    and neither counts as "covers 0", although 0 <= 0 <= 0 (the degenerate zero of the paper's
    complex anticausal setting, where the model predicts no positive)."""
    rows = [
        _ta("X", 0.0, 0.0, 0.0, "degenerate"),
        _ta("R", float("nan"), float("nan"), float("nan"), "undefined"),
        _ta("none", 0.0, -0.01, 0.01, ""),
    ]
    cov = theory_coverage(pd.DataFrame(rows)).query("table == 'Table 2'").set_index("control")
    assert cov.loc["X", "caveat"] == "degenerate" and pd.isna(cov.loc["X", "covers_zero"])
    assert cov.loc["R", "caveat"] == "undefined" and pd.isna(cov.loc["R", "covers_zero"])
    assert cov.loc["none", "caveat"] == "" and cov.loc["none", "covers_zero"] == True  # noqa: E712
    assert str(cov["covers_zero"].dtype) == "boolean"
    assert list(cov.columns)[-2:] == ["caveat", "covers_zero"]


def test_tables_without_the_caveat_column_are_refused():
    # a table written before the caveat column cannot tell a degenerate interval from an ordinary one
    row = _ta("X", 0.0, 0.0, 0.0, "")
    del row["caveat"]
    with pytest.raises(ValueError, match=r"lacks the columns \['caveat'\]"):
        theory_coverage(pd.DataFrame([row]))


def test_missing_columns_raise():
    with pytest.raises(ValueError, match="lacks the columns"):
        theory_coverage(pd.DataFrame({"dataset": ["covariate_shift"]}))
