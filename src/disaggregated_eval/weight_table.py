"""The long table of weights ``P(A = a | V)``: its layout, how to build it, how to read it.

One home for the table that the weight stage writes and the evaluation reads (``docs/design.md``,
weight stage): one row per (weight source, control, model, evaluated row), columns

``weight_source`` (``estimated`` or ``oracle``), ``control`` (``X``, ``Y``, ``R``), ``model``
(the model type for ``R``; ``"*"`` for ``X`` and ``Y``, which do not depend on the model), ``row``
(int64 row of the evaluated set), ``p_0 .. p_{K-1}`` (float64, ``P(A = k | V)``; rows sum to 1).

Estimated weights follow paper Algorithm 2, oracle weights Algorithm 1; the shared-space weights of
Cai et al. derived from them are paper Supplementary A.1. See ``docs/method.md``, "Weights".
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from . import vocabulary
from .validation import check_choice

__all__ = [
    "KEY_COLUMNS",
    "ANY_MODEL",
    "probability_columns",
    "weight_table",
    "concat_weight_tables",
    "weight_matrix",
    "shared_space_weights",
]

#: Key columns of the long weight table, in order; ``p_0 .. p_{K-1}`` follow.
KEY_COLUMNS: tuple[str, ...] = ("weight_source", "control", "model", "row")
#: ``model`` entry of the weights that do not depend on the model (controls X and Y).
ANY_MODEL = "*"


def probability_columns(n_groups: int) -> list[str]:
    """``["p_0", ..., "p_{K-1}"]``, the probability columns for ``n_groups`` subgroups."""
    return [f"p_{k}" for k in range(n_groups)]


def weight_table(proba: np.ndarray, *, weight_source: str, control: str, model: str = ANY_MODEL) -> pd.DataFrame:
    """One block of the long weight table: ``P(A = k | V)`` of every evaluated row.

    Parameters
    ----------
    proba : ndarray of shape (n_rows, n_groups)
        Row ``i`` holds ``P(A = k | V)`` of evaluated row ``i``.
    weight_source : {"estimated", "oracle"}
    control : {"X", "Y", "R"}
    model : str, default "*"
        The model type whose score ``R`` is controlled for; must be ``"*"`` for X and Y.

    Returns
    -------
    pandas.DataFrame of shape (n_rows, 4 + n_groups)
        Columns :data:`KEY_COLUMNS` and ``p_0 .. p_{K-1}``.

    Raises
    ------
    ValueError
        If ``proba`` is not two-dimensional, the source or control is unknown, or ``model`` does not
        match the control.
    """
    check_choice(weight_source, "weight_source", vocabulary.WEIGHT_SOURCES)
    check_choice(control, "control", vocabulary.WEIGHT_CONTROLS)
    if (control == "R") == (model == ANY_MODEL):
        raise ValueError(
            f"model must be a model type for control 'R' and {ANY_MODEL!r} for X and Y; got control {control!r}, model {model!r}"
        )
    proba = np.asarray(proba, dtype=np.float64)
    if proba.ndim != 2:
        raise ValueError(f"proba must have shape (n_rows, n_groups); got {proba.shape}")
    frame = pd.DataFrame(
        {
            "weight_source": pd.Series([weight_source] * proba.shape[0], dtype=str),
            "control": pd.Series([control] * proba.shape[0], dtype=str),
            "model": pd.Series([model] * proba.shape[0], dtype=str),
            "row": np.arange(proba.shape[0], dtype=np.int64),
        }
    )
    for k, column in enumerate(probability_columns(proba.shape[1])):
        frame[column] = proba[:, k]
    return frame


def concat_weight_tables(blocks: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Stack blocks of :func:`weight_table` (in order), keeping the key columns as strings."""
    out = pd.concat(list(blocks), ignore_index=True)
    for column in ("weight_source", "control", "model"):
        out[column] = out[column].astype(str)
    return out


