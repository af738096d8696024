"""The input checks of ``audit()`` (audit/inputs.py): limits on the work, silent oddities, polars frames.

Every check runs before any work and raises :class:`AuditInputError` naming the option or column
(or warns with :class:`AuditWarning` where the audit still means something). The command line's
view of the same checks is in tests/test_audit_cli.py.
"""

from __future__ import annotations

import dataclasses
import warnings

import numpy as np
import pandas as pd
import pytest

from disaggregated_eval.audit import AuditInputError, audit
from disaggregated_eval.audit import options as options_module
from disaggregated_eval.audit.errors import AuditWarning
from disaggregated_eval.audit.inputs import (
    MAX_PAIRWISE_COMPARISONS,
    InputSpec,
    check_comparison_count,
    prepare_input,
)
from disaggregated_eval.audit.options import check_resample_count, min_resamples, resolve_options

FAST = dict(metrics=["accuracy"], n_resamples=200, n_permutations=0)


def frame(n: int = 240, seed: int = 3, **columns) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data = pd.DataFrame({"y": rng.integers(0, 2, n), "p": rng.random(n), "g": np.tile(["a", "b", "c"], n)[:n]})
    for name, values in columns.items():
        data[name] = values
    return data


def prepared(data: pd.DataFrame, **options):
    resolved = resolve_options(None, dict(label="y", scores=["p"], groups=["g"], **options))
    return prepare_input(data, InputSpec.from_options(resolved))


# ---- resamples for the level, permutations, pairwise comparisons (item 6) -----------------------------------------
def test_min_resamples_puts_five_replicates_beyond_each_bound():
    assert [min_resamples(c) for c in (0.8, 0.9, 0.95, 0.99)] == [50, 100, 200, 1000]
    assert min_resamples(0.999999) == 10_000_000


@pytest.mark.parametrize(
    ("n_resamples", "confidence", "outcome"),
    [(200, 0.95, "ok"), (199, 0.95, "warn"), (40, 0.95, "warn"), (39, 0.95, "error"), (1, 0.95, "error"),
     (1000, 0.99, "ok"), (200, 0.999999, "error"), (60, 0.8, "ok")],
)  # fmt: skip
def test_check_resample_count(n_resamples, confidence, outcome):
    # fewer than 1 replicate beyond a bound: the bound is the most extreme replicate (refused);
    # 1 to 5: a warning; both name the smallest sufficient number of resamples
    need = f"n_resamples >= {min_resamples(confidence):,}"
    if outcome == "error":
        with pytest.raises(AuditInputError, match=need):
            check_resample_count(n_resamples, confidence)
    elif outcome == "warn":
        with pytest.warns(AuditWarning, match=need):
            check_resample_count(n_resamples, confidence)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_resample_count(n_resamples, confidence)


def test_n_permutations_has_a_limit():
    with pytest.raises(AuditInputError, match=r"n_permutations 1,000,001 is more than the limit of 1,000,000"):
        resolve_options(None, dict(label="y", scores=["p"], groups=["g"], n_permutations=1_000_001))


def test_permutation_work_that_may_take_hours_is_said_before_any_work(monkeypatch):
    # Continuous scores: every row is its own unit, and each Monte-Carlo test walks both sides of the rows of
    # its universe once per permutation. 240 rows, groups a/b/c of 80: 3 tests vs overall (universe: 240 rows)
    # and 3 pairs (160 rows) per permutation design; auc ("all by label") and log loss ("all"): 2 designs;
    # 400 permutations (above the 3-test family's 59). Bound: 2 x (3 x 240 + 3 x 160) x 2 x 400 = 1,920,000.
    from disaggregated_eval.audit import core

    def no_work(*args, **kwargs):
        raise AssertionError("the bootstrap started")

    monkeypatch.setattr(core, "estimate_all", no_work)
    monkeypatch.setattr(core, "PERMUTATION_WORK_WARNING", 1_920_000 - 1)
    run = dict(label="y", scores=["p"], groups=["g"], metrics=["auc", "log_loss"], n_resamples=200, n_permutations=400)
    expected = r"may walk up to 1\.9e\+06 rows: 12 tests \(comparisons x permutation designs, over 1 model"
    with pytest.warns(AuditWarning, match=expected) as got, pytest.raises(AssertionError, match="bootstrap started"):
        audit(frame(), **run)
    assert "n_permutations=0 skips the tests" in str(got[0].message)
    assert "test_method='bootstrap'" in str(got[0].message)
    monkeypatch.setattr(core, "PERMUTATION_WORK_WARNING", 1_920_000)  # at the limit: nothing said
    with warnings.catch_warnings():
        warnings.simplefilter("error", AuditWarning)
        with pytest.raises(AssertionError, match="the bootstrap started"):
            audit(frame(), **run)
    # the large-sample test walks nothing: no warning whatever the bound
    monkeypatch.setattr(core, "PERMUTATION_WORK_WARNING", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AuditWarning)
        with pytest.raises(AssertionError, match="the bootstrap started"):
            audit(frame(), **dict(run, test_method="bootstrap"))
    # count metrics without weights have exact tests: no Monte-Carlo work at all
    with warnings.catch_warnings():
        warnings.simplefilter("error", AuditWarning)
        with pytest.raises(AssertionError, match="the bootstrap started"):
            audit(frame(), **dict(run, metrics=["accuracy", "false_positive_rate"]))


