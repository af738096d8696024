"""The tests of an audit's comparisons: p-values of the metric's difference, orchestrated over the engine.

Tests (:mod:`disaggregated_eval.engine.permutation`): slice membership is permuted within the
metric's conditioning class, so that each test is of the metric, not of the slice's whole
distribution (:data:`PERMUTATION_DESIGNS`): among the negatives for the false positive rate and the
specificity, among the positives for the sensitivity and the false negative rate, among the predicted
positives for the precision, within each class for the AUC, within bins of the score for the
observed/expected ratio (:data:`SCORE_STRATA`), among all rows for the rest. Unweighted
proportions get exact (hypergeometric) p-values; unweighted means (log loss, Brier score, net benefit,
mean predicted risk) an upper bound of the exact p-value (:func:`~disaggregated_eval.engine.permutation.
linear_tail_pvalues`, test ``tail bound``) where it lies below the smallest threshold of the comparison's
family (:attr:`ComparisonTests.levels`); the rest Monte-Carlo p-values with Besag and Clifford's
sequential stopping, and a stop for small p-values once they are below that threshold at a resampling
risk of :data:`~disaggregated_eval.engine.permutation.RESAMPLING_RISK`. ``vs_overall`` and ``vs_rest``
share one test (their statistics are functions of the same permuted slice). :func:`test_pvalues` gives
every comparison's p-value and the test used (column ``test``); the comparisons are listed by
:mod:`.comparison_families`, and the table (:mod:`.comparisons`) adjusts the p-values within their families.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from .. import seeds
from ..derived import Replicated, bootstrap_z_pvalue
from ..engine.permutation import exact_count_pvalue, linear_tail_pvalues, permutation_space, permutation_test
from ..engine.sums import PROPORTIONS, categories, metric_slots
from ..engine.units import COMPRESSION_MAX_SHARE, Units, find_units, units_of_counts
from ..registry import CATEGORIES, METRIC_RECORDS, METRIC_REGISTRY
from ..vocabulary import TEST_METHODS
from .calibration_table import score_bins
from .columns import BOOTSTRAP_Z, EXACT, MONTE_CARLO, TAIL_BOUND
from .comparison_families import Comparison
from .estimates import AuditEstimates
from .slices import SlicePlan
from .tallies import SliceTallies

__all__ = [
    "PERMUTATION_DESIGNS",
    "SCORE_STRATA",
    "LARGE_SAMPLE_WORK",
    "LARGE_SAMPLE_MIN_ROWS",
    "ModelUnits",
    "model_units",
    "permutation_designs",
    "ComparisonTests",
    "plan_tests",
    "test_notes",
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


#: The switch rule: a Monte-Carlo test that may walk more rows than this (both sides of the distinct units
#: of its universe, once per permutation: about a CPU-second at 10 ns per row) ...
LARGE_SAMPLE_WORK = 10**8
#: ... is replaced by the large-sample test when each side of the comparison has at least this many rows in
#: each outcome category (TN, FP, FN, TP) among the rows the metric is computed on: its level is measured
#: at these sizes by the validity study (docs/audit.md, "How far to trust the numbers"; a weighted false
#: positive rate with about 30 false positives a side rejected 8.5% at 5%, with 100, 3.5%).
LARGE_SAMPLE_MIN_ROWS = 200


@dataclass(frozen=True)
class ModelUnits:
    """One model's rows merged once per audit into units that every test reads.

    Rows equal in cell, label, score and sample weight are one unit (:func:`~disaggregated_eval.engine.units.
    find_units`): every test's universe is a set of whole units (those of its cells and categories), so a
    test reads units, not rows.

    Attributes
    ----------
    units : Units or None
        The units (None: the rows do not merge, every row is its own unit and the tests read rows).
    cell, category : ndarray of shape (n_units,), int64
        Cell and outcome category (:data:`~disaggregated_eval.engine.sums.CATEGORIES`) of each unit.
    y, score, weight : ndarray of shape (n_units,), float64
        Each unit's label, score and sample weight.
    count : ndarray of shape (n_units,), int64
        Rows of each unit.
    per_slice : ndarray of shape (n_slices, 4), int64
        Units of each slice in each outcome category (rows when the rows do not merge): the distinct
        units a test's universe is made of.
    """

    units: Units | None
    cell: np.ndarray
    category: np.ndarray
    y: np.ndarray
    score: np.ndarray
    weight: np.ndarray
    count: np.ndarray
    per_slice: np.ndarray


def model_units(
    plan: SlicePlan,
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    weight: np.ndarray | None,
    threshold: float,
    count: np.ndarray | None = None,
) -> list[ModelUnits]:
    """The units of every model's rows (:class:`ModelUnits`), found once per audit.

    Parameters
    ----------
    plan : SlicePlan
    y : ndarray of shape (n_rows,)
    scores : sequence of ndarray of shape (n_rows,)
    weight : ndarray of shape (n_rows,) or None
    threshold : float
    count : ndarray of shape (n_rows,), int, optional
        Rows each row stands for (frequency weights): the rows are always merged into units
        (:func:`~disaggregated_eval.engine.units.units_of_counts`), whose counts are the expanded rows'.

    Returns
    -------
    list of ModelUnits
        One per model.
    """
    w = np.ones(y.shape[0]) if weight is None else weight
    cells = plan.cell_codes.astype(np.int64)
    out = []
    for r in scores:
        category = categories(y, r, threshold).astype(np.int64)
        units = find_units([cells, y, r, w]) if count is None else units_of_counts([cells, y, r, w], count)
        if units is None:
            per_cell = np.bincount(cells * 4 + category, minlength=4 * plan.n_cells)
            empty = np.zeros(0, dtype=np.int64)
            out.append(ModelUnits(None, empty, empty, *(np.zeros(0) for _ in range(3)), empty,
                                 plan.aggregate_cells(per_cell.reshape(plan.n_cells, 4))))  # fmt: skip
            continue
        first = units.first
        per_cell = np.bincount(cells[first] * 4 + category[first], minlength=4 * plan.n_cells)
        out.append(
            ModelUnits(
                units=units,
                cell=cells[first],
                category=category[first],
                y=y[first],
                score=r[first],
                weight=w[first],
                count=units.multiplicity,
                per_slice=plan.aggregate_cells(per_cell.reshape(plan.n_cells, 4)),
            )
        )
    return out


def permutation_designs(metrics: Sequence[str], *, weighted: bool) -> dict[tuple, list[int]]:
    """The permutation designs of the metrics without an exact test, each with its metrics' indices."""
    designs: dict[tuple, list[int]] = {}
    for q, metric in enumerate(metrics):
        if metric in PROPORTIONS and not weighted:
            continue
        designs.setdefault(PERMUTATION_DESIGNS[metric], []).append(q)
    return designs


