"""The paper's simulated data generating processes (DGPs) and their closed-form oracles.

Paper: Supplementary A.3.1 (DGPs), A.3 (sizes), A.2 (selection). Setting ids, display names and the
split into main and selection settings come from :mod:`disaggregated_eval.vocabulary`.

Two families, each with a binary subgroup ``A``, a binary label ``Y`` and a univariate covariate ``X``:

* causal direction (:class:`CausalDGP`): ``U ~ Bern(0.5)``, ``X | U=u ~ N(mu_u, 1)``,
  ``A = U`` if ``gamma_A = 1`` else ``A ~ Bern(0.5)`` independent of ``U``,
  ``Y | X, A=a ~ Bern(sigmoid(beta_a X + alpha_a))``;
* anticausal direction (:class:`AnticausalDGP`): ``A ~ Bern(0.5)``, ``Y | A=a ~ Bern(p_a)``,
  ``X | A=a, Y=y ~ N(mu_ay, 1)``. As in the authors' code, ``p_0 = P(Y=1 | A=0)`` (the paper's
  formula swaps the groups; see the README, "Where the paper and the code disagree").

and three selection variants of ``complex_causal_shift`` (:class:`SelectionDGP`, paper A.2) whose
training data are drawn from the population conditioned on ``S = 1``.

Every DGP has closed-form oracles derived by Bayes' rule from the closed-form joint density
``f(x, a, y)`` of ``(X, A, Y)``: ``E[Y | X, A]``, ``E[Y | X]``, ``P(A | X)``, ``P(A | Y)``,
``P(A)`` and the prevalences (numerical integrals with :func:`scipy.integrate.quad` where the
logistic-normal integral has no closed form). In every DGP ``X | A = a`` is a mixture of unit-variance
normals (:meth:`x_mixture`), so masses ``P(lo < X <= hi, A = a)`` are closed form too
(:meth:`mass_xa`). ``P(A | R)`` for a model score ``R`` follows from these by integration
(:mod:`disaggregated_eval.population`, which also assembles all oracle weights of a test set,
:func:`disaggregated_eval.population.oracle_weights`, paper Algorithm 1).

All randomness comes from :mod:`disaggregated_eval.seeds`; the global numpy RNG is never used.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pandas as pd
from scipy import integrate
from scipy.special import expit, log_expit, ndtr

from . import seeds, vocabulary
from .validation import check_binary_codes, check_choice, check_columns, check_positive_int

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
    "selected_test_set",
    "bayes_scores",
]

_LOG_HALF = math.log(0.5)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_QUAD_OPTIONS = {"epsabs": 1e-13, "epsrel": 1e-12, "limit": 200}
_SCORE_EPS = float(np.finfo(np.float64).eps)

#: A normal mixture ``sum_j w_j phi(x - m_j)``: pairs ``(w_j, m_j)`` (unit variances).
Mixture: TypeAlias = tuple[tuple[float, float], ...]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _log_normal_pdf(x: np.ndarray, mean: float) -> np.ndarray:
    """Log density of ``N(mean, 1)`` at ``x``."""
    return -0.5 * (x - mean) ** 2 - _LOG_SQRT_2PI


def _as_float_array(x: object) -> np.ndarray:
    return np.atleast_1d(np.asarray(x, dtype=np.float64))


def _normal_mass(lo: np.ndarray, hi: np.ndarray, mean: float) -> np.ndarray:
    """``P(lo < Z <= hi)`` for ``Z ~ N(mean, 1)``, from the tail nearer to the interval (no cancellation)."""
    a, b = lo - mean, hi - mean
    upper = a > 0  # both bounds in the upper tail: difference of survival functions
    return np.where(upper, ndtr(-a) - ndtr(-b), ndtr(b) - ndtr(a))


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
def _logit_y_given_xa(log_joint: np.ndarray) -> np.ndarray:
    """``logit P(Y = 1 | x, a)``, shape (n, 2)."""
    return log_joint[:, :, 1] - log_joint[:, :, 0]


def _logit_y_given_x(log_joint: np.ndarray) -> np.ndarray:
    """``logit P(Y = 1 | x)``, shape (n,)."""
    return np.logaddexp(log_joint[:, 0, 1], log_joint[:, 1, 1]) - np.logaddexp(log_joint[:, 0, 0], log_joint[:, 1, 0])


def _a_given_x(log_joint: np.ndarray) -> np.ndarray:
    log_xa = np.logaddexp(log_joint[:, :, 0], log_joint[:, :, 1])
    diff = log_xa[:, 1] - log_xa[:, 0]
    return np.column_stack([expit(-diff), expit(diff)])


class _BinaryDGP:
    """Oracles shared by all DGPs, derived from ``_log_joint`` by Bayes' rule.

    Subclasses provide ``setting_id``, ``_log_joint(x) -> ndarray (n, 2, 2)`` (log density of
    ``(X, A, Y)``), its derivative in ``x`` ``_dlog_joint(x)``, ``x_mixture()``, ``p_a()`` and
    ``prevalence(a)``.
    """

    setting_id: str

    @property
    def display_name(self) -> str:
        """The paper's name of the setting (:data:`disaggregated_eval.vocabulary.SETTING_LABELS`)."""
        return vocabulary.SETTING_LABELS.get(self.setting_id, self.setting_id)

    def _log_joint(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _dlog_joint(self, x: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _selected(self, log_joint: np.ndarray) -> np.ndarray:
        """The log joint density of the training population from the population's, up to a factor
        of ``x`` that cancels from every score (here: the population itself)."""
        return log_joint

    def _log_joint_selected(self, x: np.ndarray) -> np.ndarray:
        return self._selected(self._log_joint(x))

    def x_mixture(self) -> tuple[Mixture, Mixture]:  # pragma: no cover - abstract
        raise NotImplementedError

    def p_a(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def prevalence(self, a: int | None = None) -> float:  # pragma: no cover - abstract
        raise NotImplementedError

    # ---- densities of the (full) population ------------------------------------------------
    def log_density(self, x: object) -> np.ndarray:
        """``log f(x, a, y)``, the log joint density of ``(X, A, Y)`` in the population.

        Parameters
        ----------
        x : array-like of shape (n,)

        Returns
        -------
        ndarray of shape (n, 2, 2)
            Indexed ``[row, a, y]``; ``sum_{a, y} integral exp(.) dx = 1``.
        """
        return self._log_joint(_as_float_array(x))

    def mass_xa(self, lo: object, hi: object) -> np.ndarray:
        """``P(lo < X <= hi, A = a)`` in the population, from normal CDFs (:meth:`x_mixture`).

        Parameters
        ----------
        lo, hi : array-like of shape (n,)
            Interval bounds, ``lo <= hi``; ``-inf`` and ``inf`` are allowed.

        Returns
        -------
        ndarray of shape (n, 2)
            Column ``a`` holds the probability of ``A = a`` and ``X`` in the interval.
        """
        lo, hi = np.broadcast_arrays(_as_float_array(lo), _as_float_array(hi))
        out = np.zeros((lo.shape[0], 2))
        for a, components in enumerate(self.x_mixture()):
            for weight, mean in components:
                out[:, a] += weight * _normal_mass(lo, hi, mean)
        return out

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
        xs, codes = np.broadcast_arrays(_as_float_array(x), check_binary_codes(a, "a"))
        logit = _logit_y_given_xa(self._log_joint(np.ascontiguousarray(xs)))
        return expit(logit[np.arange(xs.shape[0]), codes])

    def p_y_given_x(self, x: object) -> np.ndarray:
        """Bayes-optimal subgroup-agnostic score ``E[Y | X = x] = sum_a E[Y | x, a] P(a | x)``.

        Parameters
        ----------
        x : array-like of shape (n,)

        Returns
        -------
        ndarray of shape (n,)
        """
        return expit(_logit_y_given_x(self._log_joint(_as_float_array(x))))

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
        labels = check_binary_codes(y, "y")
        prev = np.array([self.prevalence(0), self.prevalence(1)])
        joint1 = self.p_a() * prev  # P(A = a, Y = 1)
        joint0 = self.p_a() * (1.0 - prev)
        table = np.vstack([joint0 / joint0.sum(), joint1 / joint1.sum()])  # [y, a]
        return table[labels]

    # ---- Bayes-optimal scores in the training population -----------------------------------
    def bayes_logit(
        self, x: object, model: str, *, with_density: bool = False
    ) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Logit of a Bayes-optimal score of the training population and its derivative in ``x``.

        ``bayes_xa``: ``logit E[Y | X = x, A = a, S = 1]``; ``bayes_x``: ``logit E[Y | X = x, S = 1]``
        (the same for both groups). Without selection ``S = 1`` always holds. The derivative is
        analytic (chain rule through the log joint density; the selection factors do not depend
        on ``x`` or cancel), used for the change of variables ``x -> R`` of the oracle ``P(A | R)``.

        Parameters
        ----------
        x : array-like of shape (n,)
        model : {"bayes_x", "bayes_xa"}
        with_density : bool, default False
            Also return ``log f(x, a)``, the log density of ``(X, A)`` in the (full) population.

        Returns
        -------
        value, slope : ndarray of shape (n, 2)
            Column ``a``: the logit score of a row of group ``a`` at ``x`` and its ``d/dx``.
        log_density : ndarray of shape (n, 2)
            Only with ``with_density``: column ``a`` holds ``log f(x, a)``.

        Raises
        ------
        ValueError
            If ``model`` is not a Bayes-optimal model.
        """
        check_choice(model, "model", vocabulary.BAYES_MODELS)
        xs = _as_float_array(x)
        population = self._log_joint(xs)
        log_joint = self._selected(population)
        dlog_joint = self._dlog_joint(xs)
        if model == "bayes_xa":
            value, slope = _logit_y_given_xa(log_joint), dlog_joint[:, :, 1] - dlog_joint[:, :, 0]
        else:
            logit = _logit_y_given_x(log_joint)
            # d/dx log sum_a exp(L_a) = sum_a softmax(L)_a dL_a, for y = 1 and y = 0
            share1 = expit(log_joint[:, 1, 1] - log_joint[:, 0, 1])
            share0 = expit(log_joint[:, 1, 0] - log_joint[:, 0, 0])
            d = (
                (1.0 - share1) * dlog_joint[:, 0, 1]
                + share1 * dlog_joint[:, 1, 1]
                - (1.0 - share0) * dlog_joint[:, 0, 0]
                - share0 * dlog_joint[:, 1, 0]
            )
            value, slope = np.column_stack([logit, logit]), np.column_stack([d, d])
        if with_density:
            return value, slope, np.logaddexp(population[:, :, 0], population[:, :, 1])
        return value, slope

    def selected_p_y_given_xa(self, x: object, a: object) -> np.ndarray:
        """``E[Y | X, A, S = 1]``: the Bayes-optimal subgroup-aware score of the training population.

        Without selection this is :meth:`p_y_given_xa`. Shapes as there.
        """
        xs, codes = np.broadcast_arrays(_as_float_array(x), check_binary_codes(a, "a"))
        logit = _logit_y_given_xa(self._log_joint_selected(np.ascontiguousarray(xs)))
        return expit(logit[np.arange(xs.shape[0]), codes])

    def selected_p_y_given_x(self, x: object) -> np.ndarray:
        """``E[Y | X, S = 1]``: the Bayes-optimal subgroup-agnostic score of the training population.

        Without selection this is :meth:`p_y_given_x`. Shapes as there.
        """
        return expit(_logit_y_given_x(self._log_joint_selected(_as_float_array(x))))


# --------------------------------------------------------------------------------------------
# causal direction
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CausalDGP(_BinaryDGP):
    """Causal-direction DGP (paper Supplementary A.3.1).

    ``U ~ Bern(0.5)``; ``X | U=u ~ N(mu_u, 1)``; ``A = U`` if ``gamma_a = 1``, else
    ``A ~ Bern(0.5)`` independent of ``U``; ``Y | X, A=a ~ Bern(sigmoid(beta_a X + alpha_a))``.

    Parameters
    ----------
    setting_id : str
        Registry id (file-name safe); its display name is in :mod:`~disaggregated_eval.vocabulary`.
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
        n = check_positive_int(n, "n")
        u = (rng.random(n) < 0.5).astype(np.int64)
        x = rng.normal(loc=np.asarray(self.mu, dtype=np.float64)[u], scale=1.0)
        a = u if self.gamma_a == 1 else (rng.random(n) < 0.5).astype(np.int64)
        p = expit(np.asarray(self.beta)[a] * x + np.asarray(self.alpha)[a])
        y = (rng.random(n) < p).astype(np.int64)
        return _frame(x, a, y)

    def _log_xa(self, x: np.ndarray) -> np.ndarray:
        l0 = _log_normal_pdf(x, self.mu[0])
        l1 = _log_normal_pdf(x, self.mu[1])
        if self.gamma_a == 1:
            return np.column_stack([_LOG_HALF + l0, _LOG_HALF + l1])
        mix = _LOG_HALF + _LOG_HALF + np.logaddexp(l0, l1)
        return np.column_stack([mix, mix])

    def _logits(self, x: np.ndarray) -> np.ndarray:
        return np.column_stack([self.beta[0] * x + self.alpha[0], self.beta[1] * x + self.alpha[1]])

    def _log_joint(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        log_xa = self._log_xa(x)
        z = self._logits(x)
        out = np.empty((x.shape[0], 2, 2))
        out[:, :, 1] = log_xa + log_expit(z)
        out[:, :, 0] = log_xa + log_expit(-z)
        return out

    def _dlog_joint(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if self.gamma_a == 1:
            dlog_xa = np.column_stack([self.mu[0] - x, self.mu[1] - x])
        else:  # d/dx log(phi(x - mu_0) + phi(x - mu_1)) = E[mu_U | x] - x
            share1 = expit(_log_normal_pdf(x, self.mu[1]) - _log_normal_pdf(x, self.mu[0]))
            d = (1.0 - share1) * self.mu[0] + share1 * self.mu[1] - x
            dlog_xa = np.column_stack([d, d])
        z = self._logits(x)
        beta = np.asarray(self.beta, dtype=np.float64)
        out = np.empty((x.shape[0], 2, 2))
        out[:, :, 1] = dlog_xa + beta * expit(-z)  # d log sigmoid(z) = beta sigmoid(-z)
        out[:, :, 0] = dlog_xa - beta * expit(z)
        return out

    def x_mixture(self) -> tuple[Mixture, Mixture]:
        """``f(x, a)`` as normal mixtures: ``0.5 phi(x - mu_a)`` or ``0.25 sum_u phi(x - mu_u)``."""
        if self.gamma_a == 1:
            return ((0.5, float(self.mu[0])),), ((0.5, float(self.mu[1])),)
        both = ((0.25, float(self.mu[0])), (0.25, float(self.mu[1])))
        return both, both

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
        a = int(check_binary_codes(a, "a")[0])
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
        a = int(check_binary_codes(a, "a")[0])
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
    """Anticausal-direction DGP (paper Supplementary A.3.1, following the authors' code).

    ``A ~ Bern(0.5)``; ``Y | A=a ~ Bern(p_a)``; ``X | A=a, Y=y ~ N(mu_ay, 1)``.

    Parameters
    ----------
    setting_id : str
    p_y : tuple of 2 float
        ``(p_0, p_1)`` with ``p_a = P(Y = 1 | A = a)`` (the code's convention; the paper's formula
        swaps the groups).
    mu : tuple of 2 tuples of 2 float
        ``mu[a][y]``, the mean of ``X | A=a, Y=y``.

    Notes
    -----
    ``f(x, a, y) = 0.5 p_a^y (1 - p_a)^(1-y) phi(x - mu_ay)``; all oracles follow by Bayes' rule,
    e.g. ``logit P(Y = 1 | x, a) = logit p_a + (mu_a1 - mu_a0) x - (mu_a1^2 - mu_a0^2) / 2``, and
    ``P(A | X)`` mixes over ``Y``.
    """

    setting_id: str
    p_y: tuple[float, float]
    mu: tuple[tuple[float, float], tuple[float, float]]

    def __post_init__(self) -> None:
        if not all(0.0 < p < 1.0 for p in self.p_y):
            raise ValueError(f"p_y must lie in (0, 1); got {self.p_y!r}")

    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """Draw ``n`` i.i.d. rows; see :meth:`CausalDGP.sample` for shapes and ``Raises``."""
        n = check_positive_int(n, "n")
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

    def _dlog_joint(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        return np.asarray(self.mu, dtype=np.float64)[None, :, :] - x[:, None, None]

    def x_mixture(self) -> tuple[Mixture, Mixture]:
        """``f(x, a) = 0.5 ((1 - p_a) phi(x - mu_a0) + p_a phi(x - mu_a1))`` as normal mixtures."""
        return tuple(  # type: ignore[return-value]
            ((0.5 * (1.0 - self.p_y[a]), float(self.mu[a][0])), (0.5 * self.p_y[a], float(self.mu[a][1])))
            for a in (0, 1)
        )

    def p_a(self) -> np.ndarray:
        """``P(A = a)``, shape (2,): ``(0.5, 0.5)``."""
        return np.array([0.5, 0.5])

    def mean_x_given_a(self, a: int) -> float:
        """``E[X | A = a] = p_a mu_a1 + (1 - p_a) mu_a0``."""
        a = int(check_binary_codes(a, "a")[0])
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
        return float(self.p_y[int(check_binary_codes(a, "a")[0])])


# --------------------------------------------------------------------------------------------
# selection variants
# --------------------------------------------------------------------------------------------
def _draw_and_filter(draw: Callable[[int], pd.DataFrame], n: int, rate: float) -> tuple[pd.DataFrame, int]:
    """Keep the first ``n`` rows with ``s == 1`` of successive chunks ``draw(size)`` (paper A.3).

    Chunks are sized to hold about 1.1 times the missing rows at the expected kept share ``rate``
    (at least 1,024 and at most 5,000,000 rows). Returns the kept rows (without ``s``, index
    ``0..n-1``) and the number of drawn rows up to and including the ``n``-th kept one.
    """
    parts: list[pd.DataFrame] = []
    kept, drawn = 0, 0
    while kept < n:
        need = n - kept
        size = int(min(max(math.ceil(1.1 * need / rate) + 100, 1024), 5_000_000))
        chunk = draw(size)
        hits = np.flatnonzero(chunk["s"].to_numpy() == 1)
        if hits.size >= need:  # the chunk completes the sample: stop at its need-th kept row
            drawn += int(hits[need - 1]) + 1
            parts.append(chunk.iloc[hits[:need]])
            kept = n
        else:
            drawn += size
            parts.append(chunk.iloc[hits])
            kept += hits.size
    return pd.concat(parts, ignore_index=True).drop(columns="s"), drawn


@dataclass(frozen=True)
class SelectionDGP(_BinaryDGP):
    """A DGP whose training population is the base population conditioned on ``S = 1``.

    Paper Supplementary A.2 and A.3.1. The model is built in four named steps, one section each:

    1. *who is kept*: ``S | X, A, Y ~ Bern(s(X, A, Y))`` with the factorised probability
       ``s(x, a, y) = clip(1 - x_curvature * x^2, 0, 1) * s_ay[a][y]`` (:meth:`selection_probability`);
    2. *how many are kept*: ``P(S = 1) = E[s(X, A, Y)]`` (:meth:`p_selected`);
    3. *the training sample*: draw population rows and keep those with ``S = 1``
       (:meth:`sample_selected`); the test sample is the population itself (:meth:`sample`);
    4. *the training population's Bayes scores*: ``E[Y | X, A, S = 1]`` and ``E[Y | X, S = 1]``
       (:meth:`selected_p_y_given_xa`, :meth:`selected_p_y_given_x`, :meth:`bayes_logit`).

    Every population oracle (``p_y_given_xa``, ``p_a_given_x``, ``prevalence``, densities, ...)
    is the base DGP's.

    Parameters
    ----------
    setting_id : str
    base : CausalDGP or AnticausalDGP
        The full (target) population.
    s_ay : tuple of 2 tuples of 2 float
        ``s_ay[a][y]`` in (0, 1], the factor of ``s`` that depends on ``(A, Y)``.
    x_curvature : float
        ``c >= 0`` in the factor ``clip(1 - c x^2, 0, 1)`` that depends on ``X`` (0: no factor).
        For ``selection_x``, ``c = 4/25``: the paper's ``1 - (4/25) X^2`` is negative for
        ``|X| > 2.5`` and is clipped to 0 there.

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
    base: CausalDGP | AnticausalDGP
    s_ay: tuple[tuple[float, float], tuple[float, float]] = ((1.0, 1.0), (1.0, 1.0))
    x_curvature: float = 0.0

    def __post_init__(self) -> None:
        if not all(0.0 < s <= 1.0 for row in self.s_ay for s in row):
            raise ValueError(f"s_ay entries must lie in (0, 1]; got {self.s_ay!r}")
        if self.x_curvature < 0:
            raise ValueError(f"x_curvature must be non-negative; got {self.x_curvature!r}")

    # ---- step 1: who is kept -----------------------------------------------------------------
    def selection_probability(self, x: object, a: object, y: object) -> np.ndarray:
        """``s(x, a, y) = P(S = 1 | X = x, A = a, Y = y)``.

        Parameters
        ----------
        x : array-like of shape (n,)
        a, y : array-like of shape (n,) or scalar, values 0/1

        Returns
        -------
        ndarray of shape (n,)
            Values in [0, 1]; for ``selection_x``, ``clip(1 - (4/25) x^2, 0, 1)``.

        Raises
        ------
        ValueError
            If ``a`` or ``y`` has values other than 0/1.
        """
        xs, codes, labels = np.broadcast_arrays(
            _as_float_array(x), check_binary_codes(a, "a"), check_binary_codes(y, "y")
        )
        return self._x_factor(xs) * np.asarray(self.s_ay, dtype=np.float64)[codes, labels]

    def _x_factor(self, x: np.ndarray) -> np.ndarray:
        if self.x_curvature == 0.0:
            return np.ones_like(x, dtype=np.float64)
        return np.clip(1.0 - self.x_curvature * np.asarray(x, dtype=np.float64) ** 2, 0.0, 1.0)

    # ---- step 2: how many are kept -----------------------------------------------------------
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

    # ---- step 3: the training and test samples -------------------------------------------
    def sample(self, n: int, rng: np.random.Generator) -> pd.DataFrame:
        """Draw ``n`` rows from the full population (no selection): the test data (paper A.3)."""
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
        n = check_positive_int(n, "n")
        return _draw_and_filter(lambda size: self.sample_with_selection(size, rng), n, self.p_selected())

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

    # ---- step 4: the training population's Bayes scores -----------------------------------
    def _selected(self, log_joint: np.ndarray) -> np.ndarray:
        # log f(x, a, y) + log s_ay[a][y]; the X factor of s is common to all (a, y) and cancels.
        return log_joint + np.log(np.asarray(self.s_ay, dtype=np.float64))[None, :, :]

    # ---- the population (test data) is the base population ----------------------------------
    def _log_joint(self, x: np.ndarray) -> np.ndarray:
        return self.base._log_joint(x)

    def _dlog_joint(self, x: np.ndarray) -> np.ndarray:
        return self.base._dlog_joint(x)

    def x_mixture(self) -> tuple[Mixture, Mixture]:
        """``f(x, a)`` of the full population (the base DGP's)."""
        return self.base.x_mixture()

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

_COMPLEX_CAUSAL = CausalDGP("complex_causal_shift", mu=(-2.0, 0.0), gamma_a=1, beta=(0.5, -1.0), alpha=(0.1, 0.0))

#: All simulation settings in the order of :data:`disaggregated_eval.vocabulary.SETTINGS`: the
#: main settings in the paper's order (Supplementary A.3.1), then the selection variants (A.2).
SETTINGS: dict[str, DGP] = {
    d.setting_id: d
    for d in (
        CausalDGP("covariate_shift", mu=(-2.0, 0.0), gamma_a=1, beta=(0.5, 0.5), alpha=(0.0, 0.0)),
        CausalDGP("outcome_shift", mu=(-2.0, 0.0), gamma_a=0, beta=(0.5, -1.0), alpha=(0.1, 0.0)),
        _COMPLEX_CAUSAL,
        CausalDGP("low_overlap_causal", mu=(-2.0, 2.0), gamma_a=1, beta=(0.5, -1.0), alpha=(0.1, 0.0)),
        AnticausalDGP("anticausal_label_shift", p_y=(0.5, 0.1), mu=((-1.0, 1.0), (-1.0, 1.0))),
        AnticausalDGP("anticausal_presentation_shift", p_y=(0.5, 0.5), mu=((1.0, 0.0), (-1.0, 1.0))),
        AnticausalDGP("complex_anticausal_shift", p_y=(0.5, 0.1), mu=((1.0, 0.0), (-1.0, 1.0))),
        SelectionDGP("selection_x", base=_COMPLEX_CAUSAL, x_curvature=4.0 / 25.0),
        SelectionDGP("selection_y", base=_COMPLEX_CAUSAL, s_ay=((0.4, 0.8), (0.4, 0.8))),
        SelectionDGP("selection_ya", base=_COMPLEX_CAUSAL, s_ay=((0.8, 0.5), (0.8, 0.25))),
    )
}
if tuple(SETTINGS) != vocabulary.SETTINGS:  # pragma: no cover - guards the one home of setting ids
    raise ImportError(f"simulate.SETTINGS {tuple(SETTINGS)} differ from vocabulary.SETTINGS {vocabulary.SETTINGS}")

#: The seven main settings (no selection), in the paper's order.
MAIN_SETTINGS: tuple[str, ...] = vocabulary.MAIN_SETTINGS
#: The selection variants of ``complex_causal_shift``.
SELECTION_SETTINGS: tuple[str, ...] = vocabulary.SELECTION_SETTINGS


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
        raise ValueError(f"unknown simulation setting {setting_id!r}; valid settings: {', '.join(SETTINGS)}") from None


# --------------------------------------------------------------------------------------------
# pipeline functions
# --------------------------------------------------------------------------------------------
def simulate_setting(setting_id: str, *, n_train: int, n_test: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Draw the training and test sets of one setting (paper Supplementary A.3).

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
    n_train = check_positive_int(n_train, "n_train")
    n_test = check_positive_int(n_test, "n_test")
    rng_train = seeds.generator(seed, "simulate", setting_id, "train")
    rng_test = seeds.generator(seed, "simulate", setting_id, "test")
    if isinstance(dgp, SelectionDGP):
        train = dgp.sample_selected(n_train, rng_train)
    else:
        train = dgp.sample(n_train, rng_train)
    return train, dgp.sample(n_test, rng_test)


def selected_test_set(setting_id: str, *, n_test: int, seed: int, replicate: int | None = None) -> pd.DataFrame:
    """A test set from the *selected* population ``P(X, A, Y | S = 1)`` of a selection setting.

    The evaluation a practitioner who holds only selected rows would run (issue 25; ``docs/method.md``,
    "Evaluation under selection"), next to the full-population test set of :func:`simulate_setting`.
    Drawn with :meth:`SelectionDGP.sample_selected` from its own seed branch, so that no existing
    draw changes: ``("simulate", setting_id, "test_selected")`` for the pipeline's set, or
    ``("selection", setting_id, "test", replicate)`` for replicate ``replicate`` of the selection
    study (:mod:`disaggregated_eval.selection_study`).

    Parameters
    ----------
    setting_id : str
        A selection setting (:data:`SELECTION_SETTINGS`).
    n_test : int
        Positive number of rows.
    seed : int
        The configured non-negative root seed.
    replicate : int, optional
        A replicate index of the selection study; None for the pipeline's set.

    Returns
    -------
    pandas.DataFrame of shape (n_test, 3)
        Columns ``x`` (float64), ``a``, ``y`` (int64 0/1).

    Raises
    ------
    ValueError
        If ``setting_id`` is not a selection setting, ``n_test`` is not a positive integer, or
        ``seed`` / ``replicate`` is negative.
    """
    dgp = get_dgp(setting_id)
    if not isinstance(dgp, SelectionDGP):
        raise ValueError(
            f"selected_test_set needs a selection setting ({', '.join(SELECTION_SETTINGS)}); got {setting_id!r}"
        )
    n_test = check_positive_int(n_test, "n_test")
    if replicate is None:
        rng = seeds.generator(seed, "simulate", setting_id, "test_selected")
    else:
        if isinstance(replicate, bool) or not isinstance(replicate, (int, np.integer)) or replicate < 0:
            raise ValueError(f"replicate must be a non-negative integer; got {replicate!r}")
        rng = seeds.generator(seed, "selection", setting_id, "test", int(replicate))
    return dgp.sample_selected(n_test, rng)


def bayes_scores(setting_id: str, df: pd.DataFrame) -> pd.DataFrame:
    """Bayes-optimal scores of the population the models are trained on.

    ``bayes_x = E[Y | X, S = 1]`` and ``bayes_xa = E[Y | X, A, S = 1]`` for selection settings
    (the "Bayes-optimal model fit in the selected population" of paper Table B2); for the main
    settings ``E[Y | X]`` and ``E[Y | X, A]``. Scores are clipped to ``[eps, 1 - eps]`` (``eps``
    the float64 machine epsilon) so that they lie in (0, 1).

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
    check_columns(df, ("x", "a"), "df")
    x = df["x"].to_numpy(dtype=np.float64)
    a = check_binary_codes(df["a"].to_numpy(), "a")
    log_joint = dgp._log_joint_selected(x)  # once for both scores
    out = pd.DataFrame(
        {
            "bayes_x": expit(_logit_y_given_x(log_joint)),
            "bayes_xa": expit(_logit_y_given_xa(log_joint)[np.arange(x.shape[0]), a]),
        }
    )
    return out.clip(_SCORE_EPS, 1.0 - _SCORE_EPS).astype(np.float64)
