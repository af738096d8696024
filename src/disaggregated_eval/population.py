"""Population quantities of the simulations, computed from the DGP without sampling.

Two quantities of a simulation setting (:mod:`disaggregated_eval.simulate`) and a model score ``R``:

1. **The oracle** ``P(A = a | R = r)`` (paper Algorithm 1, control ``V = R``), built once per
   (setting, model) by :func:`score_oracle` and applied to any score vector:

   * a fitted model (:class:`~disaggregated_eval.outcome_models.OutcomeModels`; every model type is a
     histogram gradient boosting model of the single feature ``x``) is, in each group, a step
     function of ``x``: constant between consecutive bin thresholds of its bin mapper (a value
     equal to a threshold goes to the lower bin, as in scikit-learn's ``x <= threshold`` rule).
     :func:`step_score` evaluates the model once per interval; then
     ``P(A = a | R = r) = P(A = a, X in S_a(r)) / sum_b P(A = b, X in S_b(r))`` with ``S_a(r)`` the
     union of the intervals that group ``a``'s step function maps to ``r`` (exact float
     equality), each mass from normal CDFs (:meth:`~disaggregated_eval.simulate.DGP.mass_xa`).
     For ``x`` both groups share one step function; for ``xa`` (``A`` a categorical feature) and
     ``xa_stratified`` (one model per group) each group has its own, and a score value taken by
     one group only has ``P(A | R) = 0`` or ``1``.
   * a Bayes-optimal score (``bayes_x = E[Y | X, S = 1]``, ``bayes_xa = E[Y | X, A, S = 1]`` of
     the training population, :func:`~disaggregated_eval.simulate.bayes_scores`) is smooth in
     ``x``: ``P(A = a | R = r) = P(a) f_R(r | a) / sum_b P(b) f_R(r | b)`` with the change of
     variables ``P(a) f_R(r | a) = sum_i f(x_i, a) / |q_a'(x_i)|`` over the preimages ``x_i`` of
     ``q = logit(r)`` under group ``a``'s logit score ``q_a``
     (:meth:`~disaggregated_eval.simulate.DGP.bayes_logit`, analytic derivative). Preimages are
     found on a fine grid split into monotone pieces between the local extrema of ``q_a`` and
     refined by safeguarded Newton steps (:class:`SmoothScoreOracle`).

   ``f(x, a)`` is always the *full* population (the test data), also for the selection settings.
   :func:`oracle_weights` assembles the oracle weights of a test set for every control: the
   closed-form ``P(A | X)``, ``P(A | Y)`` of the DGP and one ``P(A | R)`` block per score.

2. **Population metrics** (:func:`population_controlled_differences`): for each group ``a``, the
   subgroup metric, the weighted population metric ``M_a`` (the population reweighted by the
   oracle ``P(A = a | V)``, ``V`` in {none, X, Y, R}) and the controlled difference
   ``T_a = subgroup metric - M_a`` (paper section 4.2, Algorithm 1), for the metrics of
   :func:`disaggregated_eval.metrics.compute_metrics` with the same definitions. The population
   is represented by weighted pseudo-rows (:func:`population_rows`): Gauss-Legendre nodes
   ``x_j`` on cells between breakpoints, one row per node, group and label, with mass
   ``f(x_j, a, y) w_j``. ``compute_metrics(y, r, sample_weight=mass * weight)`` evaluates every
   metric on them; for a continuous score the AUC is instead integrated through the CDF of the
   negatives' scores (:meth:`PopulationRows.metrics`), because comparing nearby pseudo-rows
   pairwise errs by about one cell's mass per pair of cells with overlapping scores (~1e-5).
   The breakpoints are where an integrand is not smooth: the bin thresholds of a fitted model,
   the points where a Bayes score crosses the classification threshold, the critical points of a
   Bayes score and the preimages of its critical values (where ``P(A | R)`` has square-root
   singularities). Within a cell every integrand is smooth and the quadrature converges fast:
   at the defaults (cells of width <= 0.05, 8 nodes) refining to width 0.0125 and 12 nodes
   changes no metric by more than about 1e-11 (checked to 1e-9 in ``tests/test_population.py``,
   which also compares the result with a 10^7-row Monte Carlo). The ``x`` range is the outermost
   means of ``X | A`` plus and minus 10 (mass outside below 1e-22).

See ``docs/design.md`` (library API) for how the coverage study uses these objects.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from . import simulate, vocabulary
from .metrics import compute_metrics
from .outcome_models import OutcomeModels
from .validation import check_binary_codes, check_choice, check_columns, check_int, check_scores
from .weight_table import concat_weight_tables, weight_table

__all__ = [
    "StepScore",
    "step_score",
    "ScoreOracle",
    "StepScoreOracle",
    "SmoothScoreOracle",
    "score_oracle",
    "oracle_weights",
    "PopulationRows",
    "population_rows",
    "population_controlled_differences",
    "RESULT_COLUMNS",
    "group_prior_keep",
    "shift_group_proba",
    "sample_with_group_prior",
]

#: Columns of :func:`population_controlled_differences`.
RESULT_COLUMNS: tuple[str, ...] = (
    "dataset",
    "model",
    "control",
    "group",
    "metric",
    "subgroup_metric",
    "weighted_population_metric",
    "controlled_difference",
)

_EPS = float(np.finfo(np.float64).eps)
#: Half-width (in units of the unit standard deviation) of the ``x`` range around the outermost
#: mixture means of ``X | A``: the population mass outside is below ``2 Phi(-12) ~ 4e-33``.
ORACLE_HALF_WIDTH = 12.0
#: Grid step of the preimage search of :class:`SmoothScoreOracle`.
ORACLE_GRID_STEP = 2e-3
#: Most safeguarded Newton steps after the Hermite start of a preimage. From the Hermite start
#: (error of order ``step^4``) Newton needs at most one step away from extrema; bisection
#: (the fallback near an extremum, where the derivative vanishes) halves a 2e-3 bracket 50 times.
MAX_NEWTON_STEPS = 50


def _x_range(dgp: simulate.DGP, half_width: float) -> tuple[float, float]:
    means = [mean for components in dgp.x_mixture() for _, mean in components]
    return min(means) - half_width, max(means) + half_width


# ----------------------------------------------------------------------------------------------
# Score functions of x
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepScore:
    """A score that is, in each group, a step function of ``x``.

    Group ``a`` scores ``x`` with ``values[a][k]`` on the interval ``(thresholds[a][k-1],
    thresholds[a][k]]`` (``k = 0 .. m_a``, with ``thresholds[a][-1] = -inf`` and
    ``thresholds[a][m_a] = inf``).

    Attributes
    ----------
    thresholds : tuple of 2 ndarray of shape (m_a,)
        Increasing bin thresholds of each group's step function.
    values : tuple of 2 ndarray of shape (m_a + 1,)
        The score on each interval.
    """

    thresholds: tuple[np.ndarray, np.ndarray]
    values: tuple[np.ndarray, np.ndarray]

    def __call__(self, x: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Scores of rows ``(x, a)``, shape (n,); ``x == threshold`` takes the lower interval."""
        x = np.asarray(x, dtype=np.float64)
        a = np.asarray(a)
        out = np.empty(x.shape[0], dtype=np.float64)
        for g in (0, 1):
            rows = a == g
            out[rows] = self.values[g][np.searchsorted(self.thresholds[g], x[rows], side="left")]
        return out

    def intervals(self, a: int) -> tuple[np.ndarray, np.ndarray]:
        """``(lo, hi)`` of group ``a``'s intervals ``(lo_k, hi_k]``, each of shape (m_a + 1,)."""
        t = self.thresholds[a]
        return np.concatenate(([-np.inf], t)), np.concatenate((t, [np.inf]))