def weight_matrix(
    weights: pd.DataFrame, *, weight_source: str, control: str, model: str, n_rows: int, n_groups: int
) -> np.ndarray:
    """Extract ``P(A = k | V)`` as an ``(n_rows, n_groups)`` array from a long weight table.

    Parameters
    ----------
    weights : pandas.DataFrame
        Long weight table (module docstring). Rows for ``V`` in {X, Y} have ``model == "*"``.
    weight_source, control, model : str
        Which weights to extract. For ``control`` X or Y the ``model`` entry ``"*"`` is used.
    n_rows, n_groups : int
        Expected number of evaluated rows and of subgroups.

    Returns
    -------
    ndarray of shape (n_rows, n_groups)
        Row ``i`` holds the weights of evaluated row ``i``.

    Raises
    ------
    ValueError
        If the table has no such weights, does not cover every row exactly once, lacks a ``p_k``
        column, holds values outside [0, 1] or NaN, or a row does not sum to 1.
    """
    missing_keys = [c for c in KEY_COLUMNS if c not in weights.columns]
    if missing_keys:
        raise ValueError(f"weight table lacks the columns {missing_keys}")
    model_key = model if control == "R" else ANY_MODEL
    sel = weights[
        (weights["weight_source"] == weight_source) & (weights["control"] == control) & (weights["model"] == model_key)
    ]
    if sel.empty:
        raise ValueError(
            f"no {weight_source} weights for control {control!r} and model {model_key!r} in the "
            f"weight table; it has {sorted(set(zip(weights['weight_source'], weights['control'], weights['model'])))}"
        )
    rows = sel["row"].to_numpy()
    if len(rows) != n_rows or not np.array_equal(np.sort(rows), np.arange(n_rows)):
        present, counts = np.unique(rows, return_counts=True)
        missing_rows = np.setdiff1d(np.arange(n_rows), present)
        extra = present[(present < 0) | (present >= n_rows)]
        repeated = present[counts > 1]
        raise ValueError(
            f"{weight_source} weights for control {control!r}, model {model_key!r} must cover test rows "
            f"0..{n_rows - 1} exactly once; got {len(rows)} rows (missing {missing_rows[:5].tolist()}"
            f"{'...' if len(missing_rows) > 5 else ''}, out of range {extra[:5].tolist()}, "
            f"repeated {repeated[:5].tolist()})"
        )
    cols = probability_columns(n_groups)
    missing = [c for c in cols if c not in sel.columns]
    if missing:
        raise ValueError(f"weight table lacks the columns {missing} for {n_groups} subgroups")
    out = np.empty((n_rows, n_groups), dtype=np.float64)
    out[rows] = sel[cols].to_numpy(dtype=np.float64)
    where = f"{weight_source} weights for control {control!r}, model {model_key!r}"
    if not np.all(np.isfinite(out)):
        bad = np.flatnonzero(~np.isfinite(out).all(axis=1))
        raise ValueError(f"{where} must be finite; rows {bad[:5].tolist()} hold NaN or inf")
    if out.min() < 0 or out.max() > 1:
        raise ValueError(f"{where} must be probabilities in [0, 1]; got min {float(out.min())}, max {float(out.max())}")
    # P(A = . | V) is a distribution over the K subgroups; 1e-6 allows float32 round-off.
    sums = out.sum(axis=1)
    off = np.flatnonzero(np.abs(sums - 1.0) > 1e-6)
    if off.size:
        raise ValueError(
            f"{where} must sum to 1 over the {n_groups} subgroups in every row; row {int(off[0])} "
            f"sums to {float(sums[off[0]])} ({off.size} rows off)"
        )
    return out


def shared_space_weights(p: np.ndarray, in_group: np.ndarray, share: float) -> np.ndarray:
    """Shared-space ("stable") weights of Cai et al. for one subgroup against the rest.

    Parameters
    ----------
    p : ndarray of shape (n_samples,)
        ``P(A = a | V)`` of every row, in [0, 1].
    in_group : ndarray of shape (n_samples,), bool
        Whether each row belongs to subgroup ``a``.
    share : float
        ``pi_a = P(A = a)``, the subgroup's share of the rows, in (0, 1).

    Returns
    -------
    ndarray of shape (n_samples,)
        ``(1 - p) / (pi_a (1 - p) + (1 - pi_a) p)`` on the rows of subgroup ``a`` and 0 elsewhere
        (paper Supplementary A.1 with ``a'`` = all other subgroups).
    """
    p = np.asarray(p, dtype=np.float64)
    denom = share * (1.0 - p) + (1.0 - share) * p
    w = np.divide(1.0 - p, denom, out=np.zeros_like(p), where=denom > 0)
    return np.where(in_group, w, 0.0)