@dataclass(frozen=True)
class ComparisonTests:
    """Which test every comparison gets, decided before any work (:func:`plan_tests`).

    Attributes
    ----------
    tests : list of (int, int, int or None)
        ``(model, slice, other slice)``: the tests of every slice against overall and the rest (``None``),
        then of every pair.
    designs : list of dict of tuple to list of int
        Per model, permutation design -> indices of its metrics (the metrics without an exact test that
        the model reports).
    method : dict of (int, int, int or None, tuple) to str
        :data:`MONTE_CARLO` or :data:`BOOTSTRAP_Z` of each test and design that has a test.
    work : dict of (int, int, int or None, tuple) to int
        Rows a Monte-Carlo test of it walks at most: ``2 x n_permutations x`` the distinct units of its
        universe.
    levels : dict of str to float
        The smallest threshold at which the adjusted family of each kind (``vs_overall``, ``vs_rest``,
        ``pairwise``) can read a test's p-value: ``alpha / m`` for a family of at most ``m`` tests under
        Holm's or Benjamini-Hochberg's adjustment, ``alpha`` without one (a p-value below it is a rejection
        at every threshold of the family). A test stops once its p-value is known to be below it (the
        ``low`` of :func:`~disaggregated_eval.engine.permutation.permutation_test`); empty: never.
    """

    tests: list
    designs: dict
    method: dict
    work: dict
    levels: dict = field(default_factory=dict)

    def monte_carlo(self) -> list:
        """The keys of the tests that stay Monte Carlo."""
        return [key for key, how in self.method.items() if how == MONTE_CARLO]

    def large_sample(self) -> list:
        """The keys of the tests that use the large-sample test."""
        return [key for key, how in self.method.items() if how == BOOTSTRAP_Z]

    def metric_names(self, keys: Sequence[tuple], metrics: Sequence[str]) -> list[str]:
        """The metrics tested by the tests ``keys`` (keys of :attr:`method`), in the order of ``metrics``."""
        names = {metrics[q] for key in keys for q in self.designs[key[0]][key[3]]}
        return [metric for metric in metrics if metric in names]


