"""What an audit says beside its intervals where they are weaker than their level (``docs/audit.md``,
"Intervals that need a note").

- :func:`log_loss_note`: rows whose log loss is capped by the clipping (a score of exactly 0 or 1 with the
  other label costs :data:`~disaggregated_eval.engine.sums.LOG_LOSS_CAP` = 36.04 nats, not infinity);
- :func:`small_bootstrap_note` and :func:`small_bootstrap`: the bootstrap (BCa) intervals of log loss,
  Brier score and net benefit on slices under :data:`SMALL_BOOTSTRAP_ROWS` rows, which the validity study
  found slightly too narrow, and whose simultaneous bands miss their joint level;
- :func:`disagreement_notes`: the ``note`` of a comparison whose interval and test disagree at the audit's
  level (the interval excludes 0 and the test's p-value is at least ``alpha``, or the reverse).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..engine.sums import LOG_LOSS_CAP, log_loss_capped
from ..vocabulary import METRIC_LABELS, OVERALL

__all__ = [
    "SMALL_BOOTSTRAP_ROWS",
    "SMALL_BOOTSTRAP_METRICS",
    "log_loss_note",
    "small_bootstrap",
    "small_bootstrap_note",
    "disagreement_notes",
]

#: Slices with fewer rows than this get the rule beside the intervals of :data:`SMALL_BOOTSTRAP_METRICS`: in the
#: validity study (part a) their BCa intervals covered 91-93% at 30-60 rows and 93.6% or more from 120, and a
#: band over slices of 30-60 rows held 90-91% jointly (part d; goal 94%).
SMALL_BOOTSTRAP_ROWS: int = 120
#: The metrics whose bootstrap intervals fell short at 30-60 rows (the other BCa metrics, mean predicted risk and
#: the observed/expected ratio, kept their level there).
SMALL_BOOTSTRAP_METRICS: tuple[str, ...] = ("log_loss", "brier_score", "net_benefit")


def log_loss_note(
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    weight: np.ndarray | None,
    model_names: Sequence[str],
    count: np.ndarray | None = None,
) -> list[str]:
    """A note per model with rows whose log loss the clipping caps (none when no row is capped).

    Parameters
    ----------
    y : ndarray of shape (n_rows,)
        Labels 0/1.
    scores : sequence of ndarray of shape (n_rows,)
        Each model's scores.
    weight : ndarray of shape (n_rows,) or None
        Sample weights (rows of weight 0 are not counted).
    model_names : sequence of str
    count : ndarray of shape (n_rows,), optional
        Rows each row stands for (frequency weights).

    Returns
    -------
    list of str

    Examples
    --------
    >>> log_loss_note(np.array([1.0, 0.0, 0.0]), [np.array([0.0, 1.0, 0.2])], None, ["m"])[0][:73]
    'log loss of m: 2 rows have a score of exactly 0 or 1 with the other label'
    """
    n = y.shape[0]
    stands_for = np.ones(n) if count is None else np.asarray(count, dtype=np.float64)
    inside = np.ones(n, dtype=bool) if weight is None else weight > 0
    notes = []
    for name, r in zip(model_names, scores, strict=True):
        k = round(float(stands_for[log_loss_capped(y, r) & inside].sum()))
        if k:
            notes.append(
                f"log loss of {name}: {k:,} row{'s have' if k != 1 else ' has'} a score of exactly 0 or 1 with the "
                f"other label; each costs {LOG_LOSS_CAP:.2f} nats, not infinity (scores are clipped to "
                "[eps, 1 - eps], eps = 2.2e-16, as scikit-learn does), so a slice's log loss is dominated by such "
                "rows, and a bootstrap interval of a small slice may not see them: read it with the slice's "
                "permutation test (docs/method.md, 'Log loss: the clipping')"
            )
    return notes


def small_bootstrap(metric: str, n: np.ndarray, reported: np.ndarray) -> np.ndarray:
    """Which slices' intervals of ``metric`` get the small-slice rule: reported slices under
    :data:`SMALL_BOOTSTRAP_ROWS` rows, for the metrics of :data:`SMALL_BOOTSTRAP_METRICS`.

    Examples
    --------
    >>> small_bootstrap("log_loss", np.array([31, 119, 120, 20]), np.array([True, True, True, False]))
    array([ True,  True, False, False])
    >>> small_bootstrap("auc", np.array([31]), np.array([True]))
    array([False])
    """
    n = np.asarray(n)
    if metric not in SMALL_BOOTSTRAP_METRICS:
        return np.zeros(n.shape, dtype=bool)
    return np.asarray(reported, dtype=bool) & (n < SMALL_BOOTSTRAP_ROWS)


def small_bootstrap_note(slices: pd.DataFrame) -> list[str]:
    """The note on the intervals and bands of :data:`SMALL_BOOTSTRAP_METRICS` over reported slices under
    :data:`SMALL_BOOTSTRAP_ROWS` rows (none when the audit has no such interval).

    Parameters
    ----------
    slices : pandas.DataFrame
        The audit's ``slices`` table.

    Returns
    -------
    list of str
    """
    rows = slices[slices["metric"].isin(SMALL_BOOTSTRAP_METRICS) & (slices["slice"] != OVERALL)]
    small = rows[small_bootstrap(SMALL_BOOTSTRAP_METRICS[0], rows["n"].to_numpy(), rows["reported"].to_numpy())]
    if small.empty:
        return []
    metrics = [METRIC_LABELS.get(m, m) for m in SMALL_BOOTSTRAP_METRICS if m in set(small["metric"])]
    names = list(pd.unique(small["slice"]))
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return [
        f"{', '.join(metrics)}: the bootstrap (BCa) intervals of {len(names)} reported slice(s) under "
        f"{SMALL_BOOTSTRAP_ROWS} rows ({shown}; '~' in the terminal) are slightly too narrow: they covered 91-93% "
        "at 30-60 rows in the audit's validity study (95% intervals), and a simultaneous band over such slices "
        "held 90-91% jointly; read them as descriptive and check a difference with its permutation test "
        "(docs/audit.md, 'Intervals that need a note')"
    ]


def disagreement_notes(low: np.ndarray, high: np.ndarray, p_value: np.ndarray, alpha: float) -> np.ndarray:
    """The ``note`` of each comparison: where its interval and its own test disagree at level ``alpha``.

    The interval of the difference excludes 0 while the test's p-value is at least ``alpha``, or includes it while
    the p-value is below ``alpha``. The two answer different questions (the interval: a bootstrap of the
    difference; the test: permutations of the rows under exchangeability, within bins of the score for the
    observed/expected ratio) and the bootstrap of a small slice may miss a tail, e.g. the capped rows of a
    log loss. The verdict follows the test. Empty where they agree or where either is missing.

    Parameters
    ----------
    low, high : ndarray of shape (k,)
        The comparisons' interval (NaN: none).
    p_value : ndarray of shape (k,)
        Their tests' p-values, unadjusted (NaN: none).
    alpha : float
        ``1 - confidence``: the interval's level and the test's.

    Returns
    -------
    ndarray of shape (k,), object (str)

    Examples
    --------
    >>> disagreement_notes(np.array([0.02, -0.1, 0.01]), np.array([0.3, 0.1, 0.2]), np.array([0.31, 0.01, 0.001]),
    ...                    0.05)  # doctest: +NORMALIZE_WHITESPACE
    array(['interval excludes 0 but the test gives p = 0.31 >= 0.05 (the verdict follows the test)',
           'interval includes 0 but the test gives p = 0.01 < 0.05 (the verdict follows the test)', ''],
          dtype=object)
    """
    low, high, p_value = (np.asarray(a, dtype=np.float64) for a in (low, high, p_value))
    known = np.isfinite(low) & np.isfinite(high) & np.isfinite(p_value)
    excludes = (low > 0.0) | (high < 0.0)
    significant = p_value < alpha
    out = np.full(low.shape, "", dtype=object)
    for i in np.flatnonzero(known & (excludes != significant)):
        side = ("excludes", ">=") if excludes[i] else ("includes", "<")
        out[i] = (
            f"interval {side[0]} 0 but the test gives p = {p_value[i]:.2g} {side[1]} {alpha:g} "
            "(the verdict follows the test)"
        )
    return out
