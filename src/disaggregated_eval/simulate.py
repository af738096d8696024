"""The paper's simulated data generating processes (DGPs) and their closed-form oracles.

Paper: Supplementary A.3.1 (DGPs), A.3 (sizes), A.2 (selection); project spec ``SPEC.md`` 2.1-2.5.

Two families, each with a binary subgroup ``A``, a binary label ``Y`` and a univariate covariate ``X``:

* causal direction (:class:`CausalDGP`): ``U ~ Bern(0.5)``, ``X | U=u ~ N(mu_u, 1)``,
  ``A = U`` if ``gamma_A = 1`` else ``A ~ Bern(0.5)`` independent of ``U``,
  ``Y | X, A=a ~ Bern(sigmoid(beta_a X + alpha_a))``;
* anticausal direction (:class:`AnticausalDGP`): ``A ~ Bern(0.5)``, ``Y | A=a ~ Bern(p_a)``,
  ``X | A=a, Y=y ~ N(mu_ay, 1)``. As in the authors' code (SPEC 2.2), ``p_0 = P(Y=1 | A=0)``.

and three selection variants of ``complex_causal_shift`` (:class:`SelectionDGP`, SPEC 2.3) whose
training data are drawn from the population conditioned on ``S = 1``.

Every DGP has closed-form oracles derived by Bayes' rule from the closed-form joint density
``f(x, a, y)`` of ``(X, A, Y)``: ``E[Y | X, A]``, ``E[Y | X]``, ``P(A | X)``, ``P(A | Y)``,
``P(A)`` and the prevalences (numerical integrals with :func:`scipy.integrate.quad` where the
logistic-normal integral has no closed form). ``P(A | R)`` for a model score ``R`` is not
closed-form; :func:`oracle_weights` approximates it by binning a very large Monte Carlo sample.

All randomness comes from :mod:`disaggregated_eval.seeds`; the global numpy RNG is never used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pandas as pd
from scipy import integrate
from scipy.special import expit, log_expit, logsumexp

from . import seeds

__all__ = [
    "CausalDGP",
    "AnticausalDGP",
    "SelectionDGP",
    "DGP",
    "SETTINGS",
    "MAIN_SETTINGS",
    "SELECTION_SETTINGS",
    "get_dgp",
    "simulate_setting",
    "bayes_scores",
    "oracle_weights",
]

_LOG_HALF = math.log(0.5)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_QUAD_OPTIONS = {"epsabs": 1e-13, "epsrel": 1e-12, "limit": 200}
_SCORE_EPS = float(np.finfo(np.float64).eps)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _log_normal_pdf(x: np.ndarray, mean: float) -> np.ndarray:
    """Log density of ``N(mean, 1)`` at ``x``."""
    return -0.5 * (x - mean) ** 2 - _LOG_SQRT_2PI


def _as_float_array(x: object) -> np.ndarray:
    return np.atleast_1d(np.asarray(x, dtype=np.float64))


def _as_binary_array(values: object, name: str) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(values))
    if arr.size and not np.isin(arr, (0, 1)).all():
        bad = sorted({v.item() for v in np.unique(arr[~np.isin(arr, (0, 1))])})[:5]
        raise ValueError(f"{name} must be 0/1; got values {bad}")
    return arr.astype(np.int64)


def _check_positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def _frame(x: np.ndarray, a: np.ndarray, y: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "x": np.asarray(x, dtype=np.float64),
            "a": np.asarray(a, dtype=np.int64),
            "y": np.asarray(y, dtype=np.int64),
        }
    )


def _normal_expectation(fn: Callable[[float], float], mean: float) -> float:
    """``E[fn(Z)]`` for ``Z ~ N(mean, 1)`` by adaptive quadrature over the real line."""

    def integrand(z: float) -> float:
        return math.exp(-0.5 * z * z - _LOG_SQRT_2PI) * fn(mean + z)

    value, _ = integrate.quad(integrand, -np.inf, np.inf, **_QUAD_OPTIONS)
    return float(value)


# Generic Bayes' rule on a log joint density array ``log_joint`` of shape (n, 2, 2), indexed
# [row, a, y], holding log f(X = x_row, A = a, Y = y) up to a factor that does not depend on (a, y).
def _y_given_xa(log_joint: np.ndarray, a: np.ndarray) -> np.ndarray:
    rows = np.arange(log_joint.shape[0])
    return expit(log_joint[rows, a, 1] - log_joint[rows, a, 0])


def _y_given_x(log_joint: np.ndarray) -> np.ndarray:
    return expit(logsumexp(log_joint[:, :, 1], axis=1) - logsumexp(log_joint[:, :, 0], axis=1))


def _a_given_x(log_joint: np.ndarray) -> np.ndarray:
    log_xa = logsumexp(log_joint, axis=2)
    diff = log_xa[:, 1] - log_xa[:, 0]
    return np.column_stack([expit(-diff), expit(diff)])


class _BinaryDGP:
    """Oracles shared by all DGPs, derived from ``_log_joint`` by Bayes' rule.

    Subclasses provide ``_log_joint(x) -> ndarray (n, 2, 2)`` (log density of ``(X, A, Y)``),
    ``p_a()`` and ``prevalence(a)``.
    """

    def _log_joint(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _log_joint_selected(self, x: np.ndarray) -> np.ndarray:
        """Log joint density of the population the models are trained on (here: the population)."""
        return self._log_joint(x)

    # ---- population oracles --------------------------------------------------------------
    def p_y_given_xa(self, x: object, a: object) -> np.ndarray:
        """Bayes-optimal subgroup-aware score ``E[Y | X = x, A = a]``.

        Parameters
        ----------
        x : array-like of shape (n,)
            Covariate values.
        a : array-like of shape (n,) or scalar
            Group codes 0/1 (broadcast against ``x``).

        Returns
        -------
        ndarray of shape (n,)
            ``P(Y = 1 | X = x, A = a)`` in [0, 1].

        Raises
        ------
        ValueError
            If ``a`` has values other than 0/1.
        """
        xs, codes = np.broadcast_arrays(_as_float_array(x), _as_binary_array(a, "a"))
        return _y_given_xa(self._log_joint(np.ascontiguousarray(xs)), codes)

    def p_y_given_x(self, x: object) -> np.ndarray:
        """Bayes-optimal subgroup-agnostic score ``E[Y | X = x] = sum_a E[Y | x, a] P(a | x)``.

        Parameters
        ----------
        x : array-like of shape (n,)

        Returns
        -------
        ndarray of shape (n,)
        """
        return _y_given_x(self._log_joint(_as_float_array(x)))

    def p_a_given_x(self, x: object) -> np.ndarray:
        """Oracle weights for control ``V = X``: ``P(A = a | X = x)`` (paper Algorithm 1).

        Parameters
        ----------
        x : array-like of shape (n,)

        Returns
        -------
        ndarray of shape (n, 2)
            Column ``a`` holds ``P(A = a | X = x)``; rows sum to 1.
        """
        return _a_given_x(self._log_joint(_as_float_array(x)))

    def p_a_given_y(self, y: object) -> np.ndarray:
        """Oracle weights for control ``V = Y``: ``P(A = a | Y = y)`` by Bayes' rule.

        ``P(A = a | Y = y) = P(Y = y | A = a) P(A = a) / sum_b P(Y = y | A = b) P(A = b)``.

        Parameters
        ----------
        y : array-like of shape (n,)
            Labels 0/1.

        Returns
        -------
        ndarray of shape (n, 2)

        Raises
        ------
        ValueError
            If ``y`` has values other than 0/1.
        """
        labels = _as_binary_array(y, "y")
        prev = np.array([self.prevalence(0), self.prevalence(1)])
        joint1 = self.p_a() * prev  # P(A = a, Y = 1)
        joint0 = self.p_a() * (1.0 - prev)
        table = np.vstack([joint0 / joint0.sum(), joint1 / joint1.sum()])  # [y, a]
        return table[labels]

    def p_a(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def prevalence(self, a: int | None = None) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- Bayes-optimal scores in the training population -----------------------------------
    def selected_p_y_given_xa(self, x: object, a: object) -> np.ndarray:
        """``E[Y | X, A, S = 1]``: the Bayes-optimal subgroup-aware score of the training population.

        Without selection this is :meth:`p_y_given_xa`. Shapes as there.
        """
        xs, codes = np.broadcast_arrays(_as_float_array(x), _as_binary_array(a, "a"))
        return _y_given_xa(self._log_joint_selected(np.ascontiguousarray(xs)), codes)

    def selected_p_y_given_x(self, x: object) -> np.ndarray:
        """``E[Y | X, S = 1]``: the Bayes-optimal subgroup-agnostic score of the training population.

        Without selection this is :meth:`p_y_given_x`. Shapes as there.
        """
        return _y_given_x(self._log_joint_selected(_as_float_array(x)))


# --------------------------------------------------------------------------------------------
# causal direction
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CausalDGP(_BinaryDGP):
    """Causal-direction DGP (paper A.3.1, SPEC 2.1).

    ``U ~ Bern(0.5)``; ``X | U=u ~ N(mu_u, 1)``; ``A = U`` if ``gamma_a = 1``, else
    ``A ~ Bern(0.5)`` independent of ``U``; ``Y | X, A=a ~ Bern(sigmoid(beta_a X + alpha_a))``.

    Parameters
    ----------
    setting_id, display_name : str
        Registry id (file-name safe) and the paper's label.
    mu : tuple of 2 float
        ``(mu_0, mu_1)``, means of ``X | U``.
    gamma_a : int
        1 if ``A = U`` (covariate shift across groups), 0 if ``A`` is independent of ``U``.
    beta, alpha : tuple of 2 float
        Group-specific logistic slopes and intercepts.

    Notes
    -----
    The joint density is ``f(x, a, y) = f(x, a) P(y | x, a)`` with
    ``f(x, a) = 0.5 phi(x - mu_a)`` if ``gamma_a = 1`` and
    ``f(x, a) = 0.25 (phi(x - mu_0) + phi(x - mu_1))`` otherwise; so ``P(A = a | X) = 0.5`` when
    ``gamma_a = 0`` and ``P(A = 1 | X = x) = sigmoid((mu_1 - mu_0) x - (mu_1^2 - mu_0^2) / 2)``
    when ``gamma_a = 1``. ``P(Y = 1 | A = a)`` is a logistic-normal integral without closed form,
    computed with :func:`scipy.integrate.quad` (absolute error below about 1e-12).
    """

    setting_id: str
    display_name: str
    mu: tuple[float, float]
    gamma_a: int
    beta: tuple[float, float]
    alpha: tuple[float, float]

    def __post_init__(self) -> None:
        if self.gamma_a not in (0, 1):
            raise ValueError(f"gamma_a must be 0 or 1; got {self.gamma_a!r}")

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """Draw ``n`` i.i.d. rows from the population.

        Parameters
        ----------
        n : int
            Number of rows (positive).
        rng : numpy.random.Generator
            Source of randomness (from :func:`disaggregated_eval.seeds.generator`).

        Returns
        -------
        pandas.DataFrame of shape (n, 3)
            Columns ``x`` (float64), ``a`` (int64 0/1), ``y`` (int64 0/1).

        Raises
        ------
        ValueError
            If ``n`` is not a positive integer.
        """
        n = _check_positive_int("n", n)
        u = (rng.random(n) < 0.5).astype(np.int64)
        x = rng.normal(loc=np.asarray(self.mu, dtype=np.float64)[u], scale=1.0)
        a = u if self.gamma_a == 1 else (rng.random(n) < 0.5).astype(np.int64)
        p = expit(np.asarray(self.beta)[a] * x + np.asarray(self.alpha)[a])
        y = (rng.random(n) < p).astype(np.int64)
        return _frame(x, a, y)

    def _log_joint(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        l0 = _log_normal_pdf(x, self.mu[0])
        l1 = _log_normal_pdf(x, self.mu[1])
        if self.gamma_a == 1:
            log_xa = np.column_stack([_LOG_HALF + l0, _LOG_HALF + l1])
        else:
            mix = _LOG_HALF + _LOG_HALF + np.logaddexp(l0, l1)
            log_xa = np.column_stack([mix, mix])
        z = np.column_stack([self.beta[0] * x + self.alpha[0], self.beta[1] * x + self.alpha[1]])
        out = np.empty((x.shape[0], 2, 2))
        out[:, :, 1] = log_xa + log_expit(z)
        out[:, :, 0] = log_xa + log_expit(-z)
        return out

    def p_a_given_x(self, x: object) -> np.ndarray:
        """``P(A = a | X = x)``, shape (n, 2): exactly 0.5 if ``gamma_a = 0``, else
        ``P(A = 1 | x) = sigmoid((mu_1 - mu_0) x - (mu_1^2 - mu_0^2) / 2)`` (two normal components).
        """
        xs = _as_float_array(x)
        if self.gamma_a == 0:
            return np.full((xs.shape[0], 2), 0.5)
        m0, m1 = float(self.mu[0]), float(self.mu[1])
        eta = (m1 - m0) * xs - 0.5 * (m1 * m1 - m0 * m0)
        return np.column_stack([expit(-eta), expit(eta)])

    def p_a(self) -> np.ndarray:
        """``P(A = a)``, shape (2,): ``(0.5, 0.5)`` (``U`` and the independent ``A`` are fair coins)."""
        return np.array([0.5, 0.5])

    def mean_x_given_a(self, a: int) -> float:
        """``E[X | A = a]``: ``mu_a`` if ``gamma_a = 1``, else ``(mu_0 + mu_1) / 2``."""
        a = int(_as_binary_array(a, "a")[0])
        return float(self.mu[a]) if self.gamma_a == 1 else 0.5 * (self.mu[0] + self.mu[1])

    def prevalence(self, a: int | None = None) -> float:
        """``P(Y = 1)`` (``a=None``) or ``P(Y = 1 | A = a)``.

        ``P(Y = 1 | A = a) = E[sigmoid(beta_a X + alpha_a) | A = a]`` with ``X | A = a`` normal
        (``gamma_a = 1``) or the two-component mixture (``gamma_a = 0``), integrated numerically
        with :func:`scipy.integrate.quad`. ``P(Y = 1) = sum_a P(A = a) P(Y = 1 | A = a)``.

        Raises
        ------
        ValueError
            If ``a`` is not ``None``, 0 or 1.
        """
        if a is None:
            return float(0.5 * (self.prevalence(0) + self.prevalence(1)))
        a = int(_as_binary_array(a, "a")[0])
        beta, alpha = float(self.beta[a]), float(self.alpha[a])

        def sig(v: float) -> float:
            return float(expit(beta * v + alpha))

        if self.gamma_a == 1:
            return _normal_expectation(sig, float(self.mu[a]))
        return 0.5 * (_normal_expectation(sig, float(self.mu[0])) + _normal_expectation(sig, float(self.mu[1])))


# --------------------------------------------------------------------------------------------
# anticausal direction
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class AnticausalDGP(_BinaryDGP):
    """Anticausal-direction DGP (paper A.3.1, SPEC 2.2, following the authors' code).

    ``A ~ Bern(0.5)``; ``Y | A=a ~ Bern(p_a)``; ``X | A=a, Y=y ~ N(mu_ay, 1)``.

    Parameters
    ----------
    setting_id, display_name : str
    p_y : tuple of 2 float
        ``(p_0, p_1)`` with ``p_a = P(Y = 1 | A = a)`` (the code's convention; the paper's formula
        swaps the groups, see SPEC 2.2).
    mu : tuple of 2 tuples of 2 float
        ``mu[a][y]``, the mean of ``X | A=a, Y=y``.

    Notes
    -----
    ``f(x, a, y) = 0.5 p_a^y (1 - p_a)^(1-y) phi(x - mu_ay)``; all oracles follow by Bayes' rule,
    e.g. ``logit P(Y = 1 | x, a) = logit p_a + (mu_a1 - mu_a0) x - (mu_a1^2 - mu_a0^2) / 2``, and
    ``P(A | X)`` mixes over ``Y``.
    """

    setting_id: str
    display_name: str
    p_y: tuple[float, float]
    mu: tuple[tuple[float, float], tuple[float, float]]

    def __post_init__(self) -> None:
        if not all(0.0 < p < 1.0 for p in self.p_y):
            raise ValueError(f"p_y must lie in (0, 1); got {self.p_y!r}")

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """Draw ``n`` i.i.d. rows; see :meth:`CausalDGP.sample` for shapes and ``Raises``."""
        n = _check_positive_int("n", n)
        a = (rng.random(n) < 0.5).astype(np.int64)
        y = (rng.random(n) < np.asarray(self.p_y)[a]).astype(np.int64)
        x = rng.normal(loc=np.asarray(self.mu, dtype=np.float64)[a, y], scale=1.0)
        return _frame(x, a, y)

    def _log_joint(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        out = np.empty((x.shape[0], 2, 2))
        for a in (0, 1):
            p = self.p_y[a]
            out[:, a, 1] = _LOG_HALF + math.log(p) + _log_normal_pdf(x, self.mu[a][1])
            out[:, a, 0] = _LOG_HALF + math.log1p(-p) + _log_normal_pdf(x, self.mu[a][0])
        return out

    def p_a(self) -> np.ndarray:
        """``P(A = a)``, shape (2,): ``(0.5, 0.5)``."""
        return np.array([0.5, 0.5])

    def mean_x_given_a(self, a: int) -> float:
        """``E[X | A = a] = p_a mu_a1 + (1 - p_a) mu_a0``."""
        a = int(_as_binary_array(a, "a")[0])
        return float(self.p_y[a] * self.mu[a][1] + (1.0 - self.p_y[a]) * self.mu[a][0])

    def prevalence(self, a: int | None = None) -> float:
        """``P(Y = 1) = (p_0 + p_1) / 2`` (``a=None``) or ``P(Y = 1 | A = a) = p_a`` (closed form).

        Raises
        ------
        ValueError
            If ``a`` is not ``None``, 0 or 1.
        """
        if a is None:
            return float(0.5 * (self.p_y[0] + self.p_y[1]))
        return float(self.p_y[int(_as_binary_array(a, "a")[0])])


# --------------------------------------------------------------------------------------------
# selection variants
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SelectionDGP(_BinaryDGP):
    """A DGP whose training population is the base population conditioned on ``S = 1``.

    Paper A.2 and A.3.1, SPEC 2.3. ``S | X, A, Y ~ Bern(s(X, A, Y))`` with the factorised
    selection probability ``s(x, a, y) = clip(1 - x_curvature * x^2, 0, 1) * s_ay[a][y]``.

    Parameters
    ----------
    setting_id, display_name : str
    base : CausalDGP or AnticausalDGP
        The full (target) population; all population oracles (``p_y_given_xa``, ``p_a_given_x``,
        ``prevalence``, ...) are those of ``base``.
    s_ay : tuple of 2 tuples of 2 float
        ``s_ay[a][y]`` in (0, 1], the factor of ``s`` that depends on ``(A, Y)``.
    x_curvature : float
        ``c >= 0`` in the factor ``clip(1 - c x^2, 0, 1)`` that depends on ``X`` (0: no factor).

    Notes
    -----
    The selected population has density ``f(x, a, y) s(x, a, y) / P(S = 1)``, so by Bayes' rule
    ``E[Y | x, a, S=1] = P(Y=1 | x, a) s(x, a, 1) / sum_y P(y | x, a) s(x, a, y)`` and
    ``E[Y | x, S=1] = sum_a f(x, a, 1) s(x, a, 1) / sum_{a, y} f(x, a, y) s(x, a, y)``. The ``X``
    factor cancels from both ratios (paper A.2, eq. (1): ``S`` is d-separated from ``Y`` by ``X``
    when selection depends on ``X`` only). Where ``s(x) = 0`` (``|x| >= 1/sqrt(c)``) the selected
    population has no mass and these scores are defined by the same (continuous) expression,
    i.e. the population scores.
    """

    setting_id: str
    display_name: str
    base: CausalDGP | AnticausalDGP
    s_ay: tuple[tuple[float, float], tuple[float, float]] = ((1.0, 1.0), (1.0, 1.0))
    x_curvature: float = 0.0

    def __post_init__(self) -> None:
        if not all(0.0 < s <= 1.0 for row in self.s_ay for s in row):
            raise ValueError(f"s_ay entries must lie in (0, 1]; got {self.s_ay!r}")
        if self.x_curvature < 0:
            raise ValueError(f"x_curvature must be non-negative; got {self.x_curvature!r}")

    # ---- selection mechanism ---------------------------------------------------------------
    def selection_probability(self, x: object, a: object, y: object) -> np.ndarray:
        """``s(x, a, y) = P(S = 1 | X = x, A = a, Y = y)``.

        Parameters
        ----------
        x : array-like of shape (n,)
        a, y : array-like of shape (n,) or scalar, values 0/1

        Returns
        -------
        ndarray of shape (n,)
            Values in [0, 1]; for ``selection_x``, ``clip(1 - (4/25) x^2, 0, 1)`` (the paper's
            formula is negative for ``|x| > 2.5``; SPEC 2.3 clips it).

        Raises
        ------
        ValueError
            If ``a`` or ``y`` has values other than 0/1.
        """
        xs, codes, labels = np.broadcast_arrays(
            _as_float_array(x), _as_binary_array(a, "a"), _as_binary_array(y, "y")
        )
        return self._x_factor(xs) * np.asarray(self.s_ay, dtype=np.float64)[codes, labels]

    def _x_factor(self, x: np.ndarray) -> np.ndarray:
        if self.x_curvature == 0.0:
            return np.ones_like(x, dtype=np.float64)
        return np.clip(1.0 - self.x_curvature * np.asarray(x, dtype=np.float64) ** 2, 0.0, 1.0)

    def p_selected(self) -> float:
        """``P(S = 1) = E[s(X, A, Y)]``, the share of population draws that are kept.

        ``sum_{a,y} s_ay[a][y] * integral f(x, a, y) clip(1 - c x^2, 0, 1) dx``; the integral is
        ``P(A = a, Y = y)`` when ``c = 0`` and is computed with :func:`scipy.integrate.quad` over
        ``[-1/sqrt(c), 1/sqrt(c)]`` otherwise.
        """
        s_ay = np.asarray(self.s_ay, dtype=np.float64)
        if self.x_curvature == 0.0:
            prev = np.array([self.base.prevalence(0), self.base.prevalence(1)])
            p_ay = self.base.p_a()[:, None] * np.column_stack([1.0 - prev, prev])
            return float((s_ay * p_ay).sum())
        bound = 1.0 / math.sqrt(self.x_curvature)

        def integrand(v: float) -> float:
            joint = np.exp(self.base._log_joint(np.array([v])))[0]
            return float((joint * s_ay).sum() * (1.0 - self.x_curvature * v * v))

        value, _ = integrate.quad(integrand, -bound, bound, **_QUAD_OPTIONS)
        return float(value)

    # ---- sampling ----------------------------------------------------------------------------
    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """Draw ``n`` rows from the full population (no selection): the test data (SPEC 2.3)."""
        return self.base.sample(n, rng)

    def sample_with_selection(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """Draw ``n`` population rows together with their selection indicator.

        Returns
        -------
        pandas.DataFrame of shape (n, 4)
            Columns ``x``, ``a``, ``y`` as :meth:`sample` and ``s`` (int64 0/1), ``S ~ Bern(s)``.
        """
        df = self.base.sample(n, rng)
        prob = self.selection_probability(df["x"].to_numpy(), df["a"].to_numpy(), df["y"].to_numpy())
        df["s"] = (rng.random(len(df)) < prob).astype(np.int64)
        return df

    def _sample_selected_counted(self, n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, int]:
        """:meth:`sample_selected` plus the number of population draws up to the ``n``-th kept row."""
        n = _check_positive_int("n", n)
        rate = self.p_selected()
        parts: list[pd.DataFrame] = []
        kept, drawn = 0, 0
        while kept < n:
            need = n - kept
            chunk = int(min(max(math.ceil(1.1 * need / rate) + 100, 1024), 5_000_000))
            df = self.sample_with_selection(chunk, rng)
            mask = df["s"].to_numpy() == 1
            hits = np.flatnonzero(mask)
            if hits.size >= need:
                last = hits[need - 1]
                drawn += int(last) + 1
                parts.append(df.iloc[hits[:need]])
                kept = n
            else:
                drawn += chunk
                parts.append(df.iloc[hits])
                kept += hits.size
        out = pd.concat(parts, ignore_index=True).drop(columns="s")
        return out, drawn

    def sample_selected(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """Draw exactly ``n`` rows from the selected population ``P(X, A, Y | S = 1)``.

        Population rows are drawn in vectorised chunks, ``S ~ Bern(s(X, A, Y))`` is drawn for each,
        and rows with ``S = 1`` are kept in draw order until ``n`` are kept (paper A.3: "draw and
        filter"). The result is a deterministic function of the state of ``rng``.

        Parameters
        ----------
        n : int
        rng : numpy.random.Generator

        Returns
        -------
        pandas.DataFrame of shape (n, 3)
            Columns ``x`` (float64), ``a`` (int64), ``y`` (int64).

        Raises
        ------
        ValueError
            If ``n`` is not a positive integer.
        """
        return self._sample_selected_counted(n, rng)[0]

    # ---- oracles -----------------------------------------------------------------------------
    def _log_joint(self, x: np.ndarray) -> np.ndarray:
        return self.base._log_joint(x)

    def _log_joint_selected(self, x: np.ndarray) -> np.ndarray:
        # log f(x, a, y) + log s_ay[a][y]; the X factor of s is common to all (a, y) and cancels.
        return self.base._log_joint(x) + np.log(np.asarray(self.s_ay, dtype=np.float64))[None, :, :]

    def p_y_given_xa(self, x: object, a: object) -> np.ndarray:
        """``E[Y | X, A]`` in the full population (the base DGP's)."""
        return self.base.p_y_given_xa(x, a)

    def p_y_given_x(self, x: object) -> np.ndarray:
        """``E[Y | X]`` in the full population (the base DGP's)."""
        return self.base.p_y_given_x(x)

    def p_a_given_x(self, x: object) -> np.ndarray:
        """``P(A = a | X)``, shape (n, 2), in the full population (the base DGP's)."""
        return self.base.p_a_given_x(x)

    def p_a_given_y(self, y: object) -> np.ndarray:
        """``P(A = a | Y)``, shape (n, 2), in the full population (the base DGP's)."""
        return self.base.p_a_given_y(y)

    def p_a(self) -> np.ndarray:
        """``P(A = a)`` in the full population, shape (2,)."""
        return self.base.p_a()

    def prevalence(self, a: int | None = None) -> float:
        """Prevalence in the full population; see the base DGP."""
        return self.base.prevalence(a)

    def mean_x_given_a(self, a: int) -> float:
        """``E[X | A = a]`` in the full population."""
        return self.base.mean_x_given_a(a)


DGP: TypeAlias = CausalDGP | AnticausalDGP | SelectionDGP

_COMPLEX_CAUSAL = CausalDGP(
    "complex_causal_shift", "Complex Causal", mu=(-2.0, 0.0), gamma_a=1, beta=(0.5, -1.0), alpha=(0.1, 0.0)
)

#: All simulation settings, main settings in the paper's order (SPEC 2.1, 2.2), then selection (2.3).
SETTINGS: dict[str, DGP] = {
    d.setting_id: d
    for d in (
        CausalDGP("covariate_shift", "Covariate Shift", mu=(-2.0, 0.0), gamma_a=1, beta=(0.5, 0.5), alpha=(0.0, 0.0)),
        CausalDGP("outcome_shift", "Outcome Shift", mu=(-2.0, 0.0), gamma_a=0, beta=(0.5, -1.0), alpha=(0.1, 0.0)),
        _COMPLEX_CAUSAL,
        CausalDGP("low_overlap_causal", "Separable", mu=(-2.0, 2.0), gamma_a=1, beta=(0.5, -1.0), alpha=(0.1, 0.0)),
        AnticausalDGP("anticausal_label_shift", "Label Shift", p_y=(0.5, 0.1), mu=((-1.0, 1.0), (-1.0, 1.0))),
        AnticausalDGP(
            "anticausal_presentation_shift", "Presentation Shift", p_y=(0.5, 0.5), mu=((1.0, 0.0), (-1.0, 1.0))
        ),
        AnticausalDGP("complex_anticausal_shift", "Complex Anticausal", p_y=(0.5, 0.1), mu=((1.0, 0.0), (-1.0, 1.0))),
        SelectionDGP("selection_x", "Selection on X", base=_COMPLEX_CAUSAL, x_curvature=4.0 / 25.0),
        SelectionDGP("selection_y", "Selection on Y", base=_COMPLEX_CAUSAL, s_ay=((0.4, 0.8), (0.4, 0.8))),
        SelectionDGP("selection_ya", "Selection on Y and A", base=_COMPLEX_CAUSAL, s_ay=((0.8, 0.5), (0.8, 0.25))),
    )
}

#: The seven main settings (no selection), in the paper's order.
MAIN_SETTINGS: tuple[str, ...] = tuple(k for k, d in SETTINGS.items() if not isinstance(d, SelectionDGP))
#: The selection variants of ``complex_causal_shift``.
SELECTION_SETTINGS: tuple[str, ...] = ("selection_x", "selection_y", "selection_ya")


def get_dgp(setting_id: str) -> DGP:
    """Return the DGP registered as ``setting_id``.

    Raises
    ------
    ValueError
        If ``setting_id`` is unknown; the message lists the valid ids.
    """
    try:
        return SETTINGS[setting_id]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown simulation setting {setting_id!r}; valid settings: {', '.join(SETTINGS)}"
        ) from None


# --------------------------------------------------------------------------------------------
# pipeline functions
# --------------------------------------------------------------------------------------------
def simulate_setting(
    setting_id: str, *, n_train: int, n_test: int, seed: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Draw the training and test sets of one setting (paper A.3; SPEC 2.3, 2.4).

    Train and test are independent, drawn with ``seeds.generator(seed, "simulate", setting_id,
    "train" | "test")``. For selection settings the training set comes from the selected
    population (:meth:`SelectionDGP.sample_selected`) and the test set from the full population.

    Parameters
    ----------
    setting_id : str
        A key of :data:`SETTINGS`.
    n_train, n_test : int
        Positive numbers of rows (paper: 50,000 and 20,000).
    seed : int
        The configured non-negative root seed.

    Returns
    -------
    train : pandas.DataFrame of shape (n_train, 3)
    test : pandas.DataFrame of shape (n_test, 3)
        Columns ``x`` (float64), ``a`` (int64 0/1), ``y`` (int64 0/1).

    Raises
    ------
    ValueError
        If ``setting_id`` is unknown, a size is not a positive integer, or ``seed`` is negative.
    """
    dgp = get_dgp(setting_id)
    n_train = _check_positive_int("n_train", n_train)
    n_test = _check_positive_int("n_test", n_test)
    rng_train = seeds.generator(seed, "simulate", setting_id, "train")
    rng_test = seeds.generator(seed, "simulate", setting_id, "test")
    if isinstance(dgp, SelectionDGP):
        train = dgp.sample_selected(n_train, rng_train)
    else:
        train = dgp.sample(n_train, rng_train)
    return train, dgp.sample(n_test, rng_test)


def _check_columns(df: pd.DataFrame, columns: tuple[str, ...], name: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame; got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{name} is missing columns {missing}; got columns {list(df.columns)}")


def bayes_scores(setting_id: str, df: pd.DataFrame) -> pd.DataFrame:
    """Bayes-optimal scores of the population the models are trained on.

    ``bayes_x = E[Y | X, S = 1]`` and ``bayes_xa = E[Y | X, A, S = 1]`` for selection settings
    (the "Bayes-optimal model fit in the selected population" of paper Table B2); for the main
    settings ``E[Y | X]`` and ``E[Y | X, A]`` (SPEC 2.5). Scores are clipped to
    ``[eps, 1 - eps]`` (``eps`` the float64 machine epsilon) so that they lie in (0, 1).

    Parameters
    ----------
    setting_id : str
    df : pandas.DataFrame of shape (n, >= 2)
        Rows to score, with columns ``x`` and ``a`` (0/1).

    Returns
    -------
    pandas.DataFrame of shape (n, 2)
        Columns ``bayes_x``, ``bayes_xa`` (float64), in the row order of ``df`` (index ``0..n-1``).

    Raises
    ------
    ValueError
        If ``setting_id`` is unknown, a column is missing or ``a`` is not 0/1.
    """
    dgp = get_dgp(setting_id)
    _check_columns(df, ("x", "a"), "df")
    x = df["x"].to_numpy(dtype=np.float64)
    a = df["a"].to_numpy()
    out = pd.DataFrame(
        {
            "bayes_x": dgp.selected_p_y_given_x(x),
            "bayes_xa": dgp.selected_p_y_given_xa(x, a),
        }
    )
    return out.clip(_SCORE_EPS, 1.0 - _SCORE_EPS).astype(np.float64)


def _binned_group_shares(
    mc_scores: np.ndarray, mc_groups: np.ndarray, query: np.ndarray, *, n_bins: int, n_groups: int = 2
) -> np.ndarray:
    """``P(A = a | bin(R))`` from a Monte Carlo sample, evaluated at ``query`` scores.

    Bins are the distinct Monte Carlo scores if there are at most ``n_bins`` of them (a query
    score is mapped to the nearest distinct value), else ``n_bins`` quantile bins of the Monte
    Carlo scores (tied edges merged). An empty bin borrows the shares of the nearest non-empty
    bin above it (the last non-empty bin for empty bins at the top).

    Returns
    -------
    ndarray of shape (len(query), n_groups)
    """
    values = np.unique(mc_scores)
    if values.size <= n_bins:
        mc_bin = np.searchsorted(values, mc_scores)
        query_bin = np.searchsorted((values[1:] + values[:-1]) / 2.0, query, side="left")
        n_total_bins = values.size
    else:
        edges = np.unique(np.quantile(mc_scores, np.linspace(0.0, 1.0, n_bins + 1)[1:-1]))
        mc_bin = np.searchsorted(edges, mc_scores, side="right")
        query_bin = np.searchsorted(edges, query, side="right")
        n_total_bins = edges.size + 1
    counts = np.bincount(mc_bin * n_groups + mc_groups, minlength=n_total_bins * n_groups)
    counts = counts.reshape(n_total_bins, n_groups).astype(np.float64)
    totals = counts.sum(axis=1)
    nonempty = np.flatnonzero(totals > 0)
    target = nonempty[np.minimum(np.searchsorted(nonempty, np.arange(n_total_bins)), nonempty.size - 1)]
    shares = counts[target] / totals[target][:, None]
    return shares[query_bin]


def oracle_weights(
    setting_id: str,
    test: pd.DataFrame,
    *,
    score_fns: Mapping[str, Callable[[pd.DataFrame], np.ndarray]],
    test_scores: Mapping[str, np.ndarray],
    n_monte_carlo: int = 1_000_000,
    n_bins: int = 100,
    seed: int,
) -> pd.DataFrame:
    """Oracle weights ``P(A = a | V)`` for the test rows (paper Algorithm 1; SPEC 2.5).

    * ``V = X``: :meth:`p_a_given_x` (closed form), model ``"*"``.
    * ``V = Y``: :meth:`p_a_given_y` (closed form), model ``"*"``.
    * ``V = R``, one block per model in ``score_fns``: ``P(A | R)`` has no closed form and is
      approximated by fine binning at large ``n``: ``n_monte_carlo`` rows are drawn from the *full*
      population with ``seeds.generator(seed, "oracle", setting_id, "monte_carlo")`` and scored
      with ``score_fns[model]``; the scores are binned (by their distinct values when there are at
      most ``n_bins`` of them, as for fitted tree models, else into ``n_bins`` quantile bins);
      ``P(A = a | bin)`` is the share of group ``a`` in the bin (an empty bin borrows the nearest
      non-empty bin's shares); each test score gets its bin's shares (nearest distinct value, or
      the quantile bin it falls in).

    The ``R`` weights therefore approximate ``P(A = a | R in bin)``: their error is the Monte
    Carlo standard error, about ``sqrt(p (1 - p) n_bins / n_monte_carlo)`` (0.005 at the
    defaults), plus, for continuous scores, the variation of ``P(A | R)`` within a bin.
    For selection settings all weights refer to the full (test) population.

    Parameters
    ----------
    setting_id : str
    test : pandas.DataFrame of shape (n_test, >= 3)
        The test set, columns ``x``, ``a``, ``y``; its row order defines ``row``.
    score_fns : mapping of str to callable
        ``model -> fn``; ``fn(frame)`` returns the scores, shape (n,), of a frame with the test
        set's columns (``x``, ``a``, ``y``). E.g. the fitted model's ``predict_proba`` column 1.
    test_scores : mapping of str to ndarray of shape (n_test,)
        The same models' scores on ``test``; must have the same keys as ``score_fns``.
    n_monte_carlo : int, default 1,000,000
        Monte Carlo sample size for ``P(A | R)``.
    n_bins : int, default 100
        Maximum number of score bins.
    seed : int
        The configured root seed.

    Returns
    -------
    pandas.DataFrame of shape ((2 + len(score_fns)) * n_test, 6)
        Long format of ``docs/design.md``: ``weight_source`` (``"oracle"``), ``control``
        (``X``, ``Y``, ``R``), ``model`` (``"*"`` for X and Y), ``row`` (int64), ``p_0``, ``p_1``
        (float64, rows sum to 1). Blocks in the order X, Y, then ``score_fns`` order.

    Raises
    ------
    ValueError
        If ``setting_id`` is unknown, a column is missing, the keys of ``score_fns`` and
        ``test_scores`` differ, a score array has the wrong shape or non-finite values, or a size
        is not a positive integer.
    """
    dgp = get_dgp(setting_id)
    _check_columns(test, ("x", "a", "y"), "test")
    n_monte_carlo = _check_positive_int("n_monte_carlo", n_monte_carlo)
    n_bins = _check_positive_int("n_bins", n_bins)
    if set(score_fns) != set(test_scores):
        raise ValueError(
            f"score_fns and test_scores must have the same models; got {sorted(score_fns)} "
            f"and {sorted(test_scores)}"
        )
    n_test = len(test)
    checked: dict[str, np.ndarray] = {}
    for model in score_fns:
        scores = np.asarray(test_scores[model], dtype=np.float64)
        if scores.shape != (n_test,):
            raise ValueError(
                f"test_scores[{model!r}] must have shape ({n_test},) (one score per test row); "
                f"got {scores.shape}"
            )
        if not np.isfinite(scores).all():
            raise ValueError(f"test_scores[{model!r}] has non-finite values")
        checked[model] = scores

    rows = np.arange(n_test, dtype=np.int64)
    blocks: list[tuple[str, str, np.ndarray]] = [
        ("X", "*", dgp.p_a_given_x(test["x"].to_numpy(dtype=np.float64))),
        ("Y", "*", dgp.p_a_given_y(test["y"].to_numpy())),
    ]
    if score_fns:
        monte_carlo = dgp.sample(n_monte_carlo, seeds.generator(seed, "oracle", setting_id, "monte_carlo"))
        mc_groups = monte_carlo["a"].to_numpy()
        for model, fn in score_fns.items():
            mc_scores = np.asarray(fn(monte_carlo), dtype=np.float64)
            if mc_scores.shape != (n_monte_carlo,) or not np.isfinite(mc_scores).all():
                raise ValueError(
                    f"score_fns[{model!r}] must return {n_monte_carlo} finite scores; "
                    f"got shape {mc_scores.shape}"
                )
            shares = _binned_group_shares(mc_scores, mc_groups, checked[model], n_bins=n_bins)
            blocks.append(("R", model, shares))

    frames = [
        pd.DataFrame(
            {
                "weight_source": "oracle",
                "control": control,
                "model": model,
                "row": rows,
                "p_0": probs[:, 0].astype(np.float64),
                "p_1": probs[:, 1].astype(np.float64),
            }
        )
        for control, model, probs in blocks
    ]
    out = pd.concat(frames, ignore_index=True)
    out["weight_source"] = out["weight_source"].astype(str)
    out["control"] = out["control"].astype(str)
    out["model"] = out["model"].astype(str)
    return out