def _side_rows(count: np.ndarray, s: int, other: int | None, cats: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Rows of each category of ``cats`` in the first side (slice ``s``) and in the second (the rest of the
    rows, or slice ``other``), from one model's tallies (n_slices, 4)."""
    first = count[s, list(cats)]
    second = (count[0, list(cats)] - first) if other is None else count[other, list(cats)]
    return first, second


def plan_tests(
    comparisons: Sequence[Comparison],
    tallies: SliceTallies,
    units: Sequence[ModelUnits] | None,
    *,
    metrics: Sequence[str],
    weighted: bool,
    n_permutations: int,
    test_method: str = "auto",
    metric_ok: np.ndarray | None = None,
    levels: Mapping[str, float] | None = None,
) -> ComparisonTests:
    """Which test every comparison and metric without an exact test gets (the switch rule).

    A Monte-Carlo permutation test walks both sides of the distinct units of its universe once per
    permutation: it may walk ``2 x n_permutations x U`` rows (``U``: the units of :class:`ModelUnits` in
    the test's cells and categories; its rows when the rows do not merge). With ``test_method="auto"`` a
    test whose bound exceeds :data:`LARGE_SAMPLE_WORK` and whose comparison is large (each side has at
    least :data:`LARGE_SAMPLE_MIN_ROWS` rows in each outcome category of the metric's design)
    gets the large-sample z-test of the difference with the paired bootstrap's standard error
    (:func:`disaggregated_eval.derived.bootstrap_z_pvalue`; of the difference of logarithms for a metric whose
    :attr:`~disaggregated_eval.registry.MetricRecord.test_scale` is ``log``), whose level the validity study measures at
    these sizes; every other test stays Monte Carlo. ``"permutation"``: every test Monte Carlo;
    ``"bootstrap"``: every test large-sample.

    Parameters
    ----------
    comparisons : sequence of Comparison
    tallies : SliceTallies
        Rows of every slice and outcome category.
    units : sequence of ModelUnits or None
        One per model (:func:`model_units`); None when no metric needs a permutation design (every
        metric a proportion, without sample weights: their tests are exact).
    metrics : sequence of str
    weighted : bool
        Whether the audit has sample weights (then every metric is tested by permutations).
    n_permutations : int
    test_method : {"auto", "permutation", "bootstrap"}
        :data:`disaggregated_eval.vocabulary.TEST_METHODS`.
    metric_ok : ndarray of shape (n_models, n_metrics), bool, optional
        Whether each model reports each metric (a model of hard predictions has no score metrics: those
        are not tested).
    levels : mapping of str to float, optional
        :attr:`ComparisonTests.levels` (None: no stop for small p-values, no tail bounds).

    Returns
    -------
    ComparisonTests
        Tests whose slice or whose other side has no row of a design are not made (absent).
    """
    if test_method not in TEST_METHODS:
        raise ValueError(f"test_method must be one of {TEST_METHODS}; got {test_method!r}")
    tests = [(c.model, c.slice, None) for c in comparisons if c.kind == "vs_overall"]
    tests += [(c.model, c.slice, c.minus[1]) for c in comparisons if c.kind == "pairwise"]
    every_design = permutation_designs(metrics, weighted=weighted)
    if every_design and units is None:
        raise ValueError(f"the permutation designs of {list(metrics)} need the models' units (model_units)")
    designs = []
    for m in range(tallies.count.shape[0]):
        reported = [metric if metric_ok is None or metric_ok[m, q] else "" for q, metric in enumerate(metrics)]
        designs.append({design: qs for design, qs in every_design.items() if any(reported[q] for q in qs)})
    method, work = {}, {}
    for m, s, other in tests:
        count = tallies.count[m]
        for design in designs[m]:
            cats = design[0]
            first, second = _side_rows(count, s, other, cats)
            if first.sum() == 0 or second.sum() == 0:
                continue
            per_slice = units[m].per_slice
            universe = (
                per_slice[0, list(cats)].sum() if other is None else (per_slice[s] + per_slice[other])[list(cats)].sum()
            )
            bound = 2 * n_permutations * int(universe)
            smallest = int(min(first.min(), second.min()))  # rows of the rarest category of either side
            large = bound > LARGE_SAMPLE_WORK and smallest >= LARGE_SAMPLE_MIN_ROWS
            switch = test_method == "bootstrap" or (test_method == "auto" and large)
            method[(m, s, other, design)] = BOOTSTRAP_Z if switch else MONTE_CARLO
            work[(m, s, other, design)] = bound
    return ComparisonTests(tests=tests, designs=designs, method=method, work=work, levels=dict(levels or {}))


def test_notes(test_plan: ComparisonTests, metrics: Sequence[str], test_method: str) -> list[str]:
    """A note saying which tests use the large-sample test, and why (empty when none does)."""
    switched = test_plan.large_sample()
    if not switched:
        return []
    names = test_plan.metric_names(switched, metrics)
    total = len(test_plan.method)
    if test_method == "bootstrap":
        why = "test_method='bootstrap' asks for it"
    else:
        why = (
            f"their Monte-Carlo permutation tests could walk more than {LARGE_SAMPLE_WORK:.0e} rows each "
            f"(2 x n_permutations x the distinct rows of the test), and each side of these comparisons has at "
            f"least {LARGE_SAMPLE_MIN_ROWS:,} rows in each outcome category (TN, FP, FN, TP) of the metric's rows, "
            "where the large-sample test holds its level (docs/audit.md, 'How far to trust the numbers')"
        )
    return [
        f"{len(switched):,} of {total:,} tests ({', '.join(names)}) use the large-sample z-test of the difference "
        f"with the paired bootstrap's standard error instead of permutations (test = '{BOOTSTRAP_Z}' in the "
        f"comparisons table): {why}; test_method='permutation' keeps permutations"
    ]


def _exact_pvalues(tallies: SliceTallies, tests: Sequence[tuple], metrics: Sequence[str]) -> np.ndarray:
    """Exact p-values of every unweighted proportion metric of every test, shape (n_tests, n_metrics) (NaN
    for the other metrics): the slice against overall and the rest, or against another slice."""
    out = np.full((len(tests), len(metrics)), np.nan)
    columns = [q for q, metric in enumerate(metrics) if metric in PROPORTIONS]
    if not tests or not columns:
        return out
    m = np.array([t[0] for t in tests])
    s = np.array([t[1] for t in tests])
    other = np.array([-1 if t[2] is None else t[2] for t in tests])
    count = tallies.count
    for q in columns:
        num, den = PROPORTIONS[metrics[q]]
        x = count[m, s][:, list(num)].sum(axis=1)
        n_first = count[m, s][:, list(den)].sum(axis=1)
        universe = np.where(other[:, None] < 0, count[m, 0], count[m, s] + count[m, np.maximum(other, 0)])
        out[:, q] = exact_count_pvalue(
            x, n_first, universe[:, list(num)].sum(axis=1), universe[:, list(den)].sum(axis=1)
        )
    return out


def test_pvalues(
    comparisons: Sequence[Comparison],
    plan: SlicePlan,
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    weight: np.ndarray | None,
    model_names: Sequence[str],
    tallies: SliceTallies,
    estimates: AuditEstimates,
    *,
    metrics: Sequence[str],
    threshold: float,
    odds: float,
    n_permutations: int,
    seed: int,
    n_threads: int,
    units: Sequence[ModelUnits] | None = None,
    test_plan: ComparisonTests | None = None,
    progress: Callable[[int, int], None] | None = None,
    count: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """p-values of every comparison and metric (NaN for vs_model), and how each was computed.

    Parameters
    ----------
    estimates : AuditEstimates
        The audit's paired bootstrap: the point estimates of every slice and rest (the observed
        statistics) and their replicates (the large-sample test's standard errors).
    units : sequence of ModelUnits, optional
        :func:`model_units` (found here when not given, with ``count``).
    test_plan : ComparisonTests, optional
        :func:`plan_tests` (with ``test_method="auto"`` when not given).
    count : ndarray of shape (n_rows,), int64, optional
        Rows each row stands for (frequency weights): the exact tests read the tallies (counted in
        rows), and the Monte-Carlo tests permute the expanded rows (units with the summed counts,
        :func:`disaggregated_eval.engine.permutation.permutation_space`).

    Returns
    -------
    p : ndarray of shape (n_comparisons, n_metrics)
    test : ndarray of shape (n_comparisons, n_metrics), object
        :data:`EXACT`, :data:`MONTE_CARLO`, :data:`BOOTSTRAP_Z` or ``""`` (no test).

    Notes
    -----
    Seed path of a Monte-Carlo test: ``("audit", "permutation", model, design, slice[, other slice])``
    with ``design`` naming the conditioning class (e.g. ``"TN+FP"``, ``"all by label"``). Its universe is
    read from the model's units (:class:`ModelUnits`) and merged further into the units of its own design
    (rows equal in label, score, weight and stratum: the same units, multiplicities and draws as merging
    its rows); where the rows do not merge (continuous scores), or the design's units would be more than
    half its rows, the test permutes its rows in score order.
    """
    n_q = len(metrics)
    p = np.full((len(comparisons), n_q), np.nan)
    how = np.full((len(comparisons), n_q), "", dtype=object)
    if n_permutations == 0:
        return p, how
    w = np.ones(y.shape[0]) if weight is None else weight
    if units is None and test_plan is None and permutation_designs(metrics, weighted=weight is not None):
        units = model_units(plan, y, scores, weight, threshold, count=count)  # (no design: exact tests only)
    if test_plan is None:
        test_plan = plan_tests(comparisons, tallies, units, metrics=metrics, weighted=weight is not None,
                               n_permutations=n_permutations)  # fmt: skip
    point = estimates.point[np.maximum(estimates.slice_rows, 0)]  # (models, slices, 2, metrics)
    index = {(c.kind, c.model, c.slice, c.reference): k for k, c in enumerate(comparisons)}
    tests, designs, levels = test_plan.tests, test_plan.designs, test_plan.levels
    slots = {
        design: metric_slots([metrics[q] for q in qs]) for per_model in designs for design, qs in per_model.items()
    }
    orders: dict[int, np.ndarray] = {}
    cats: dict[int, np.ndarray] = {}
    overall_spaces: dict[tuple, object] = {}
    slice_cells: dict[int, np.ndarray] = {}

    def cells_of(s: int) -> np.ndarray:
        """Whether each cell belongs to slice ``s``, shape (n_cells,)."""
        if s not in slice_cells:
            slice_cells[s] = plan.cell_slices[:, plan.family_of[s]] == s
        return slice_cells[s]

    def row_space(m: int, design: tuple, rows: np.ndarray):
        """Permutation space of rows (original indices, in model m's score order) of a design."""
        cats_in, within = design
        if m not in cats:
            cats[m] = categories(y, scores[m], threshold)
        rows = rows[np.isin(cats[m][rows], cats_in)]
        if rows.size == 0:  # no row of the design (e.g. no predicted positive for precision): no test
            return rows, None
        if within == "label":
            strata = y[rows].astype(np.int64)
        elif within == "score":
            strata = score_bins(scores[m][rows], SCORE_STRATA, None if count is None else count[rows])[0]
        else:
            strata = None
        return rows, permutation_space(y[rows], scores[m][rows], w[rows], metrics=[metrics[q] for q in designs[m][design]],
                                       threshold=threshold, strata=strata,
                                       count=None if count is None else count[rows])  # fmt: skip

    def rows_of(m: int, member: np.ndarray | None) -> np.ndarray:
        if m not in orders:
            orders[m] = np.argsort(scores[m], kind="stable")
        return orders[m] if member is None else orders[m][member[orders[m]]]

    def unit_space(m: int, design: tuple, member: np.ndarray):
        """Permutation space of the units ``member`` (a mask over the model's units) of a design, or None
        when its units would be more than half its rows (the rows' own rule: they are permuted instead)."""
        u = units[m]
        cats_in, within = design
        member = member & np.isin(u.category, cats_in)
        yy, rr, ww, cc = u.y[member], u.score[member], u.weight[member], u.count[member]
        if within == "label":
            strata = yy.astype(np.int64)
        elif within == "score":
            strata = score_bins(rr, SCORE_STRATA, cc)[0]  # the bins of the expanded rows
        else:
            strata = None
        space = permutation_space(yy, rr, ww, metrics=[metrics[q] for q in designs[m][design]], threshold=threshold,
                                  strata=strata, count=cc)  # fmt: skip
        # with frequency weights the rows themselves are merged as these units are: no fallback to them
        if count is None and space.multiplicity.shape[0] > COMPRESSION_MAX_SHARE * space.size:
            return member, None
        return member, space

    def space_and_first(m: int, design: tuple, s: int, other: int | None):
        """The test's permutation space and the rows of its first side in each stratum (None: no test)."""
        u = units[m]
        if u.units is not None:
            if other is None:
                if (m, design) not in overall_spaces:
                    overall_spaces[(m, design)] = unit_space(m, design, np.ones(u.cell.shape[0], dtype=bool))
                member, universe = overall_spaces[(m, design)]
            else:
                member, universe = unit_space(m, design, (cells_of(s) | cells_of(other))[u.cell])
            if universe is not None:
                return universe, universe.first_counts(cells_of(s)[u.cell[member]])
        in_slice = plan.slice_mask(s)
        if other is None:
            if ("rows", m, design) not in overall_spaces:
                overall_spaces[("rows", m, design)] = row_space(m, design, rows_of(m, None))
            rows, universe = overall_spaces[("rows", m, design)]
        else:
            rows, universe = row_space(m, design, rows_of(m, in_slice | plan.slice_mask(other)))
        if universe is None:
            return None, None
        return universe, universe.first_counts(in_slice[rows])

    exact = _exact_pvalues(tallies, tests, metrics) if weight is None else None
    large: list[tuple[int, int]] = []  # (comparison row, metric) of the large-sample tests
    total = len(tests)
    if progress is not None:
        progress(0, total)
    for done, (m, s, other) in enumerate(tests, start=1):
        pairwise = other is not None
        keys = (
            [("pairwise", m, s, plan.names[other])]
            if pairwise
            else [("vs_overall", m, s, "overall"), ("vs_rest", m, s, "rest")]
        )
        rows_out = [index[key] for key in keys]
        counts = tallies.count[m].sum(axis=1)
        if counts[s] == 0 or (not pairwise and counts[s] == counts[0]) or (pairwise and counts[other] == 0):
            continue
        if exact is not None:
            for q, metric in enumerate(metrics):
                if metric in PROPORTIONS:
                    for k in rows_out:
                        p[k, q], how[k, q] = exact[done - 1, q], EXACT
        for design, qs in designs[m].items():
            method = test_plan.method.get((m, s, other, design))
            if method is None:
                continue
            if method == BOOTSTRAP_Z:
                large += [(k, q) for k in rows_out for q in qs]
                continue
            universe, n_first = space_and_first(m, design, s, other)
            if universe is None or (n_first == 0).all() or (n_first == universe.stratum_sizes()).all():
                continue
            if pairwise:
                observed = (point[m, s, 0, qs] - point[m, other, 0, qs])[None, :]
            else:
                observed = np.stack([point[m, s, 0, qs] - point[m, 0, 0, qs], point[m, s, 0, qs] - point[m, s, 1, qs]])
            path = ("audit", "permutation", model_names[m], _design_name(design), plan.names[s])
            path += (plan.names[other],) if pairwise else ()
            low = np.array([levels.get(key[0], 0.0) for key in keys])
            fixed = None if pairwise else point[m, 0, 0, qs]
            bounds = None
            if weight is None and (low > 0.0).any():  # the exact p-values of unweighted means: tail bounds
                bounds = linear_tail_pvalues(universe, n_first, observed, pairwise=pairwise, fixed=fixed,
                                             metrics=[metrics[q] for q in qs], threshold=threshold, odds=odds)  # fmt: skip
            values, used = permutation_test(
                universe,
                n_first,
                observed,
                pairwise=pairwise,
                fixed=fixed,
                slots=slots[design],
                odds=odds,
                n_permutations=n_permutations,
                seed=seeds.seed_sequence(seed, *path),
                n_threads=n_threads,
                low=low,
                bounds=bounds,
            )
            for i, k in enumerate(rows_out):
                p[k, qs] = values[i]
                how[k, qs] = np.where(np.isfinite(values[i]) & (used[i] == 0), TAIL_BOUND, MONTE_CARLO)
        if progress is not None:
            progress(done, total)
    if large:
        rows = np.array([k for k, _ in large], dtype=np.int64)
        columns = np.array([q for _, q in large], dtype=np.int64)
        log_scale = np.array([METRIC_REGISTRY[metrics[q]].test_scale == "log" for q in columns], dtype=bool)
        p[rows, columns] = _bootstrap_z(comparisons, estimates, rows, columns, log_scale)
        how[rows, columns] = BOOTSTRAP_Z
    return p, how


#: Values per chunk of the large-sample tests' bootstrap differences (resamples x tests).
_Z_CHUNK_VALUES = 2**21


def _log(values: np.ndarray, log_scale: np.ndarray) -> np.ndarray:
    """``values`` with the columns of ``log_scale`` (broadcast over the last axis) on the log scale (NaN at or
    below 0, where a ratio's logarithm is undefined)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        logged = np.log(np.where(values > 0.0, values, np.nan))
    return np.where(log_scale, logged, values)


def _bootstrap_z(
    comparisons: Sequence[Comparison],
    estimates: AuditEstimates,
    rows: np.ndarray,
    columns: np.ndarray,
    log_scale: np.ndarray | None = None,
) -> np.ndarray:
    """Large-sample p-values of the comparisons ``rows`` in metrics ``columns`` (pairs, shape (k,)): the
    paired bootstrap differences' z-test (:func:`disaggregated_eval.derived.bootstrap_z_pvalue`). Where
    ``log_scale`` (shape (k,)) is true the test is of ``log(a) - log(b)`` with the bootstrap's standard error
    of that log ratio (:attr:`~disaggregated_eval.registry.MetricRecord.test_scale`: the observed/expected
    ratio, issue 33; its level in the validity study's table b2)."""
    plus = np.array([estimates.slice_rows[comparisons[k].plus] for k in rows], dtype=np.int64)
    minus = np.array([estimates.slice_rows[comparisons[k].minus] for k in rows], dtype=np.int64)
    log_scale = np.zeros(rows.shape[0], dtype=bool) if log_scale is None else np.asarray(log_scale, dtype=bool)
    out = np.empty(rows.shape[0])
    chunk = max(1, _Z_CHUNK_VALUES // max(1, estimates.replicates.shape[0]))
    for start in range(0, rows.shape[0], chunk):
        part = slice(start, start + chunk)
        a, b, q, log = plus[part], minus[part], columns[part], log_scale[part]
        point = (_log(estimates.point[a, q], log), _log(estimates.point[b, q], log))
        replicates = (_log(estimates.replicates[:, a, q], log), _log(estimates.replicates[:, b, q], log))
        x = Replicated(point=point[0] - point[1], replicates=replicates[0] - replicates[1])
        out[part] = bootstrap_z_pvalue(x)
    return out


def _design_name(design: tuple) -> str:
    cats_in, within = design
    names = "+".join(("TN", "FP", "FN", "TP")[c] for c in cats_in) if len(cats_in) < 4 else "all"
    return names + (f" by {within}" if within else "")
