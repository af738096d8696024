"""Tests of the metric definitions against scikit-learn (registry + invariance tests, as in
scikit-learn's ``metrics/tests/test_common.py``).

Tolerances: every metric is a ratio of sums of at most a few hundred float64 terms, computed here
and in scikit-learn in different orders (pairwise sums, cumulative sums, trapezoids). The
rounding difference is a few ulps of values of order 1, i.e. ~1e-15; 1e-12 (the agreement the
method asks for, ``docs/method.md``) leaves a margin of ~1000x while a wrong definition (a missed tie
half, an unclipped log, a wrong weight) changes values by far more than 1e-12.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    brier_score_loss,
    log_loss,
    precision_score,
    recall_score,
    roc_auc_score,
)

from disaggregated_eval import vocabulary
from disaggregated_eval.metrics import (
    METRIC_HIGHER_IS_BETTER,
    METRIC_LABELS,
    METRICS,
    check_metric_names,
    compute_metrics,
    pointwise_log_loss,
)

TOL = 1e-12  # see the module docstring


def _net_benefit_sklearn(y, yhat, w, t=0.5):
    # TPR * pi - FPR * (1 - pi) * t / (1 - t), with TPR and FPR from scikit-learn's recall.
    tpr = recall_score(y, yhat, sample_weight=w, zero_division=0)
    fpr = 1.0 - recall_score(y, yhat, pos_label=0, sample_weight=w, zero_division=0)
    pi = np.sum(w * y) / np.sum(w)
    return tpr * pi - fpr * (1.0 - pi) * t / (1.0 - t)


# Registry of scikit-learn references: metric name -> f(y, scores, yhat, w).
SKLEARN_REFERENCE = {
    "log_loss": lambda y, r, yhat, w: log_loss(y, r, sample_weight=w, labels=[0, 1]),
    "auc": lambda y, r, yhat, w: roc_auc_score(y, r, sample_weight=w),
    "sensitivity": lambda y, r, yhat, w: recall_score(y, yhat, sample_weight=w),
    "specificity": lambda y, r, yhat, w: recall_score(y, yhat, pos_label=0, sample_weight=w),
    "precision": lambda y, r, yhat, w: precision_score(y, yhat, sample_weight=w, zero_division=0),
    "net_benefit": lambda y, r, yhat, w: _net_benefit_sklearn(y, yhat, w),
    "label_rate": lambda y, r, yhat, w: np.average(y, weights=w),
    "predicted_positive_rate": lambda y, r, yhat, w: np.average(yhat, weights=w),
    "accuracy": lambda y, r, yhat, w: accuracy_score(y, yhat, sample_weight=w),
    # FPR = 1 - specificity = 1 - recall of the negatives; FNR = 1 - sensitivity.
    "false_positive_rate": lambda y, r, yhat, w: 1.0 - recall_score(y, yhat, pos_label=0, sample_weight=w),
    "false_negative_rate": lambda y, r, yhat, w: 1.0 - recall_score(y, yhat, sample_weight=w),
    "brier_score": lambda y, r, yhat, w: brier_score_loss(y, r, sample_weight=w),
    # calibration in the large (no scikit-learn function): the mean score and observed / expected positives
    "mean_predicted_risk": lambda y, r, yhat, w: np.average(r, weights=w),
    "observed_expected_ratio": lambda y, r, yhat, w: np.sum(w * y) / np.sum(w * r),
    "balanced_accuracy": lambda y, r, yhat, w: balanced_accuracy_score(y, yhat, sample_weight=w),
}


def _data(kind: str, n: int = 300, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    r = np.clip(0.3 * y + 0.7 * rng.random(n), 0.0, 1.0)
    w = rng.gamma(2.0, 1.0, n)
    if kind == "tied_1":
        r = np.round(r, 1)  # few distinct scores, many rows exactly at 0.5, some exactly 0 or 1
    elif kind == "tied_2":
        r = np.round(r, 2)
    elif kind == "at_threshold":
        r[::3] = 0.5  # yhat = 1 at the threshold exactly
    elif kind == "extreme":
        r[::4] = 0.0  # clipped by the log loss
        r[1::4] = 1.0
    return y, r, w


KINDS = ["random", "tied_1", "tied_2", "at_threshold", "extreme"]


def test_registries_cover_metrics():
    assert set(METRIC_LABELS) == set(METRICS) == set(METRIC_HIGHER_IS_BETTER) == set(SKLEARN_REFERENCE)
    assert METRICS == vocabulary.METRICS and len(METRICS) == 15
    assert set(vocabulary.PIPELINE_METRICS) <= set(METRICS)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("metric", METRICS)
def test_equals_sklearn(metric, kind, weighted):
    y, r, w = _data(kind)
    w = w if weighted else None
    got = compute_metrics(y, r, sample_weight=w, metrics=[metric])[metric]
    expected = SKLEARN_REFERENCE[metric](y, r, (r >= 0.5).astype(int), np.ones(len(y)) if w is None else w)
    assert got == pytest.approx(expected, abs=TOL, rel=TOL)


@pytest.mark.parametrize("kind", KINDS)
def test_weights_of_one_equal_unweighted(kind):
    y, r, _ = _data(kind)
    a = compute_metrics(y, r)
    b = compute_metrics(y, r, sample_weight=np.ones(len(y)))
    for name in METRICS:
        assert a[name] == pytest.approx(b[name], abs=TOL)


@pytest.mark.parametrize("kind", KINDS)
def test_integer_weights_equal_repeated_rows(kind):
    y, r, _ = _data(kind)
    counts = np.random.default_rng(5).integers(0, 4, len(y))
    weighted = compute_metrics(y, r, sample_weight=counts)
    repeated = compute_metrics(np.repeat(y, counts), np.repeat(r, counts))
    for name in METRICS:
        assert weighted[name] == pytest.approx(repeated[name], abs=TOL)


@pytest.mark.parametrize("kind", KINDS)
def test_row_order_invariance(kind):
    y, r, w = _data(kind)
    perm = np.random.default_rng(7).permutation(len(y))
    a = compute_metrics(y, r, sample_weight=w)
    b = compute_metrics(y[perm], r[perm], sample_weight=w[perm])
    for name in METRICS:
        assert a[name] == pytest.approx(b[name], abs=TOL)


def test_zero_weight_excludes_rows():
    y, r, w = _data("tied_2")
    w[::2] = 0.0
    a = compute_metrics(y, r, sample_weight=w)
    b = compute_metrics(y[1::2], r[1::2], sample_weight=w[1::2])
    for name in METRICS:
        assert a[name] == pytest.approx(b[name], abs=TOL)


def test_hand_computed_example():
    # y = 1, 1, 0, 0; r = 0.9, 0.5, 0.5, 0.1 -> yhat = 1, 1, 1, 0
    got = compute_metrics([1, 1, 0, 0], [0.9, 0.5, 0.5, 0.1])
    assert got["sensitivity"] == 1.0
    assert got["specificity"] == 0.5
    assert got["precision"] == pytest.approx(2 / 3, abs=TOL)
    assert got["auc"] == pytest.approx((1 + 1 + 0.5 + 1) / 4, abs=TOL)  # one tied pair counts 1/2
    assert got["net_benefit"] == pytest.approx((2 - 1) / 4, abs=TOL)
    assert got["label_rate"] == 0.5
    assert got["predicted_positive_rate"] == 0.75
    expected_ll = -(math.log(0.9) + math.log(0.5) + math.log(0.5) + math.log(0.9)) / 4
    assert got["log_loss"] == pytest.approx(expected_ll, abs=TOL)
    # TP = 2, FN = 0, TN = 1, FP = 1
    assert got["accuracy"] == 0.75
    assert got["false_positive_rate"] == 0.5
    assert got["false_negative_rate"] == 0.0
    assert got["brier_score"] == pytest.approx((0.1**2 + 0.5**2 + 0.5**2 + 0.1**2) / 4, abs=TOL)
    assert got["balanced_accuracy"] == 0.75  # (sensitivity 1 + specificity 0.5) / 2


def test_single_class_gives_nan_not_zero():
    positives = compute_metrics([1, 1, 1], [0.2, 0.6, 0.9])
    assert math.isnan(positives["auc"]) and math.isnan(positives["specificity"])
    assert positives["sensitivity"] == pytest.approx(2 / 3, abs=TOL)
    assert math.isnan(positives["false_positive_rate"]) and positives["false_negative_rate"] == pytest.approx(
        1 / 3, abs=TOL
    )
    # balanced accuracy needs both classes (scikit-learn averages the recalls of the classes present, with
    # a warning: here the specificity 1/2 would pass for a balanced accuracy)
    assert math.isnan(positives["balanced_accuracy"])
    negatives = compute_metrics([0, 0], [0.2, 0.6])
    assert math.isnan(negatives["balanced_accuracy"])
    assert math.isnan(negatives["auc"]) and math.isnan(negatives["sensitivity"])
    assert math.isnan(negatives["false_negative_rate"]) and negatives["false_positive_rate"] == 0.5
    assert negatives["specificity"] == 0.5
    # accuracy and Brier score need only W > 0
    assert negatives["accuracy"] == 0.5 and negatives["brier_score"] == pytest.approx((0.04 + 0.36) / 2, abs=TOL)
    # net benefit is defined whenever W > 0: (TP - FP t/(1-t)) / W = (0 - 1) / 2
    assert negatives["net_benefit"] == -0.5


def test_zero_total_weight_gives_nan_everywhere():
    got = compute_metrics([0, 1], [0.2, 0.7], sample_weight=[0.0, 0.0])
    assert list(got) == list(METRICS)
    assert all(math.isnan(v) for v in got.values())


def test_empty_input_is_an_error_naming_y():
    # Zero rows is a caller's mistake (e.g. an empty filter), not an undefined metric.
    with pytest.raises(ValueError, match=r"y is empty; compute_metrics needs at least one row"):
        compute_metrics([], [])
    with pytest.raises(ValueError, match=r"y is empty"):
        compute_metrics(np.array([], dtype=int), np.array([]), sample_weight=np.array([]))


def test_precision_is_undefined_when_nothing_is_predicted_positive():
    # scikit-learn returns 0 here (zero_division); the project leaves it undefined (docs/method.md)
    got = compute_metrics([0, 1], [0.2, 0.3])
    assert np.isnan(got["precision"]) and got["predicted_positive_rate"] == 0.0


def test_threshold_and_preference_threshold():
    y, r, w = _data("random")
    got = compute_metrics(y, r, sample_weight=w, threshold=0.3, preference_threshold=0.2)
    yhat = (r >= 0.3).astype(int)
    assert got["sensitivity"] == pytest.approx(recall_score(y, yhat, sample_weight=w), abs=TOL)
    assert got["net_benefit"] == pytest.approx(_net_benefit_sklearn(y, yhat, w, t=0.2), abs=TOL)


def test_returns_requested_metrics_in_order():
    got = compute_metrics([0, 1], [0.2, 0.7], metrics=("precision", "auc"))
    assert list(got) == ["precision", "auc"]
    assert all(type(v) is float for v in got.values())


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (dict(y=[0, 2, 1], scores=[0.1, 0.2, 0.3]), ValueError, r"labels .*0/1.*\{2\}"),
        (dict(y=[0, 1], scores=[0.1, 1.5]), ValueError, r"\[0, 1\]; got 1.5 at row 1"),
        (dict(y=[0, 1], scores=[0.1, np.nan]), ValueError, r"finite .*got nan at row 1"),
        (dict(y=[0, 1], scores=[0.1, 0.2, 0.3]), ValueError, r"scores has 3 rows but y has 2"),
        (dict(y=[0, 1], scores=[0.1, 0.2], sample_weight=[1.0, -2.0]), ValueError, r">= 0; got -2.0 at row 1"),
        (dict(y=[0, 1], scores=[0.1, 0.2], sample_weight=[1.0, np.inf]), ValueError, r"got inf at row 1"),
        (dict(y=[0, 1], scores=[0.1, 0.2], sample_weight=[1.0]), ValueError, r"sample_weight has 1 rows"),
        (dict(y=[0, 1], scores=[0.1, 0.2], metrics=["auc", "f1"]), ValueError, r"unknown metric 'f1'"),
        (
            dict(y=[0, 1], scores=[0.1, 0.2], metrics=["auc", "auc"]),
            ValueError,
            r"metrics must be distinct; got duplicates \['auc'\]",
        ),
        (dict(y=[0, 1], scores=[0.1, 0.2], metrics=[]), ValueError, r"metrics must name at least one metric"),
        (dict(y=[0, 1], scores=[0.1, 0.2], metrics="auc"), TypeError, r"not a string"),
        (dict(y=[0, 1], scores={"m": [0.1, 0.2]}), TypeError, r"scores must be a one-dimensional array; got dict"),
        (dict(y=[0, 0.5], scores=[0.1, 0.2]), ValueError, r"labels \(y\) must be 0/1; got values \{0.5\}"),
        (
            dict(y=[0, 1], scores=[0.1, 0.2], threshold="0.5"),
            TypeError,
            r"threshold must be a number in \(0, 1\); got '0.5'",
        ),
        (dict(y=[0, 1], scores=[0.1, 0.2], threshold=1.0), ValueError, r"threshold must be in .*got 1.0"),
        (dict(y=[0, 1], scores=[0.1, 0.2], preference_threshold=0.0), ValueError, r"preference_threshold .*got 0.0"),
        (dict(y=[[0, 1]], scores=[0.1, 0.2]), ValueError, r"one-dimensional; got shape \(1, 2\)"),
    ],
)
def test_validation_messages_name_the_bad_value(kwargs, error, match):
    y = kwargs.pop("y")
    scores = kwargs.pop("scores")
    with pytest.raises(error, match=match):
        compute_metrics(y, scores, **kwargs)


def test_check_metric_names_returns_a_tuple_in_the_given_order():
    assert check_metric_names(["brier_score", "auc"]) == ("brier_score", "auc")
    assert check_metric_names(METRICS) == METRICS


def test_pointwise_log_loss_matches_sklearn_per_row():
    y, r, _ = _data("extreme")
    terms = pointwise_log_loss(y.astype(float), r)
    for i in range(0, len(y), 37):
        assert terms[i] == pytest.approx(log_loss([y[i]], [r[i]], labels=[0, 1]), abs=TOL)