def test_pairwise_comparison_limit_counts_every_family():
    # L levels give L (L - 1) / 2 pairs: 200 levels 19,900, within the limit; 201 levels 20,100, not
    assert MAX_PAIRWISE_COMPARISONS == 20_000
    check_comparison_count([("g", 200)], 1)
    with pytest.raises(AuditInputError, match=r"group column 'g' has 201 levels \(20,100 pairs\)"):
        check_comparison_count([("g", 201)], 1)
    # 2 x 40 levels: 780 + 1 pairs alone, 3,160 in the intersection
    check_comparison_count([("a", 40), ("b", 2)], 2)
    with pytest.raises(AuditInputError, match=r"the intersection a & b has 12,000 slices .*\(--intersections 1\)"):
        check_comparison_count([("a", 120), ("b", 100)], 2)


def test_a_thousand_levels_are_refused_by_the_api_before_any_work(monkeypatch):
    from disaggregated_eval.audit import core

    def no_work(*args, **kwargs):
        raise AssertionError("the bootstrap started")

    monkeypatch.setattr(core, "estimate_all", no_work)
    data = frame(n=3000, zip=[f"z{i % 1000}" for i in range(3000)])
    with pytest.raises(AuditInputError, match="group column 'zip' has 1,000 levels"):
        audit(data, label="y", scores=["p"], groups=["zip"], pairwise_max_levels=None, **FAST)


# ---- validated once per public call (issue 11 item 3) ---------------------------------------------------------
def test_resolved_options_are_trusted_until_changed(monkeypatch):
    calls = []
    original = options_module.check_resample_count
    monkeypatch.setattr(options_module, "check_resample_count", lambda *a: calls.append(a) or original(*a))
    resolved = resolve_options(None, dict(label="y", scores=["p"], groups=["g"], **FAST))
    assert resolve_options(resolved, {}) is resolved and len(calls) == 1  # no second validation
    audit(frame(), options=resolved)
    assert len(calls) == 1
    with pytest.raises(dataclasses.FrozenInstanceError):  # resolved options cannot change unchecked
        resolved.n_resamples = 0
    with pytest.raises(AuditInputError, match=r"n_resamples must be an integer in 1\.\.1000000; got 0"):
        audit(frame(), options=resolved, n_resamples=0)  # a change goes through the validation again
    assert len(calls) == 1  # the bad value is refused before the resample check


# ---- hard predictions, features (item 1) --------------------------------------------------------------------------
def test_a_model_of_hard_predictions_with_only_score_metrics_is_refused():
    data = frame(flag=np.tile([0, 1], 120))
    with pytest.raises(AuditInputError, match=r"score column 'flag' holds only 0 and 1 .* \(auc, brier_score\) needs"):
        audit(data, label="y", scores=["p", "flag"], groups=["g"], metrics=["auc", "brier_score"], n_resamples=200)
    res = audit(data, label="y", scores=["p", "flag"], groups=["g"], metrics=["auc", "accuracy"], n_resamples=200,
                n_permutations=0)  # fmt: skip
    assert set(res.slices.loc[res.slices["model"] == "flag", "metric"]) == {"accuracy"}


@pytest.mark.parametrize("values", [np.nan, None], ids=["numeric", "text"])
def test_a_feature_missing_in_every_row_is_refused(values):
    data = frame(
        age=np.linspace(20, 70, 240), empty=pd.Series([values] * 240, dtype=object if values is None else float)
    )
    with pytest.raises(AuditInputError, match="feature column 'empty' is missing in every row audited"):
        prepared(data, controls=["X"], features=["age", "empty"])


# ---- silent oddities (item 9) -------------------------------------------------------------------------------------
def test_levels_differing_only_by_whitespace_are_merged_with_a_note():
    g = np.array(["a", "a ", " a", "b", "   ", "b\t"])[np.arange(240) % 6]
    data = frame(g=g)
    coded = prepared(data)
    (attribute,) = coded.attributes
    assert attribute.levels == ("a", "b", "missing")
    assert np.bincount(attribute.codes).tolist() == [120, 80, 40]
    assert coded.notes == (
        "group column 'g': 40 rows whose value is only whitespace ('   ') are treated as missing",
        "group column 'g': surrounding whitespace removed from levels (levels that differ only by it are merged): "
        "' a' and 'a ' and 'a' -> 'a'; 'b' and 'b\\t' -> 'b' (strip_levels=False, --no-strip-levels, keeps them)",
        "g: 40 rows with a missing value form the level 'missing'",
    )
    raw = prepared(data, strip_levels=False).attributes[0]
    assert raw.levels == ("   ", " a", "a", "a ", "b", "b\t")
    assert list(data["g"]) == list(g)  # the caller's frame is not modified


def test_booleans_and_numbers_are_never_merged_silently():
    mixed = pd.Series([True, 1, False, 0] * 60, dtype=object)
    with pytest.raises(AuditInputError, match=r"group column 'g' holds both booleans .* and the numbers 0/1"):
        prepared(frame(g=mixed))
    assert prepared(frame(g=[True, False] * 120)).attributes[0].levels == ("False", "True")
    assert prepared(frame(g=pd.Series([True, "x"] * 120, dtype=object))).attributes[0].levels == ("True", "x")


def test_a_polars_frame_is_accepted_where_a_pandas_one_is():
    polars = pytest.importorskip("polars")  # optional: the conversion needs no import of polars
    data = frame(w=np.linspace(0.5, 2, 240))
    kwargs = dict(label="y", scores=["p"], groups=["g"], sample_weight="w", **FAST)
    from_pandas = audit(data, **kwargs)
    from_polars = audit(polars.from_pandas(data), **kwargs)
    for name in ("slices", "comparisons", "controlled"):
        pd.testing.assert_frame_equal(getattr(from_polars, name), getattr(from_pandas, name))
    with pytest.raises(AuditInputError, match=r"polars LazyFrame; collect it first"):
        audit(polars.from_pandas(data).lazy(), **kwargs)
    with pytest.raises(AuditInputError, match=r"data must be a pandas DataFrame \(or a polars one\); got dict"):
        audit({"y": [1]}, **kwargs)
