"""From weighted sums to metrics: the one home of the metric formulas and of the per-row terms.

Every metric (one record each: :mod:`disaggregated_eval.registry`) is a function of a few weighted sums
over the rows of an evaluation (``docs/method.md``, "Metrics"), with ``w`` the row's weight times its
bootstrap count (or permutation membership) and ``yhat = 1[r >= threshold]``:

* the *structural* sums, which the walk in score order produces (:mod:`.walk`): ``Wp = sum w y``,
  ``Wn = sum w (1 - y)``, the false negatives ``FN`` and true negatives ``TN`` (the running sums at
  the threshold's position in score order) and the AUC numerator
  ``sum_{i pos, j neg} w_i w_j (1[r_i > r_j] + 1/2 1[r_i = r_j])``;
* the *per-row terms*: additive sums ``sum w t(y, r)`` of a per-row quantity ``t``. They are
  declared once, in :data:`ROW_TERMS` (name -> function of ``y`` and ``r``), and every walker
  accumulates whichever terms the requested metrics need (their records' ``terms``,
  :func:`terms_for`), so that a metric that needs a new sum adds one entry here, one formula in
  :func:`metrics_from_sums` and its record.

:func:`metrics_from_sums` turns the sums of one evaluation on one (re)sample into every metric; it is
written for numba and called by every kernel of the engine (and from Python by
:func:`disaggregated_eval.metrics.compute_metrics`). Its output slots (:data:`METRIC_SLOTS`) are
written here, next to the formulas, because numba bakes them into the cached kernels (whose cache
:mod:`._cache` keys on the engine's own files). The proportions, the ratios of sums and the terms of
each metric are read off the registry; :func:`check_engine_records` checks, when this module is
imported, that every record has a slot and a formula here and every slot a record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numba
import numpy as np

from ..registry import CATEGORIES, METRIC_RECORDS, MetricRecord, RegistryError, check_metric_names

__all__ = [
    "LOG_LOSS_EPS",
    "LOG_LOSS_CAP",
    "pointwise_log_loss",
    "log_loss_capped",
    "CATEGORIES",
    "PROPORTIONS",
    "categories",
    "net_benefit_values",
    "ROW_VALUES",
    "RATIOS_OF_SUMS",
    "ratio_of_sums_values",
    "METRIC_SLOTS",
    "N_METRIC_SLOTS",
    "ROW_TERMS",
    "N_TERMS",
    "TERM_SLOTS",
    "metric_slots",
    "terms_for",
    "row_terms",
    "metrics_from_sums",
    "check_engine_records",
    "score_segments",
    "keyed_draw_sums",
]

# ----------------------------------------------------------------------------------------------
# Per-row terms
# ----------------------------------------------------------------------------------------------

#: Clipping constant of the log loss (as scikit-learn: machine epsilon of float64).
LOG_LOSS_EPS: float = float(np.finfo(np.float64).eps)
#: The largest loss of one row, ``-log(LOG_LOSS_EPS)`` = 36.04 nats: what a score of exactly 0 for a positive,
#: or exactly 1 for a negative, costs after the clipping (without it, infinity).
LOG_LOSS_CAP: float = float(-np.log(LOG_LOSS_EPS))


def pointwise_log_loss(y: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Per-row log loss with scikit-learn's clipping of ``r`` and ``1 - r`` to ``[eps, 1 - eps]``.

    ``eps`` is :data:`LOG_LOSS_EPS` (float64's machine epsilon), so no row costs more than
    :data:`LOG_LOSS_CAP` = 36.04 nats: a score of exactly 0 with label 1, or exactly 1 with label 0, costs
    that much instead of infinity (:func:`log_loss_capped` finds such rows). A slice's log loss is then
    finite but dominated by those rows, and a bootstrap of a small slice that draws none of them does not
    see that tail (``docs/method.md``, "Log loss: the clipping").

    Parameters
    ----------
    y : ndarray of shape (n_samples,), float64
        Checked 0/1 labels.
    scores : ndarray of shape (n_samples,), float64
        Checked scores in [0, 1].

    Returns
    -------
    ndarray of shape (n_samples,)
        ``-log(clip(r))`` where ``y == 1`` and ``-log(clip(1 - r))`` where ``y == 0`` (nats); the
        weighted log loss is ``sum w * pointwise_log_loss(y, r) / sum w`` (as scikit-learn 1.9's
        ``log_loss``). The bootstrap engine accumulates these terms.
    """
    eps = LOG_LOSS_EPS
    positive = -np.log(np.clip(scores, eps, 1.0 - eps))
    negative = -np.log(np.clip(1.0 - scores, eps, 1.0 - eps))
    return np.where(y == 1.0, positive, negative)