def _representatives(thresholds: np.ndarray) -> np.ndarray:
    """One point of each interval of :class:`StepScore`: its right end ``t_k`` (which belongs to
    it, ``x <= t_k``; exact even for thresholds one float apart), and ``t_last + 1`` for the last."""
    if thresholds.size == 0:
        return np.array([0.0])
    return np.concatenate((thresholds, [thresholds[-1] + max(1.0, abs(float(thresholds[-1])))]))


def _numeric_thresholds(estimator, model: str) -> np.ndarray:
    """Bin thresholds of the one numeric feature of a fitted HistGradientBoostingClassifier.

    The bin mapper may order the features differently from the fitted columns (with pandas input
    and categorical features, scikit-learn encodes the categorical columns first), so the numeric
    feature is found by its flag in ``_bin_mapper.is_categorical``.
    """
    mapper = estimator._bin_mapper
    flags = mapper.is_categorical
    categorical = np.zeros(len(mapper.bin_thresholds_), dtype=bool) if flags is None else np.asarray(flags, dtype=bool)
    numeric = np.flatnonzero(~categorical)
    if numeric.size != 1:
        raise ValueError(f"model {model!r} must have exactly one numeric feature; its bin mapper has {numeric.size}")
    return np.asarray(mapper.bin_thresholds_[int(numeric[0])], dtype=np.float64)


def step_score(fitted: OutcomeModels, model: str) -> StepScore:
    """The step function of ``x`` that a fitted outcome model is, per group.

    A :class:`~sklearn.ensemble.HistGradientBoostingClassifier` compares a numeric feature only
    with its bin thresholds (``estimator._bin_mapper.bin_thresholds_``; a tree sends ``x <=
    threshold`` left), so on a single numeric feature ``x`` it is constant on every interval
    between consecutive thresholds. Each interval is scored once with
    :meth:`OutcomeModels.predict` (so the values are exactly the pipeline's scores).

    Parameters
    ----------
    fitted : OutcomeModels
        Fitted on the single numeric feature ``x`` (as in every simulation), groups 0 and 1.
    model : {"x", "xa", "xa_stratified"}

    Returns
    -------
    StepScore

    Raises
    ------
    ValueError
        If ``model`` is not a fitted model type or ``fitted`` is not a model of one numeric
        feature with groups 0 and 1.
    TypeError
        If ``fitted`` is not an :class:`OutcomeModels`.
    """
    check_choice(model, "model", vocabulary.MODEL_TYPES)
    if not isinstance(fitted, OutcomeModels):
        raise TypeError(f"fitted must be an OutcomeModels; got {type(fitted).__name__}")
    if len(fitted.features) != 1 or fitted.categorical:
        raise ValueError(
            f"the oracle P(A | R) of a fitted model needs models of one numeric feature; got features "
            f"{list(fitted.features)} (categorical {list(fitted.categorical)})"
        )
    if fitted.groups != (0, 1):
        raise ValueError(f"fitted must have xa_stratified models for groups 0 and 1; got {list(fitted.groups)}")
    feature = fitted.features[0]
    if model == "xa_stratified":
        estimators = (fitted.xa_stratified[0], fitted.xa_stratified[1])
    else:
        estimators = (getattr(fitted, model),) * 2
    thresholds, values = [], []
    for a, estimator in enumerate(estimators):
        t = _numeric_thresholds(estimator, model)
        reps = _representatives(t)
        frame = pd.DataFrame({feature: reps, fitted.group: np.full(reps.size, a, dtype=np.int64)})
        thresholds.append(t)
        with threadpool_limits(limits=1, user_api="openmp"):  # a few hundred rows: threads only cost
            values.append(fitted.predict(frame)[model].to_numpy(dtype=np.float64))
    return StepScore(thresholds=(thresholds[0], thresholds[1]), values=(values[0], values[1]))


# ----------------------------------------------------------------------------------------------
# The oracle P(A = a | R = r)
# ----------------------------------------------------------------------------------------------


