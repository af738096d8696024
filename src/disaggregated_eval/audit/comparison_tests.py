"""The tests of an audit's comparisons: p-values of the metric's difference, orchestrated over the engine.

Tests (:mod:`disaggregated_eval.engine.permutation`): slice membership is permuted within the
metric's conditioning class, so that each test is of the metric, not of the slice's whole
distribution (:data:`PERMUTATION_DESIGNS`): among the negatives for the false positive rate and the
specificity, among the positives for the sensitivity and the false negative rate, among the predicted
positives for the precision, within each class for the AUC, within bins of the score for the
observed/expected ratio (:data:`SCORE_STRATA`), among all rows for the rest. Unweighted
proportions get exact (hypergeometric) p-values; the rest Monte-Carlo p-values with Besag and
Clifford's sequential stopping. ``vs_overall`` and ``vs_rest`` share one test (their statistics are
functions of the same permuted slice). :func:`test_pvalues` gives every comparison's p-value and the
test used (column ``test``); the comparisons are listed by :mod:`.comparison_families`, and the table
(:mod:`.comparisons`) adjusts the p-values within their families.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from .. import seeds
from ..engine.permutation import exact_count_pvalue, permutation_space, permutation_test
from ..engine.sums import PROPORTIONS, categories, metric_slots
from ..registry import CATEGORIES, METRIC_RECORDS
from .calibration_table import score_bins
from .comparison_families import Comparison
from .slices import SlicePlan
from .tallies import SliceTallies

__all__ = [
    "PERMUTATION_DESIGNS",
    "SCORE_STRATA",
    "test_pvalues",
]


#: The null of each metric's test, from its record (:attr:`~disaggregated_eval.registry.MetricRecord.design`):
#: (categories of the rows permuted among, strata within which membership is permuted: None,
#: ``"label"`` or ``"score"``, the model's score in at most :data:`SCORE_STRATA` quantile bins). A
#: proportion's rows are permuted among its denominator's.
PERMUTATION_DESIGNS: dict[str, tuple[tuple[int, ...], str | None]] = {
    r.name: (tuple(CATEGORIES.index(c) for c in r.design[0]), r.design[1]) for r in METRIC_RECORDS
}
#: Bins of the score within which the observed/expected ratio's test permutes
#: (:func:`.calibration_table.score_bins`: one per value for a score with at most this many values,
#: else quantile bins; the calibration table's default number of bins).
SCORE_STRATA = 10


def _exact(tallies: SliceTallies, m: int, metric: str, first: int, other: int | None) -> float:
    """Exact p-value of an unweighted proportion: the slice against overall/rest, or against ``other``."""
    num, den = PROPORTIONS[metric]
    count = tallies.count[m]
    x = count[first, list(num)].sum()
    n_first = count[first, list(den)].sum()
    universe = count[0] if other is None else count[first] + count[other]
    return float(exact_count_pvalue(x, n_first, universe[list(num)].sum(), universe[list(den)].sum()))


def test_pvalues(
    comparisons: Sequence[Comparison],
    plan: SlicePlan,
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    weight: np.ndarray | None,
    model_names: Sequence[str],
    tallies: SliceTallies,
    point: np.ndarray,
    *,
    metrics: Sequence[str],
    threshold: float,
    odds: float,
    n_permutations: int,
    seed: int,
    n_threads: int,
    progress: Callable[[int, int], None] | None = None,
    count: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """p-values of every comparison and metric (NaN for vs_model), and how each was computed.

    Parameters
    ----------
    point : ndarray of shape (n_models, n_slices, 2, n_metrics)
        The slices' (side 0) and rests' (side 1) point estimates.
    count : ndarray of shape (n_rows,), int64, optional
        Rows each row stands for (frequency weights): the exact tests read the tallies (counted in
        rows), and the Monte-Carlo tests permute the expanded rows (units with the summed counts,
        :func:`disaggregated_eval.engine.permutation.permutation_space`).

    Returns
    -------
    p : ndarray of shape (n_comparisons, n_metrics)
    test : ndarray of shape (n_comparisons, n_metrics), object
        ``"exact"``, ``"monte carlo"`` or ``""`` (no test).

    Notes
    -----
    Seed path of a Monte-Carlo test: ``("audit", "permutation", model, design, slice[, other slice])``
    with ``design`` naming the conditioning class (e.g. ``"TN+FP"``, ``"all by label"``).
    """
    n_q = len(metrics)
    p = np.full((len(comparisons), n_q), np.nan)
    how = np.full((len(comparisons), n_q), "", dtype=object)
    if n_permutations == 0:
        return p, how
    n = y.shape[0] if count is None else int(count.sum())
    w = np.ones(y.shape[0]) if weight is None else weight
    index = {(c.kind, c.model, c.slice, c.reference): k for k, c in enumerate(comparisons)}
    tests = [(c.model, c.slice, None) for c in comparisons if c.kind == "vs_overall"]
    tests += [(c.model, c.slice, c.minus[1]) for c in comparisons if c.kind == "pairwise"]
    designs: dict[tuple, list[int]] = {}
    for q, metric in enumerate(metrics):
        if metric in PROPORTIONS and weight is None:
            continue
        designs.setdefault(PERMUTATION_DESIGNS[metric], []).append(q)
    slots = {design: metric_slots([metrics[q] for q in qs]) for design, qs in designs.items()}
    orders = [np.argsort(r, kind="stable") for r in scores]
    cats = [categories(y, r, threshold) for r in scores]
    spaces: dict[tuple, object] = {}

    def space(m: int, design: tuple, rows: np.ndarray):
        """Permutation space of rows (original indices, in model m's score order) of a design."""
        cats_in, within = design
        rows = rows[np.isin(cats[m][rows], cats_in)]
        if rows.size == 0:  # no row of the design (e.g. no predicted positive for precision): no test
            return rows, None
        if within == "label":
            strata = y[rows].astype(np.int64)
        elif within == "score":
            strata = score_bins(scores[m][rows], SCORE_STRATA, None if count is None else count[rows])[0]
        else:
            strata = None
        return rows, permutation_space(
            y[rows],
            scores[m][rows],
            w[rows],
            metrics=[metrics[q] for q in designs[design]],
            threshold=threshold,
            strata=strata,
            count=None if count is None else count[rows],
        )

    total = len(tests)
    counts = plan.slice_counts()
    if progress is not None:
        progress(0, total)
    for done, (m, s, other) in enumerate(tests, start=1):
        name = model_names[m]
        pairwise = other is not None
        keys = (
            [("pairwise", m, s, plan.names[other])]
            if pairwise
            else [("vs_overall", m, s, "overall"), ("vs_rest", m, s, "rest")]
        )
        rows_out = [index[key] for key in keys]
        if counts[s] == 0 or (not pairwise and counts[s] == n) or (pairwise and counts[other] == 0):
            continue
        for q, metric in enumerate(metrics):
            if metric in PROPORTIONS and weight is None:
                value = _exact(tallies, m, metric, s, other)
                for k in rows_out:
                    p[k, q], how[k, q] = value, "exact"
        in_slice = plan.slice_mask(s)
        for design, qs in designs.items():
            if pairwise:
                members = in_slice | plan.slice_mask(other)
                rows, universe = space(m, design, orders[m][members[orders[m]]])
            else:
                if (m, design) not in spaces:
                    spaces[(m, design)] = space(m, design, orders[m])
                rows, universe = spaces[(m, design)]
            if universe is None:
                continue
            n_first = universe.first_counts(in_slice[rows])
            if (n_first == 0).all() or (n_first == universe.stratum_sizes()).all():
                continue
            if pairwise:
                observed = (point[m, s, 0, qs] - point[m, other, 0, qs])[None, :]
            else:
                observed = np.stack([point[m, s, 0, qs] - point[m, 0, 0, qs], point[m, s, 0, qs] - point[m, s, 1, qs]])
            path = ("audit", "permutation", name, _design_name(design), plan.names[s])
            path += (plan.names[other],) if pairwise else ()
            values, _ = permutation_test(
                universe,
                n_first,
                observed,
                pairwise=pairwise,
                fixed=None if pairwise else point[m, 0, 0, qs],
                slots=slots[design],
                odds=odds,
                n_permutations=n_permutations,
                seed=seeds.seed_sequence(seed, *path),
                n_threads=n_threads,
            )
            for i, k in enumerate(rows_out):
                p[k, qs] = values[i]
                how[k, qs] = "monte carlo"
        if progress is not None:
            progress(done, total)
    return p, how


def _design_name(design: tuple) -> str:
    cats_in, within = design
    names = "+".join(("TN", "FP", "FN", "TP")[c] for c in cats_in) if len(cats_in) < 4 else "all"
    return names + (f" by {within}" if within else "")