def log_loss_capped(y: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Rows whose log loss the clipping caps (:data:`LOG_LOSS_CAP`): a score within ``eps`` of 0 with label 1,
    or within ``eps`` of 1 with label 0.

    Examples
    --------
    >>> log_loss_capped(np.array([1.0, 0.0, 1.0, 0.0]), np.array([0.0, 1.0, 1.0, 0.5]))
    array([ True,  True, False, False])
    >>> round(float(pointwise_log_loss(np.array([1.0]), np.array([0.0]))[0]), 2), round(LOG_LOSS_CAP, 2)
    (36.04, 36.04)
    """
    eps = LOG_LOSS_EPS
    return np.where(y == 1.0, scores <= eps, 1.0 - scores <= eps)


#: Per-row additive terms ``t(y, r)`` (``y`` 0/1 float64, ``r`` scores in [0, 1]); the engine
#: accumulates ``sum w t``. The position in this mapping is the term's slot (:data:`TERM_SLOTS`).
ROW_TERMS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "log_loss": pointwise_log_loss,  # nats; sklearn's clipping
    "brier": lambda y, r: (r - y) ** 2,
    "score": lambda y, r: r,  # the expected number of positives under the model: calibration in the large
}
#: Term name -> slot of the ``terms`` vector of :func:`metrics_from_sums`.
TERM_SLOTS: dict[str, int] = {name: slot for slot, name in enumerate(ROW_TERMS)}
#: Length of the ``terms`` vector of :func:`metrics_from_sums`.
N_TERMS: int = len(ROW_TERMS)
_T_LOG_LOSS = TERM_SLOTS["log_loss"]
_T_BRIER = TERM_SLOTS["brier"]
_T_SCORE = TERM_SLOTS["score"]

#: The per-row terms each metric needs (its record's ``terms``; metrics without need only the structural sums).
_METRIC_TERMS: dict[str, tuple[str, ...]] = {r.name: r.terms for r in METRIC_RECORDS if r.terms}


def terms_for(metrics: Sequence[str]) -> tuple[str, ...]:
    """The per-row terms (in :data:`ROW_TERMS` order) that ``metrics`` need.

    Parameters
    ----------
    metrics : sequence of str
        Metric names (checked by :func:`disaggregated_eval.registry.check_metric_names`).

    Returns
    -------
    tuple of str
        Term names, a subset of :data:`ROW_TERMS`, in its order.
    """
    names = check_metric_names(metrics)
    needed = {term for metric in names for term in _METRIC_TERMS.get(metric, ())}
    return tuple(term for term in ROW_TERMS if term in needed)


def row_terms(y: np.ndarray, scores: np.ndarray, terms: Sequence[str]) -> np.ndarray:
    """The per-row values of ``terms``.

    Parameters
    ----------
    y : ndarray of shape (n,), float64
        Labels 0/1 (checked).
    scores : ndarray of shape (n,), float64
        Scores in [0, 1] (checked).
    terms : sequence of str
        Names from :data:`ROW_TERMS`.

    Returns
    -------
    ndarray of shape (len(terms), n), float64, C-contiguous
        Row ``t`` holds ``ROW_TERMS[terms[t]](y, scores)``.
    """
    out = np.empty((len(terms), y.shape[0]))
    for t, name in enumerate(terms):
        out[t] = ROW_TERMS[name](y, scores)
    return out


# ----------------------------------------------------------------------------------------------
# Proportion metrics: numerator and denominator as sets of the four outcome categories
# ----------------------------------------------------------------------------------------------

#: Category code of a row: ``2 y + yhat`` (:data:`CATEGORIES` order).
TN, FP, FN, TP = (CATEGORIES.index(c) for c in ("TN", "FP", "FN", "TP"))


def _codes(names: Sequence[str]) -> tuple[int, ...]:
    return tuple(CATEGORIES.index(c) for c in names)


#: Each proportion metric as (numerator category codes, denominator category codes), from its record:
#: the metric is the weighted share of the numerator among the rows of the denominator. Read by its
#: score interval (Wilson), the difference of two slices (Newcombe), its exact permutation test
#: (membership permuted among the denominator's rows, a hypergeometric count of the numerator's) and
#: its minimum-denominator rule.
PROPORTIONS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    r.name: (_codes(r.proportion[0]), _codes(r.proportion[1])) for r in METRIC_RECORDS if r.proportion is not None
}


def categories(y: np.ndarray, scores: np.ndarray, threshold: float) -> np.ndarray:
    """Outcome category of every row: ``2 y + 1[r >= threshold]`` (:data:`CATEGORIES`), int8."""
    return (2 * y.astype(np.int8) + (scores >= threshold).astype(np.int8)).astype(np.int8)


def net_benefit_values(odds: float) -> np.ndarray:
    """The net benefit's value of each category (:data:`CATEGORIES` order), shape (4,): 1 for a true
    positive, ``-t / (1 - t)`` for a false positive, 0 otherwise (Pfohl et al. 2023)."""
    return np.array([0.0, -odds, 0.0, 1.0])


#: Per-row values ``v(y, r, threshold, odds)`` that a ratio of sums ``sum w a / sum w b`` may name
#: (a record's ``ratio_of_sums``): the constant 1, the label, every per-row term of :data:`ROW_TERMS`
#: and the net benefit's value of the row's category.
ROW_VALUES: dict[str, Callable[[np.ndarray, np.ndarray, float, float], np.ndarray]] = {
    "one": lambda y, r, threshold, odds: np.ones(y.shape[0]),
    "label": lambda y, r, threshold, odds: y.astype(np.float64),
    **{name: (lambda y, r, threshold, odds, term=term: term(y, r)) for name, term in ROW_TERMS.items()},
    "net_benefit": lambda y, r, threshold, odds: net_benefit_values(odds)[categories(y, r, threshold)],
}
#: Metrics that are a ratio of two weighted sums of per-row values, ``sum w a / sum w b``, other than
#: the proportions (the inputs of their jackknife, :func:`ratio_of_sums_values`).
RATIOS_OF_SUMS: tuple[str, ...] = tuple(r.name for r in METRIC_RECORDS if r.ratio_of_sums is not None)
_RATIO_VALUES: dict[str, tuple[str, str]] = {r.name: r.ratio_of_sums for r in METRIC_RECORDS if r.ratio_of_sums}


def ratio_of_sums_values(
    metric: str, y: np.ndarray, scores: np.ndarray, *, threshold: float, odds: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row numerator and denominator values ``a``, ``b`` of a metric ``sum w a / sum w b``.

    Parameters
    ----------
    metric : str
        One of :data:`RATIOS_OF_SUMS`.
    y, scores : ndarray of shape (n,), float64
    threshold, odds : float

    Returns
    -------
    a, b : ndarray of shape (n,), float64
        The :data:`ROW_VALUES` its record names: e.g. the log loss is ``(pointwise log loss, 1)``,
        the observed/expected ratio ``(y, r)``.

    Raises
    ------
    ValueError
        If ``metric`` is not a ratio of sums.
    """
    if metric not in _RATIO_VALUES:
        raise ValueError(f"{metric!r} is not a ratio of sums; expected one of {RATIOS_OF_SUMS}")
    numerator, denominator = _RATIO_VALUES[metric]
    return ROW_VALUES[numerator](y, scores, threshold, odds), ROW_VALUES[denominator](y, scores, threshold, odds)


# ----------------------------------------------------------------------------------------------
# Metric slots and formulas
# ----------------------------------------------------------------------------------------------

# Output slots of metrics_from_sums, by name. Written out, not derived from the order of the
# registry: adding or reordering metric records must not move a slot.
_SLOT_LOG_LOSS = 0
_SLOT_AUC = 1
_SLOT_SENSITIVITY = 2
_SLOT_SPECIFICITY = 3
_SLOT_PRECISION = 4
_SLOT_NET_BENEFIT = 5
_SLOT_LABEL_RATE = 6
_SLOT_PREDICTED_POSITIVE_RATE = 7
_SLOT_ACCURACY = 8
_SLOT_FALSE_POSITIVE_RATE = 9
_SLOT_FALSE_NEGATIVE_RATE = 10
_SLOT_BRIER_SCORE = 11
_SLOT_MEAN_PREDICTED_RISK = 12
_SLOT_OBSERVED_EXPECTED_RATIO = 13
_SLOT_BALANCED_ACCURACY = 14

#: Metric name -> slot of the ``out`` buffer written by :func:`metrics_from_sums` (every record has one,
#: :func:`check_engine_records`).
METRIC_SLOTS: dict[str, int] = {
    "log_loss": _SLOT_LOG_LOSS,
    "auc": _SLOT_AUC,
    "sensitivity": _SLOT_SENSITIVITY,
    "specificity": _SLOT_SPECIFICITY,
    "precision": _SLOT_PRECISION,
    "net_benefit": _SLOT_NET_BENEFIT,
    "label_rate": _SLOT_LABEL_RATE,
    "predicted_positive_rate": _SLOT_PREDICTED_POSITIVE_RATE,
    "accuracy": _SLOT_ACCURACY,
    "false_positive_rate": _SLOT_FALSE_POSITIVE_RATE,
    "false_negative_rate": _SLOT_FALSE_NEGATIVE_RATE,
    "brier_score": _SLOT_BRIER_SCORE,
    "mean_predicted_risk": _SLOT_MEAN_PREDICTED_RISK,
    "observed_expected_ratio": _SLOT_OBSERVED_EXPECTED_RATIO,
    "balanced_accuracy": _SLOT_BALANCED_ACCURACY,
}
#: Length of the ``out`` buffer of :func:`metrics_from_sums`.
N_METRIC_SLOTS: int = len(METRIC_SLOTS)


def metric_slots(metrics: Sequence[str]) -> np.ndarray:
    """Slots of ``metrics`` in the buffer of :func:`metrics_from_sums`.

    Parameters
    ----------
    metrics : sequence of str
        Metric names from :data:`~disaggregated_eval.vocabulary.METRICS`.

    Returns
    -------
    ndarray of shape (n_metrics,), int64
        ``out[slots[q]]`` is metric ``metrics[q]``.

    Raises
    ------
    TypeError, ValueError
        As :func:`disaggregated_eval.registry.check_metric_names`.
    """
    names = check_metric_names(metrics)
    return np.asarray([METRIC_SLOTS[name] for name in names], dtype=np.int64)


@numba.njit(cache=True)
def metrics_from_sums(wp, wn, fn, tn, auc_numerator, terms, odds, out):
    """Every metric from the weighted sums of one evaluation on one (re)sample.

    Parameters
    ----------
    wp, wn : float
        ``sum w y`` and ``sum w (1 - y)`` (``w`` = row weight times bootstrap count).
    fn, tn : float
        Weighted false negatives and true negatives at the threshold (``yhat = 1[r >= threshold]``):
        the positives and negatives below the threshold. ``tp = wp - fn`` and ``fp = wn - tn``.
    auc_numerator : float
        ``sum_g pos_g (neg_below_g + neg_g / 2)`` over the tie groups ``g`` of equal scores in
        increasing score order.
    terms : ndarray of shape (N_TERMS,), float64
        ``sum w t`` of each per-row term of :data:`ROW_TERMS` (slot :data:`TERM_SLOTS`); a term the
        requested metrics do not need may hold anything.
    odds : float
        ``t / (1 - t)`` for the net benefit's preference threshold ``t``.
    out : ndarray of shape (>= N_METRIC_SLOTS,), float64
        Receives metric ``name`` at ``out[METRIC_SLOTS[name]]``; NaN where undefined.

    Notes
    -----
    The definitions (and the NaN rules) of :mod:`disaggregated_eval.metrics`, which match
    scikit-learn; written for numba (``numba.njit``), callable from Python too.
    """
    nan = np.nan
    tp = wp - fn  # exactly 0.0 when nothing reaches the threshold
    fp = wn - tn
    total = wp + wn
    pp = tp + fp
    if total > 0.0:
        out[_SLOT_LOG_LOSS] = terms[_T_LOG_LOSS] / total
        out[_SLOT_PRECISION] = tp / pp if pp > 0.0 else nan
        out[_SLOT_NET_BENEFIT] = (tp - fp * odds) / total
        out[_SLOT_LABEL_RATE] = wp / total
        out[_SLOT_PREDICTED_POSITIVE_RATE] = pp / total
        out[_SLOT_ACCURACY] = (tp + tn) / total
        out[_SLOT_BRIER_SCORE] = terms[_T_BRIER] / total
        out[_SLOT_MEAN_PREDICTED_RISK] = terms[_T_SCORE] / total
    else:
        out[_SLOT_LOG_LOSS] = nan
        out[_SLOT_PRECISION] = nan
        out[_SLOT_NET_BENEFIT] = nan
        out[_SLOT_LABEL_RATE] = nan
        out[_SLOT_PREDICTED_POSITIVE_RATE] = nan
        out[_SLOT_ACCURACY] = nan
        out[_SLOT_BRIER_SCORE] = nan
        out[_SLOT_MEAN_PREDICTED_RISK] = nan
    out[_SLOT_OBSERVED_EXPECTED_RATIO] = wp / terms[_T_SCORE] if terms[_T_SCORE] > 0.0 else nan
    out[_SLOT_AUC] = auc_numerator / (wp * wn) if (wp > 0.0 and wn > 0.0) else nan
    sensitivity = tp / wp if wp > 0.0 else nan
    specificity = tn / wn if wn > 0.0 else nan
    out[_SLOT_SENSITIVITY] = sensitivity
    out[_SLOT_FALSE_NEGATIVE_RATE] = fn / wp if wp > 0.0 else nan
    out[_SLOT_SPECIFICITY] = specificity
    out[_SLOT_FALSE_POSITIVE_RATE] = (wn - tn) / wn if wn > 0.0 else nan
    out[_SLOT_BALANCED_ACCURACY] = 0.5 * (sensitivity + specificity)  # NaN unless both classes have weight


#: Sums at which :func:`check_engine_records` runs the formulas: every metric defined, then none.
_PROBES: tuple[tuple[float, ...], ...] = ((3.0, 5.0, 1.0, 2.0, 7.5), (0.0, 0.0, 0.0, 0.0, 0.0))
#: Tallies (TN, FP, FN, TP) at which every proportion's formula must equal its record's share: no two
#: sums of categories are equal, so a formula over other categories than its record's cannot agree.
_PROPORTION_PROBES: tuple[tuple[float, float, float, float], ...] = ((1.0, 2.0, 4.0, 8.0), (1.0, 3.0, 9.0, 27.0))


def check_engine_records(records: Sequence[MetricRecord], slots: dict[str, int] | None = None) -> None:
    """Check that the engine computes every metric of ``records``, and nothing else.

    Run when this module is imported (on :data:`disaggregated_eval.registry.METRIC_RECORDS`), so that a
    metric record without its formula, or a formula without its record, fails at import.

    Parameters
    ----------
    records : sequence of MetricRecord
        The metric registry (a modified copy in tests).
    slots : dict of str to int, optional
        Metric name -> output slot (default :data:`METRIC_SLOTS`).

    Raises
    ------
    RegistryError
        Naming the metric: a record without a slot, a slot without a record, slots that are not
        ``0 .. n - 1``; a slot that :func:`metrics_from_sums` leaves unwritten (on sums where every
        metric is defined, or on empty sums, where it must write NaN) or a write beyond the slots; a
        per-row term or ratio value that the engine does not have (:data:`ROW_TERMS`,
        :data:`ROW_VALUES`).
    """
    slots = METRIC_SLOTS if slots is None else slots
    names = [r.name for r in records]
    missing = [name for name in names if name not in slots]
    if missing:
        raise RegistryError(
            f"metric records {missing} have no slot in engine/sums.py: give each a slot in METRIC_SLOTS and its "
            "formula in metrics_from_sums"
        )
    orphans = [name for name in slots if name not in names]
    if orphans:
        raise RegistryError(f"engine/sums.py has slots for {orphans}, which have no metric record in the registry")
    if sorted(slots.values()) != list(range(len(slots))):
        raise RegistryError(f"metric slots must be 0 .. {len(slots) - 1}, each once; got {sorted(slots.values())}")
    sentinel = -7.25e300  # no formula gives this value
    for wp, wn, fn, tn, auc in _PROBES:
        out = np.full(len(slots) + 1, sentinel)
        metrics_from_sums.py_func(wp, wn, fn, tn, auc, np.full(N_TERMS, 2.0 * (wp + wn)), 1.0, out)
        unwritten = [name for name in names if out[slots[name]] == sentinel]
        if unwritten:
            raise RegistryError(f"metrics_from_sums writes no value for {unwritten} (with wp={wp}, wn={wn}): "
                                "every metric needs its formula, and NaN where it is undefined")  # fmt: skip
        if out[-1] != sentinel:
            raise RegistryError("metrics_from_sums writes beyond the last metric slot")
    _check_proportion_formulas(records, slots)
    for record in records:
        unknown = [t for t in record.terms if t not in ROW_TERMS]
        if unknown:
            raise RegistryError(f"metric record {record.name!r} needs the row terms {unknown}, which engine/sums.py "
                                f"does not have (ROW_TERMS: {tuple(ROW_TERMS)})")  # fmt: skip
        unknown = [v for v in record.ratio_of_sums or () if v not in ROW_VALUES]
        if unknown:
            raise RegistryError(f"metric record {record.name!r}: ratio_of_sums names {unknown}, which are not row "
                                f"values of engine/sums.py (ROW_VALUES: {tuple(ROW_VALUES)})")  # fmt: skip


def _check_proportion_formulas(records: Sequence[MetricRecord], slots: dict[str, int]) -> None:
    """Every proportion's formula in :func:`metrics_from_sums` equals its record's share of categories
    (the share its Wilson interval, Newcombe difference, exact test and minimum-denominator rule read) on
    :data:`_PROPORTION_PROBES`, so that the two definitions cannot disagree (:func:`check_engine_records`)."""
    for tallies in _PROPORTION_PROBES:
        tn, fp, fn, tp = (tallies[CATEGORIES.index(c)] for c in ("TN", "FP", "FN", "TP"))
        out = np.full(len(slots), np.nan)
        metrics_from_sums.py_func(fn + tp, tn + fp, fn, tn, 0.5, np.full(N_TERMS, 1.0), 1.0, out)
        for record in records:
            if record.proportion is None:
                continue
            numerator, denominator = (sum(tallies[c] for c in _codes(part)) for part in record.proportion)
            share, value = numerator / denominator, float(out[slots[record.name]])
            if not abs(value - share) <= 1e-12 * abs(share):
                raise RegistryError(
                    f"metric record {record.name!r} is the share of {'+'.join(record.proportion[0])} among "
                    f"{'+'.join(record.proportion[1])} ({share:.6g} at TN, FP, FN, TP = {tallies}), but its formula "
                    f"in metrics_from_sums gives {value:.6g}: the record (read by its interval, test and size rule) "
                    "and the formula must define the same proportion"
                )


check_engine_records(METRIC_RECORDS)


# ----------------------------------------------------------------------------------------------
# Segments of the score order
# ----------------------------------------------------------------------------------------------


def score_segments(r_sorted: np.ndarray, thresholds: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tie groups and runs of distinct scores of sorted scores, split at every threshold.

    Parameters
    ----------
    r_sorted : ndarray of shape (n,), float64
        Scores in increasing order.
    thresholds : sequence of float
        Decision thresholds, increasing; ``yhat = 1[r >= t]``.

    Returns
    -------
    starts : ndarray of shape (n_segments + 1,), int64
        Segment ``s`` holds sorted rows ``starts[s]:starts[s + 1]``; ``starts[-1] == n``. A segment
        is either one tie group (>= 2 equal scores) or a run of rows with distinct scores.
    is_tie : ndarray of shape (n_segments,), bool
    splits : ndarray of shape (n_thresholds,), int64
        For each threshold, the first segment whose scores are >= it (``n_segments`` if none): the
        running sums at the start of that segment are the false negatives and true negatives.
    """
    n = r_sorted.shape[0]
    group_start = np.concatenate(([0], np.flatnonzero(np.diff(r_sorted) != 0.0) + 1, [n]))
    tie = np.diff(group_start) > 1
    cuts = np.searchsorted(r_sorted, np.asarray(thresholds, dtype=np.float64), side="left")  # group starts (or n)
    tie_start = group_start[:-1][tie]
    bounds = np.unique(np.concatenate(([0, n], cuts, tie_start, group_start[1:][tie]))).astype(np.int64)
    is_tie = np.isin(bounds[:-1], tie_start)
    splits = np.searchsorted(bounds, cuts, side="left").astype(np.int64)
    return bounds, is_tie, splits


@numba.njit(parallel=True, cache=True)
def keyed_draw_sums(draws, keys, values, n_out):  # pragma: no cover - compiled
    """Weighted sums by key of every resample drawn as row indices.

    For each resample ``j`` (row of ``draws``) and output slot ``o``, ``out[j, o] = sum_r c_jr
    sum_{k: keys[r, k] = o} values[r, k]`` with ``c_jr`` the times row ``r`` is drawn: several sums
    per row (one per column of ``keys``/``values``) into one flat output, e.g. per (cell, bin) and per
    cell. Rows that compress use a sparse product of unit counts instead (:mod:`.units`).

    Parameters
    ----------
    draws : ndarray of shape (n_draws, n_rows), int32
        Row indices of each resample (:func:`.resampling.run_batches`).
    keys : ndarray of shape (n_rows, n_sums), int64
        Output slot of each row's sums, in ``0 .. n_out - 1``.
    values : ndarray of shape (n_rows, n_sums), float64
    n_out : int

    Returns
    -------
    ndarray of shape (n_draws, n_out), float64
    """
    b, n = draws.shape
    n_sums = keys.shape[1]
    out = np.zeros((b, n_out))
    for j in numba.prange(b):
        # counts first (random writes into one small array), then one pass in row order: fewer cache
        # misses than gathering each drawn row's values (the walk reads its counts the same way)
        counts = np.zeros(n, dtype=np.int32)
        for i in range(n):
            counts[draws[j, i]] += 1
        for r in range(n):
            c = counts[r]
            if c == 0:
                continue
            for k in range(n_sums):
                out[j, keys[r, k]] += c * values[r, k]
    return out