class ScoreOracle:
    """``P(A = a | R = r)`` of one model's score ``R`` in the population of one setting.

    Built by :func:`score_oracle`; call it on a score vector. Subclasses:
    :class:`StepScoreOracle` (fitted models) and :class:`SmoothScoreOracle` (Bayes-optimal scores).
    """

    setting_id: str
    model: str

    def __call__(self, scores: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        """``P(A = a | R = scores[i])``.

        Parameters
        ----------
        scores : array-like of shape (n,)
            Scores of the model, in [0, 1].

        Returns
        -------
        ndarray of shape (n, 2)
            Column ``a`` holds ``P(A = a | R = r)``; rows sum to 1.

        Raises
        ------
        ValueError
            If a score is outside [0, 1] or is not a value the model produces (no preimage).
        """
        raise NotImplementedError


class StepScoreOracle(ScoreOracle):
    """Exact ``P(A | R)`` of a score that is a step function of ``x`` in each group.

    ``P(R = v, A = a)`` is the population mass of group ``a`` on the intervals its step function
    maps to ``v`` (:meth:`~disaggregated_eval.simulate.DGP.mass_xa`, normal CDFs); scores are
    matched to the values by exact float equality.

    Parameters
    ----------
    setting_id : str
    model : str
        Name used in messages (a fitted model type).
    step : StepScore
        The score (:func:`step_score` for a fitted model).

    Attributes
    ----------
    values : ndarray of shape (m,)
        The distinct score values, increasing.
    joint : ndarray of shape (m, 2)
        ``P(R = values[j], A = a)`` in the population (sums to 1).
    proba : ndarray of shape (m, 2)
        ``P(A = a | R = values[j])``.
    """

    def __init__(self, setting_id: str, model: str, step: StepScore) -> None:
        dgp = simulate.get_dgp(setting_id)
        self.setting_id, self.model, self.step = setting_id, model, step
        values, groups, masses = [], [], []
        for a in (0, 1):
            lo, hi = step.intervals(a)
            values.append(step.values[a])
            groups.append(np.full(lo.size, a))
            masses.append(dgp.mass_xa(lo, hi)[:, a])
        self.values, inverse = np.unique(np.concatenate(values), return_inverse=True)
        self.joint = np.zeros((self.values.size, 2))
        np.add.at(self.joint, (inverse, np.concatenate(groups)), np.concatenate(masses))
        total = self.joint.sum(axis=1)
        if not (total > 0).all():  # an interval of a normal mixture always has positive mass
            raise ValueError(f"score values {self.values[total <= 0][:5]} of model {model!r} have no population mass")
        self.proba = self.joint / total[:, None]

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        r = check_scores(scores, name="scores")
        index = np.minimum(np.searchsorted(self.values, r), self.values.size - 1)
        unknown = self.values[index] != r
        if unknown.any():
            row = int(np.flatnonzero(unknown)[0])
            raise ValueError(
                f"scores[{row}] = {float(r[row])!r} is not a value of the fitted model {self.model!r} "
                f"({self.values.size} distinct values, {int(unknown.sum())} unknown scores); "
                f"were the scores predicted by this model?"
            )
        return self.proba[index]


@dataclass
class _Piece:
    """A monotone piece of a group's logit score on the grid.

    ``sign * logit`` is increasing along the nodes ``x``: ``q`` holds it and ``slope`` its
    derivative (``sign * d logit / dx >= 0``).
    """

    column: int  # column of DGP.bayes_logit: the group whose score function this is
    groups: tuple[int, ...]  # groups scored by this function (both for bayes_x)
    x: np.ndarray
    q: np.ndarray
    slope: np.ndarray
    sign: float


@dataclass
class _Preimage:
    """Preimages on one piece of the queries marked ``inside``, with the terms of the change of variables."""

    piece: _Piece
    inside: np.ndarray  # bool (n_queries,)
    x: np.ndarray  # (inside.sum(),)
    slope: np.ndarray  # d logit / dx at x
    log_density: np.ndarray  # (inside.sum(), 2): log f(x, a)


def _turning_nodes(q: np.ndarray) -> np.ndarray:
    """Indices of the grid nodes where the grid values ``q`` turn from rising to falling or back."""
    step_sign = np.sign(np.diff(q))
    for k in range(1, step_sign.size):  # a flat step (no change in float) continues the step before it
        if step_sign[k] == 0:
            step_sign[k] = step_sign[k - 1]
    return np.flatnonzero(step_sign[1:] * step_sign[:-1] < 0) + 1


class SmoothScoreOracle(ScoreOracle):
    """``P(A | R)`` of a Bayes-optimal score by a change of variables over the preimages of ``r``.

    ``P(A = a | R = r) = sum_i f(x_i, a) / |q'(x_i)| / sum_{b, i} f(x_i, b) / |q'(x_i)|``, the sum
    over the preimages ``x_i`` of ``logit(r)`` under the logit score ``q`` of group ``a`` (for
    ``bayes_x`` one function for both groups). The logit score is split, on a grid of step
    ``grid_step``, into monotone pieces between its local extrema (refined by bisection on the
    sign of the analytic derivative). On a piece, a preimage starts from the cubic Hermite
    interpolant of the inverse function (error of order ``grid_step^4``) and is refined by
    safeguarded Newton steps until the logit residual is below ``1e-11 (1 + |logit r|)``; the
    density and the derivative are then evaluated exactly at it.

    Parameters
    ----------
    setting_id : str
    model : {"bayes_x", "bayes_xa"}
    grid_step : float, default 2e-3
    half_width : float, default 12
        The grid spans the outermost means of ``X | A`` plus and minus ``half_width``.

    Attributes
    ----------
    critical_points : ndarray
        ``x`` where a group's logit score has a local extremum; ``critical_values`` their logits.
    """

    def __init__(
        self,
        setting_id: str,
        model: str,
        *,
        grid_step: float = ORACLE_GRID_STEP,
        half_width: float = ORACLE_HALF_WIDTH,
    ) -> None:
        check_choice(model, "model", vocabulary.BAYES_MODELS)
        self.setting_id, self.model = setting_id, model
        self.dgp = simulate.get_dgp(setting_id)
        lo, hi = _x_range(self.dgp, half_width)
        self.x_range = (lo, hi)
        grid = np.linspace(lo, hi, math.ceil((hi - lo) / grid_step) + 1)
        value, _ = self.dgp.bayes_logit(grid, model)
        functions = [(0, (0, 1))] if model == "bayes_x" else [(0, (0,)), (1, (1,))]
        self.pieces: list[_Piece] = []
        critical: list[tuple[float, int]] = []  # (x, column) of every local extremum
        for column, groups in functions:
            extrema = [
                self._refine_extremum(grid[k - 1], grid[k + 1], column) for k in _turning_nodes(value[:, column])
            ]
            edges = [lo, *extrema, hi]
            for left, right in itertools.pairwise(edges):
                # the piece runs exactly from one extremum to the next, so its range is the full range
                xs = np.concatenate(([left], grid[(grid > left) & (grid < right)], [right]))
                qs, slopes = self._logit(xs, column)
                sign = 1.0 if qs[-1] >= qs[0] else -1.0
                self.pieces.append(_Piece(column, groups, xs, sign * qs, np.maximum(sign * slopes, 0.0), sign))
            critical.extend((x, column) for x in extrema)
        self.critical_points = np.array([x for x, _ in critical], dtype=np.float64)
        self.critical_values = np.array(
            [self._logit(np.array([x]), column)[0][0] for x, column in critical], dtype=np.float64
        )

    def _logit(self, x: np.ndarray, column: int) -> tuple[np.ndarray, np.ndarray]:
        value, slope = self.dgp.bayes_logit(x, self.model)
        return value[:, column], slope[:, column]

    def _refine_extremum(self, left: float, right: float, column: int) -> float:
        """Bisection on the sign of the derivative: the local extremum of the logit score in ``[left, right]``."""
        s_left = np.sign(self._logit(np.array([left]), column)[1][0])
        for _ in range(60):
            mid = 0.5 * (left + right)
            if np.sign(self._logit(np.array([mid]), column)[1][0]) == s_left:
                left = mid
            else:
                right = mid
        return 0.5 * (left + right)

    def _solve(self, piece: _Piece, t: np.ndarray) -> _Preimage:
        """Preimages on ``piece`` of oriented targets ``t`` (all within the piece's range)."""
        k = np.clip(np.searchsorted(piece.q, t) - 1, 0, piece.q.size - 2)
        xl, xr, ql, qr = piece.x[k], piece.x[k + 1], piece.q[k], piece.q[k + 1]
        ml, mr = piece.slope[k], piece.slope[k + 1]
        h = qr - ql
        u = np.clip(np.divide(t - ql, h, out=np.full(t.shape, 0.5), where=h > 0), 0.0, 1.0)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # cubic Hermite interpolant of the inverse x(q), tangents dx/dq = 1 / slope
            hermite = (
                (2 * u**3 - 3 * u**2 + 1) * xl
                + (u**3 - 2 * u**2 + u) * h / ml
                + (-2 * u**3 + 3 * u**2) * xr
                + (u**3 - u**2) * h / mr
            )
        usable = (ml > 0) & (mr > 0) & np.isfinite(hermite) & (hermite >= xl) & (hermite <= xr)
        x = np.where(usable, hermite, xl + u * (xr - xl))
        value, slope, log_density = self.dgp.bayes_logit(x, self.model, with_density=True)
        value, slope = value[:, piece.column], slope[:, piece.column]
        tolerance = 1e-11 * (1.0 + np.abs(t))
        lo, hi = xl.copy(), xr.copy()  # bracket of the root (the oriented score is increasing)
        for _ in range(MAX_NEWTON_STEPS):  # safeguarded Newton, only where still needed
            residual = piece.sign * value - t
            todo = np.flatnonzero(np.abs(residual) > tolerance)
            if todo.size == 0:
                break
            res, xt = residual[todo], x[todo]
            above = res > 0
            hi[todo] = np.where(above, xt, hi[todo])
            lo[todo] = np.where(above, lo[todo], xt)
            oriented = piece.sign * slope[todo]
            newton = xt - np.divide(res, oriented, out=np.zeros(todo.size), where=oriented > 0)
            inside = (oriented > 0) & (newton > lo[todo]) & (newton < hi[todo])
            x[todo] = np.where(inside, newton, 0.5 * (lo[todo] + hi[todo]))  # else bisect
            v, d, f = self.dgp.bayes_logit(x[todo], self.model, with_density=True)
            value[todo], slope[todo], log_density[todo] = v[:, piece.column], d[:, piece.column], f
        return _Preimage(piece, np.empty(0, dtype=bool), x, slope, log_density)

    def preimages(self, q: np.ndarray) -> list[_Preimage]:
        """Preimages of logit scores ``q`` (shape (n,)) on every monotone piece.

        Returns
        -------
        list of _Preimage
            Per piece: ``inside`` (bool, shape (n,)) marks the queries in the piece's range; ``x``,
            ``slope`` (shape (m,)) and ``log_density`` (shape (m, 2)) hold their preimages, the
            derivative of the logit score there and ``log f(x, a)``.
        """
        q = np.asarray(q, dtype=np.float64)
        out = []
        for piece in self.pieces:
            target = piece.sign * q
            # admit queries just outside a piece's range by rounding: logit(r) of a float r is
            # uncertain by about eps / min(r, 1 - r) = eps (1 + exp|q|)
            slack = 1e-12 * (1.0 + np.abs(target)) + 8 * _EPS * (1.0 + np.exp(np.minimum(np.abs(target), 700.0)))
            inside = np.isfinite(target) & (target >= piece.q[0] - slack) & (target <= piece.q[-1] + slack)
            found = self._solve(piece, np.clip(target[inside], piece.q[0], piece.q[-1]))
            found.inside = inside
            out.append(found)
        return out

    def __call__(self, scores: np.ndarray) -> np.ndarray:
        r = check_scores(scores, name="scores")
        with np.errstate(divide="ignore"):
            q = np.log(r) - np.log1p(-r)
        log_joint = np.full((r.shape[0], 2), -np.inf)  # log P(a) f_R(r | a), up to the common 1/r(1-r)
        for found in self.preimages(q):
            log_jacobian = np.log(np.maximum(np.abs(found.slope), np.finfo(np.float64).tiny))
            for a in found.piece.groups:
                log_joint[found.inside, a] = np.logaddexp(
                    log_joint[found.inside, a], found.log_density[:, a] - log_jacobian
                )
        total = np.logaddexp(log_joint[:, 0], log_joint[:, 1])
        missing = ~np.isfinite(total)
        if missing.any():
            row = int(np.flatnonzero(missing)[0])
            raise ValueError(
                f"scores[{row}] = {float(r[row])!r} is not a value of {self.model!r} for x in "
                f"[{self.x_range[0]:g}, {self.x_range[1]:g}] ({int(missing.sum())} such scores); "
                f"were the scores computed with simulate.bayes_scores for setting {self.setting_id!r}?"
            )
        return np.exp(log_joint - total[:, None])


def score_oracle(setting_id: str, model: str, *, fitted: OutcomeModels | None = None) -> ScoreOracle:
    """Build the oracle ``P(A = a | R = r)`` of one model in one simulation setting (paper Algorithm 1).

    Build it once and call it on every score vector of the model (e.g. on many test sets).

    Parameters
    ----------
    setting_id : str
        A simulation setting (:data:`disaggregated_eval.simulate.SETTINGS`).
    model : str
        ``x``, ``xa``, ``xa_stratified`` (needs ``fitted``) or ``bayes_x``, ``bayes_xa``.
    fitted : OutcomeModels, optional
        The fitted outcome models of the setting.

    Returns
    -------
    ScoreOracle
        :class:`StepScoreOracle` for fitted models, :class:`SmoothScoreOracle` for Bayes scores;
        ``oracle(scores)`` has shape (n, 2).

    Raises
    ------
    ValueError
        If the setting or model is unknown, or a fitted model type is given without ``fitted``.
    """
    simulate.get_dgp(setting_id)
    check_choice(model, "model", vocabulary.SIMULATION_MODELS)
    if model in vocabulary.BAYES_MODELS:
        return SmoothScoreOracle(setting_id, model)
    if fitted is None:
        raise ValueError(f"fitted (the OutcomeModels) is needed for the oracle P(A | R) of model {model!r}")
    return StepScoreOracle(setting_id, model, step_score(fitted, model))


def oracle_weights(
    setting_id: str,
    test: pd.DataFrame,
    *,
    test_scores: Mapping[str, np.ndarray],
    fitted: OutcomeModels | None = None,
    oracles: Mapping[str, ScoreOracle] | None = None,
) -> pd.DataFrame:
    """Oracle weights ``P(A = a | V)`` of the test rows (paper Algorithm 1).

    * ``V = X``: the DGP's ``p_a_given_x`` (closed form), model ``"*"``.
    * ``V = Y``: the DGP's ``p_a_given_y`` (closed form), model ``"*"``.
    * ``V = R``, one block per model in ``test_scores``: ``P(A = a | R = r)`` computed from the
      DGP without sampling or binning (:func:`score_oracle`): for a
      fitted model (a step function of ``x`` in each group) the population mass of each group on
      the ``x`` intervals mapped to the score value ``r``; for a Bayes-optimal score, the change
      of variables ``x -> r`` over the preimages of ``r``.

    All weights refer to the full (test) population, also for the selection settings.

    Parameters
    ----------
    setting_id : str
    test : pandas.DataFrame of shape (n_test, >= 3)
        The test set, columns ``x``, ``a``, ``y``; its row order defines ``row``.
    test_scores : mapping of str to ndarray of shape (n_test,)
        Scores of each model on ``test``: keys among ``x``, ``xa``, ``xa_stratified`` (predicted by
        ``fitted``) and ``bayes_x``, ``bayes_xa`` (:func:`~disaggregated_eval.simulate.bayes_scores`).
        Block order follows it.
    fitted : OutcomeModels, optional
        The fitted outcome models; needed for the fitted model types (unless ``oracles`` has them).
    oracles : mapping of str to ScoreOracle, optional
        Prebuilt :func:`score_oracle` objects to reuse (e.g. across
        many test sets of one setting); models not in it are built here.

    Returns
    -------
    pandas.DataFrame of shape ((2 + len(test_scores)) * n_test, 6)
        Long weight table (:func:`disaggregated_eval.weight_table.weight_table`):
        ``weight_source`` (``"oracle"``), ``control`` (``X``, ``Y``, ``R``), ``model`` (``"*"`` for
        X and Y), ``row`` (int64), ``p_0``, ``p_1`` (float64, rows sum to 1).

    Raises
    ------
    ValueError
        If ``setting_id`` is unknown, a column is missing, ``a`` or ``y`` is not 0/1, a model name
        is unknown, a score array has the wrong length or values outside [0, 1], a fitted model
        type is given without ``fitted``, or a score is not a value the model produces.
    """
    dgp = simulate.get_dgp(setting_id)
    check_columns(test, ("x", "a", "y"), "test")
    n_test = len(test)
    x = test["x"].to_numpy(dtype=np.float64)
    y = check_binary_codes(test["y"].to_numpy(), "test['y']")
    check_binary_codes(test["a"].to_numpy(), "test['a']")
    oracles = dict(oracles or {})
    checked: dict[str, np.ndarray] = {}
    for model, scores in test_scores.items():
        check_choice(model, "model (a key of test_scores)", vocabulary.SIMULATION_MODELS)
        checked[model] = check_scores(scores, n_test, f"test_scores[{model!r}]")
        if model in vocabulary.MODEL_TYPES and fitted is None and model not in oracles:
            raise ValueError(f"fitted (the OutcomeModels) is needed for the oracle P(A | R) of model {model!r}")
    blocks = [
        weight_table(dgp.p_a_given_x(x), weight_source="oracle", control="X"),
        weight_table(dgp.p_a_given_y(y), weight_source="oracle", control="Y"),
    ]
    for model, scores in checked.items():
        oracle = oracles.get(model) or score_oracle(setting_id, model, fitted=fitted)
        blocks.append(weight_table(oracle(scores), weight_source="oracle", control="R", model=model))
    return concat_weight_tables(blocks)


# ----------------------------------------------------------------------------------------------
# Population pseudo-rows and metrics
# ----------------------------------------------------------------------------------------------


def _gauss_legendre(breaks: np.ndarray, cell_width: float, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Left edges and widths of the cells: every segment between ``breaks`` split into equal
    cells no wider than ``cell_width`` (the cells tile ``[breaks[0], breaks[-1]]``)."""
    lo, hi = breaks[:-1], breaks[1:]
    n_cells = np.maximum(np.ceil((hi - lo) / cell_width).astype(np.int64), 1)
    segment = np.repeat(np.arange(lo.size), n_cells)
    k = np.arange(segment.size) - np.repeat(np.cumsum(n_cells) - n_cells, n_cells)
    width = (hi - lo)[segment] / n_cells[segment]
    return lo[segment] + k * width, width


def _breakpoints(
    score: StepScore | SmoothScoreOracle, a: int, lo: float, hi: float, threshold: float, extra: np.ndarray
) -> np.ndarray:
    """Where group ``a``'s integrands may fail to be smooth (see the module docstring), plus the
    preimages of the scores ``extra``."""
    points = [np.array([lo, hi])]
    if isinstance(score, StepScore):
        points.append(score.thresholds[a])
    else:
        cuts = np.concatenate(([threshold], extra))
        targets = np.concatenate((np.log(cuts) - np.log1p(-cuts), score.critical_values))
        for found in score.preimages(targets):
            if a in found.piece.groups:
                points.append(found.x)
        points.append(score.critical_points)
    breaks = np.unique(np.concatenate(points))
    return breaks[(breaks >= lo) & (breaks <= hi)]


class _ContinuousAUC:
    """AUC of a continuous (Bayes-optimal) score on the population, by integrating the negatives' CDF.

    For a score without ties, ``AUC = integral f_+(x) G_-(r(x)) dx / (W_+ W_-)`` with
    ``G_-(t)`` the (weighted) mass of negatives whose score is below ``t`` -- the definition of
    :func:`~disaggregated_eval.metrics.compute_metrics` (ties have probability 0). The outer
    integral is the Gauss-Legendre sum over the positive pseudo-rows; ``G_-`` is exact up to the
    quadrature: on each monotone piece of a group's score, the negatives below ``t`` fill the
    interval between the piece's end and the preimage of ``t``, and the mass of an interval
    ``[x_lo, x]`` is the integral of the Gauss-Legendre interpolating polynomial of the weighted
    negative density on each cell (spectrally accurate, like the nodes themselves). Comparing the
    pseudo-rows pairwise instead (as ``compute_metrics`` on them would) makes an error of the
    order of one cell's mass for every pair of cells with overlapping scores, about 1e-5 here.
    """

    def __init__(self, rows: PopulationRows, oracle: SmoothScoreOracle) -> None:
        self.rows = rows
        positives = np.flatnonzero(rows.y == 1)
        self.positives = positives
        r = rows.score[positives]
        q = np.log(r) - np.log1p(-r)
        lo, hi = rows.x_range
        points: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = [[], []]  # per group: (query, x, sign)
        for found in oracle.preimages(q):
            piece, inside, x_t = found.piece, found.inside, found.x
            target = piece.sign * q
            x_lo, x_hi = np.clip(piece.x[0], lo, hi), np.clip(piece.x[-1], lo, hi)
            whole = target < piece.q[0] if piece.sign < 0 else target > piece.q[-1]
            queries = np.flatnonzero(inside)
            x_t = np.clip(x_t, lo, hi)
            for a in piece.groups:
                full = np.flatnonzero(whole)
                points[a].append((full, np.full(full.size, x_hi), np.ones(full.size)))
                points[a].append((full, np.full(full.size, x_lo), -np.ones(full.size)))
                if piece.sign > 0:  # negatives below t: [x_lo, x_t]
                    points[a].append((queries, x_t, np.ones(queries.size)))
                    points[a].append((queries, np.full(queries.size, x_lo), -np.ones(queries.size)))
                else:  # [x_t, x_hi]
                    points[a].append((queries, np.full(queries.size, x_hi), np.ones(queries.size)))
                    points[a].append((queries, x_t, -np.ones(queries.size)))
        n = rows.n_nodes
        self.terms = []
        for a in (0, 1):
            if not points[a]:
                self.terms.append(None)
                continue
            query = np.concatenate([p[0] for p in points[a]])
            x = np.concatenate([p[1] for p in points[a]])
            sign = np.concatenate([p[2] for p in points[a]])
            left, width = rows.cells[a]
            cell = np.clip(np.searchsorted(left, x, side="right") - 1, 0, left.size - 1)
            s = np.clip(2.0 * (x - left[cell]) / width[cell] - 1.0, -1.0, 1.0)
            self.terms.append((query, cell, sign, _partial_integral_weights(s, n)))

    def __call__(self, weight: np.ndarray) -> float:
        """AUC with pseudo-row weights ``weight`` (the masses times ``P(A = a | V)`` or a group mask)."""
        rows = self.rows
        w_pos = weight[self.positives]
        total_pos = float(w_pos.sum())
        total_neg = float(weight[rows.y == 0].sum())
        if total_pos == 0.0 or total_neg == 0.0:
            return float("nan")
        below = np.zeros(self.positives.size)
        for a in (0, 1):
            if self.terms[a] is None:
                continue
            query, cell, sign, partial = self.terms[a]
            nu = weight[rows.block(a, 0)].reshape(-1, rows.n_nodes)  # (cells, nodes) weighted negatives
            before = np.cumsum(nu.sum(axis=1)) - nu.sum(axis=1)
            cumulative = before[cell] + np.einsum("ij,ij->i", nu[cell], partial)
            below += np.bincount(query, weights=sign * cumulative, minlength=self.positives.size)
        return float(np.dot(w_pos, below) / (total_pos * total_neg))


def _partial_integral_weights(s: np.ndarray, n_nodes: int) -> np.ndarray:
    """``W[i, k]``: share of node ``k``'s weight in the integral over ``[-1, s_i]`` of the cell.

    With Gauss-Legendre nodes ``t_k`` and weights ``w_k``, the interpolating polynomial of values
    ``v_k`` integrates over ``[-1, s]`` to ``sum_k w_k v_k W_k(s)`` where
    ``W_k(s) = (s + 1)/2 + sum_{j=1}^{n-1} P_j(t_k) (P_{j+1}(s) - P_{j-1}(s)) / 2`` (discrete
    orthogonality of the Legendre polynomials ``P_j`` at the nodes and
    ``integral_{-1}^{s} P_j = (P_{j+1}(s) - P_{j-1}(s)) / (2j + 1)``). ``W_k(-1) = 0``, ``W_k(1) = 1``.
    """
    t, _ = np.polynomial.legendre.leggauss(n_nodes)
    at_nodes = np.polynomial.legendre.legvander(t, n_nodes - 1)  # (k, j): P_j(t_k)
    at_s = np.polynomial.legendre.legvander(s, n_nodes)  # (i, j): P_j(s_i), j = 0..n
    out = np.repeat(((s + 1.0) / 2.0)[:, None], n_nodes, axis=1)
    if n_nodes > 1:
        integrals = (at_s[:, 2:] - at_s[:, :-2]) / 2.0  # (i, j - 1) for j = 1..n-1
        out += integrals @ at_nodes[:, 1:].T
    return out


@dataclass(frozen=True)
class PopulationRows:
    """The population of a setting as weighted pseudo-rows (quadrature nodes).

    Pseudo-rows come in four blocks, ``(a, y) = (0, 0), (0, 1), (1, 0), (1, 1)``; within a block,
    the Gauss-Legendre nodes of group ``a``'s cells, cell by cell (:meth:`block`).

    Attributes
    ----------
    x : ndarray of shape (n,)
        Quadrature nodes.
    a, y : ndarray of shape (n,), int64
        Group and label of each pseudo-row.
    score : ndarray of shape (n,)
        The model's score of ``(x, a)``.
    mass : ndarray of shape (n,)
        ``f(x, a, y)`` times the quadrature weight; sums to 1 up to the quadrature error and the
        (below 1e-20) mass outside ``x_range``.
    oracle : ScoreOracle
        The model's oracle ``P(A | R)``.
    cells : tuple of 2 (ndarray, ndarray)
        Left edges and widths of each group's cells.
    n_nodes : int
        Nodes per cell.
    x_range : tuple of 2 float
        The integrated range of ``x``.
    """

    x: np.ndarray
    a: np.ndarray
    y: np.ndarray
    score: np.ndarray
    mass: np.ndarray
    oracle: ScoreOracle = field(repr=False)
    cells: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] = field(repr=False)
    n_nodes: int
    x_range: tuple[float, float]

    def block(self, a: int, y: int) -> slice:
        """The pseudo-rows of group ``a`` and label ``y``."""
        sizes = [self.cells[0][0].size * self.n_nodes] * 2 + [self.cells[1][0].size * self.n_nodes] * 2
        k = 2 * a + y
        start = sum(sizes[:k])
        return slice(start, start + sizes[k])

    def metrics(
        self,
        weight: np.ndarray,
        *,
        metrics: Sequence[str] = vocabulary.PIPELINE_METRICS,
        threshold: float = 0.5,
        preference_threshold: float = 0.5,
    ) -> dict[str, float]:
        """Population metrics with pseudo-row weights ``mass * weight``.

        :func:`~disaggregated_eval.metrics.compute_metrics` on the pseudo-rows; for a continuous
        (Bayes-optimal) score the AUC is integrated through the negatives' CDF
        (:class:`_ContinuousAUC`), which has no error from comparing nearby pseudo-rows.

        Parameters
        ----------
        weight : ndarray of shape (n,)
            Per pseudo-row weight: 1, a group mask ``1[A = a]`` or ``P(A = a | V)``.
        metrics, threshold, preference_threshold
            As in :func:`~disaggregated_eval.metrics.compute_metrics`.

        Returns
        -------
        dict of str to float
        """
        w = self.mass * np.asarray(weight, dtype=np.float64)
        out = compute_metrics(
            self.y,
            self.score,
            sample_weight=w,
            threshold=threshold,
            preference_threshold=preference_threshold,
            metrics=metrics,
        )
        if "auc" in out and isinstance(self.oracle, SmoothScoreOracle):
            if self._auc is None:
                object.__setattr__(self, "_auc", _ContinuousAUC(self, self.oracle))
            out["auc"] = self._auc(w)
        return out

    _auc: _ContinuousAUC | None = field(default=None, init=False, repr=False, compare=False)


def population_rows(
    setting_id: str,
    model: str,
    *,
    fitted: OutcomeModels | None = None,
    oracle: ScoreOracle | None = None,
    threshold: float = 0.5,
    cell_width: float = 0.05,
    n_nodes: int = 8,
    half_width: float = 10.0,
    breakpoint_scores: Sequence[float] = (),
) -> PopulationRows:
    """The population of ``setting_id`` scored by ``model``, as weighted quadrature pseudo-rows.

    Per group ``a``: Gauss-Legendre nodes (``n_nodes`` per cell) on the cells between the
    breakpoints of the module docstring, each no wider than ``cell_width``, over the ``x`` range
    of the outermost means of ``X | A`` plus and minus ``half_width`` (outside: mass below
    ``2 Phi(-10) ~ 1.5e-23``); each node gives two pseudo-rows (``y = 0, 1``) with mass
    ``f(x, a, y) w``.

    Parameters
    ----------
    setting_id, model : str
        As in :func:`score_oracle`.
    fitted : OutcomeModels, optional
        Needed for the fitted model types.
    oracle : ScoreOracle, optional
        A prebuilt :func:`score_oracle` of this setting and model (built here if omitted).
    threshold : float, default 0.5
        Classification threshold of the metrics (a breakpoint for Bayes scores).
    cell_width : float, default 0.05
    n_nodes : int, default 8
    half_width : float, default 10
    breakpoint_scores : sequence of float, default ()
        Scores in (0, 1) whose preimages become breakpoints too (for a Bayes score), e.g. the edges
        of score bins, so that sums over the pseudo-rows of a bin are exact quadratures; a step
        score needs none (its score is constant on every cell).

    Returns
    -------
    PopulationRows

    Raises
    ------
    ValueError
        As :func:`score_oracle`; or if ``cell_width``, ``half_width`` are not positive,
        ``n_nodes`` is not an integer in 1..100 or ``threshold`` is not in (0, 1).
    """
    dgp = simulate.get_dgp(setting_id)
    n_nodes = check_int(n_nodes, "n_nodes", minimum=1, maximum=100)
    for name, value in (("cell_width", cell_width), ("half_width", half_width)):
        if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number; got {value!r}")
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must be in the open interval (0, 1); got {threshold!r}")
    extra = np.asarray(breakpoint_scores, dtype=np.float64).ravel()
    if not ((extra > 0) & (extra < 1)).all():
        raise ValueError(
            f"breakpoint_scores must lie in (0, 1); got {extra[~((extra > 0) & (extra < 1))][:5].tolist()}"
        )
    if oracle is None:
        oracle = score_oracle(setting_id, model, fitted=fitted)
    elif (oracle.setting_id, oracle.model) != (setting_id, model):
        raise ValueError(
            f"oracle is for setting {oracle.setting_id!r}, model {oracle.model!r}; expected {setting_id!r}, {model!r}"
        )
    score_fn = oracle.step if isinstance(oracle, StepScoreOracle) else oracle
    lo, hi = _x_range(dgp, half_width)
    t, w = np.polynomial.legendre.leggauss(n_nodes)
    xs, groups, labels, masses, cells = [], [], [], [], []
    for a in (0, 1):
        left, width = _gauss_legendre(_breakpoints(score_fn, a, lo, hi, threshold, extra), cell_width, n_nodes)
        nodes = (left[:, None] + 0.5 * width[:, None] * (t[None, :] + 1.0)).ravel()
        weights = (0.5 * width[:, None] * w[None, :]).ravel()
        density = np.exp(dgp.log_density(nodes))[:, a, :]  # (m, 2): f(x, a, y)
        cells.append((left, width))
        for y in (0, 1):
            xs.append(nodes)
            groups.append(np.full(nodes.size, a, dtype=np.int64))
            labels.append(np.full(nodes.size, y, dtype=np.int64))
            masses.append(density[:, y] * weights)
    x, a, y = np.concatenate(xs), np.concatenate(groups), np.concatenate(labels)
    if isinstance(oracle, StepScoreOracle):
        score = oracle.step(x, a)
    else:
        score = simulate.bayes_scores(setting_id, pd.DataFrame({"x": x, "a": a}))[model].to_numpy()
    return PopulationRows(
        x=x,
        a=a,
        y=y,
        score=score,
        mass=np.concatenate(masses),
        oracle=oracle,
        cells=(cells[0], cells[1]),
        n_nodes=n_nodes,
        x_range=(lo, hi),
    )


def population_controlled_differences(
    setting_id: str,
    model: str,
    *,
    fitted: OutcomeModels | None = None,
    oracle: ScoreOracle | None = None,
    controls: Sequence[str] = vocabulary.CONTROLS,
    metrics: Sequence[str] = vocabulary.PIPELINE_METRICS,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
    group_labels: Sequence[str] = vocabulary.SIMULATION_GROUP_LABELS,
    cell_width: float = 0.05,
    n_nodes: int = 8,
    group_prior: Sequence[float] | None = None,
) -> pd.DataFrame:
    """Population subgroup metrics, weighted population metrics ``M_a`` and ``T_a`` with oracle weights.

    For each group ``a`` and control ``V``: the subgroup metric (the population restricted to
    ``A = a``), ``M_a`` (the whole population weighted by ``P(A = a | V)``: 1 for ``none``,
    ``P(A = a | X)``, ``P(A = a | Y)``, the exact ``P(A = a | R)`` of :func:`score_oracle`) and
    ``T_a = subgroup metric - M_a`` (paper section 4.2, Algorithm 1; the population version of the
    pipeline's oracle-weighted ``controlled_difference``). Metric definitions are those of
    :func:`~disaggregated_eval.metrics.compute_metrics`, evaluated on :func:`population_rows`.

    Parameters
    ----------
    setting_id, model : str
        A simulation setting and a model (``x``, ``xa``, ``xa_stratified``, ``bayes_x``, ``bayes_xa``).
    fitted : OutcomeModels, optional
        The setting's fitted outcome models; needed for the fitted model types.
    oracle : ScoreOracle, optional
        A prebuilt :func:`score_oracle` of this setting and model.
    controls : sequence of str, default ("none", "X", "Y", "R")
    metrics : sequence of str, default :data:`~disaggregated_eval.vocabulary.PIPELINE_METRICS`
    threshold, preference_threshold : float, default 0.5
        As in :func:`~disaggregated_eval.metrics.compute_metrics` (paper: 0.5).
    group_labels : sequence of 2 str, default ("A = 0", "A = 1")
        Labels of the ``group`` column (the simulations' ``schema.json`` labels).
    cell_width, n_nodes : float, int
        Quadrature of :func:`population_rows`.
    group_prior : sequence of 2 float, optional
        The population with ``P(A)`` changed to ``group_prior`` and ``P(X, Y | A)`` kept (the
        setting thinned by :func:`sample_with_group_prior`): pseudo-row masses times
        :func:`group_prior_keep` and every oracle ``P(A | V)`` through :func:`shift_group_proba`.
        ``None``: the setting's own population.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`RESULT_COLUMNS`; one row per (control, group, metric), in the order of
        ``controls``, groups, ``metrics``.

    Raises
    ------
    ValueError
        If a control, metric, setting or model is unknown, a fitted model type is given without
        ``fitted``, or ``group_labels`` does not hold two distinct labels.
    """
    controls = [check_choice(c, "control", vocabulary.CONTROLS) for c in controls]
    metrics = tuple(metrics)
    group_labels = list(group_labels)
    if len(group_labels) != 2 or len(set(group_labels)) != 2:
        raise ValueError(f"group_labels must be two distinct labels; got {group_labels!r}")
    dgp = simulate.get_dgp(setting_id)
    rows = population_rows(
        setting_id, model, fitted=fitted, oracle=oracle, threshold=threshold, cell_width=cell_width, n_nodes=n_nodes
    )

    keep = np.ones(2) if group_prior is None else group_prior_keep(setting_id, group_prior)
    scale = keep[rows.a]

    def evaluate(weight: np.ndarray) -> dict[str, float]:
        return rows.metrics(
            scale * weight, metrics=metrics, threshold=threshold, preference_threshold=preference_threshold
        )

    def shifted(proba: np.ndarray) -> np.ndarray:
        return proba if group_prior is None else shift_group_proba(proba, keep)

    weights = {
        "none": np.ones((rows.x.size, 2)),
        "X": shifted(dgp.p_a_given_x(rows.x)),
        "Y": shifted(dgp.p_a_given_y(rows.y)),
        "R": shifted(rows.oracle(rows.score)) if "R" in controls else None,
    }
    overall = evaluate(np.ones(rows.x.size)) if "none" in controls else None
    subgroups = [evaluate((rows.a == a).astype(np.float64)) for a in (0, 1)]
    records = []
    for control in controls:
        for a in (0, 1):
            subgroup = subgroups[a]
            weighted = overall if control == "none" else evaluate(weights[control][:, a])
            for metric in metrics:
                records.append(
                    (
                        setting_id,
                        model,
                        control,
                        group_labels[a],
                        metric,
                        subgroup[metric],
                        weighted[metric],
                        subgroup[metric] - weighted[metric],
                    )
                )
    return pd.DataFrame.from_records(records, columns=list(RESULT_COLUMNS))


# ----------------------------------------------------------------------------------------------
# A setting with other group shares: P(A) changed, P(X, Y | A) kept
# ----------------------------------------------------------------------------------------------


def group_prior_keep(setting_id: str, group_prior: Sequence[float]) -> np.ndarray:
    """Thinning probabilities that turn a setting's ``P(A)`` into ``group_prior``.

    Keeping a row of group ``a`` with probability ``keep_a`` proportional to
    ``group_prior_a / P(A = a)`` (the largest 1) gives a population with ``P(A) = group_prior`` and
    the setting's ``P(X, Y | A)``: a setting with a small group, whose oracles follow exactly from
    the setting's (:func:`shift_group_proba`).

    Parameters
    ----------
    setting_id : str
        A simulation setting (its full population's ``P(A)``, also for the selection settings).
    group_prior : sequence of 2 float
        The new ``P(A = 0), P(A = 1)``: positive, summing to 1.

    Returns
    -------
    ndarray of shape (2,)
        ``keep_a`` in (0, 1], the largest equal to 1.

    Raises
    ------
    ValueError
        If the setting is unknown or ``group_prior`` is not two positive numbers summing to 1.
    """
    prior = np.asarray(group_prior, dtype=np.float64)
    if prior.shape != (2,) or not np.isfinite(prior).all() or (prior <= 0).any() or abs(prior.sum() - 1.0) > 1e-12:
        raise ValueError(f"group_prior must be two positive numbers summing to 1; got {group_prior!r}")
    ratio = prior / simulate.get_dgp(setting_id).p_a()
    return ratio / ratio.max()


def shift_group_proba(proba, keep) -> np.ndarray:
    """``P(A = a | V)`` after thinning group ``a`` with probability ``keep_a``: proportional to
    ``keep_a P(A = a | V)`` (Bayes' rule; thinning depends on ``A`` only, so ``P(V | A)`` is kept).

    Parameters
    ----------
    proba : array-like of shape (n, K)
        ``P(A = a | V)`` of the setting (any control ``V``).
    keep : array-like of shape (K,)
        Thinning probabilities (:func:`group_prior_keep`).

    Returns
    -------
    ndarray of shape (n, K)
        Rows sum to 1.
    """
    shifted = np.asarray(proba, dtype=np.float64) * np.asarray(keep, dtype=np.float64)[None, :]
    return shifted / shifted.sum(axis=1, keepdims=True)


def sample_with_group_prior(
    setting_id: str, n: int, *, group_prior: Sequence[float], rng: np.random.Generator
) -> pd.DataFrame:
    """Draw ``n`` rows of a setting's full population with ``P(A)`` changed to ``group_prior``.

    Rows of the setting's population (:meth:`~disaggregated_eval.simulate.DGP.sample`) are kept
    independently with probability :func:`group_prior_keep` of their group, in batches, until
    ``n`` are kept; the first ``n`` kept rows are i.i.d. from the thinned population.

    Parameters
    ----------
    setting_id : str
    n : int
        Rows to draw (positive).
    group_prior : sequence of 2 float
        The new ``P(A)``.
    rng : numpy.random.Generator
        Source of randomness (:func:`disaggregated_eval.seeds.generator`).

    Returns
    -------
    pandas.DataFrame of shape (n, 3)
        Columns ``x``, ``a``, ``y`` as the setting's test data.

    Raises
    ------
    ValueError
        If the setting is unknown, ``n`` is not a positive integer or ``group_prior`` is invalid.
    """
    n = check_int(n, "n", minimum=1)
    keep = group_prior_keep(setting_id, group_prior)
    dgp = simulate.get_dgp(setting_id)
    rate = float(np.dot(dgp.p_a(), keep))
    kept, total = [], 0
    while total < n:
        batch = dgp.sample(math.ceil(1.1 * (n - total) / rate) + 16, rng)
        batch = batch[rng.random(len(batch)) < keep[batch["a"].to_numpy()]]
        kept.append(batch)
        total += len(batch)
    return pd.concat(kept, ignore_index=True).iloc[:n].reset_index(drop=True)
