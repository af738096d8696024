"""Controlled disaggregated evaluation as tidy tables.

For every model, this module asks the bootstrap engine (:mod:`disaggregated_eval.bootstrap`) for

* the **absolute** metric of every subgroup and of the whole population (unweighted);
* the **weighted population metric** ``M_a``: the metric over *all* test rows weighted by
  ``P(A = a | V)``, for each control variable ``V`` (paper section 4.2, Supplementary A.1);
* the **shared-space** subgroup metric of Cai et al.: the rows of subgroup ``a`` weighted by
  ``(1 - p) / (pi_a (1 - p) + (1 - pi_a) p)`` with ``p = P(A = a | V)`` and ``pi_a`` the share of
  subgroup ``a`` in the test set (paper A.1, subgroup ``a`` against the rest);

all on the same bootstrap resamples (a paired bootstrap), and derives from the per-resample values

* the **controlled difference** ``T_a = metric(A = a) - M_a`` (paper Algorithms 1 and 2), and
* the **relative** performance ``metric(model) - metric(reference model)`` (paper Figure B1),

each with its own percentile interval. With ``V = none``, ``M_a`` is the plain population metric and
``T_a`` the gap between a subgroup and the population.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .bootstrap import BootstrapResult, Evaluation, bootstrap_evaluations, percentile_interval
from .metrics import METRICS
from .weight_table import shared_space_weights, weight_matrix

__all__ = [
    "CONTROLS",
    "TIDY_COLUMNS",
    "controlled_evaluation",
    "shared_space_weights",
    "weight_matrix",
]

#: Control variables ``V`` in the order the paper plots them.
CONTROLS = ("none", "X", "Y", "R")

#: Columns of the tidy metrics table, in order.
TIDY_COLUMNS = (
    "study",
    "setting",
    "model",
    "reference",
    "comparison",
    "control",
    "weight_source",
    "group",
    "metric",
    "estimate",
    "ci_low",
    "ci_high",
    "n_resamples",
    "n_undefined",
)

_WEIGHT_KEY_COLUMNS = ("weight_source", "control", "model", "row")


@dataclass(frozen=True)
class _Key:
    model: str
    comparison: str
    control: str
    weight_source: str
    group: str
    reference: str = ""


def _validate(y, groups, scores, group_labels, relative_to, controls, weights):
    y = np.asarray(y)
    groups = np.asarray(groups)
    n = y.shape[0]
    if y.ndim != 1 or n == 0:
        raise ValueError(f"y must be a non-empty 1-d array; got shape {y.shape}")
    if groups.shape != (n,):
        raise ValueError(f"groups must have shape ({n},) like y; got {groups.shape}")
    if not np.issubdtype(groups.dtype, np.integer):
        if np.issubdtype(groups.dtype, np.floating) and np.all(groups == np.round(groups)):
            groups = groups.astype(np.int64)
        else:
            raise ValueError(f"groups must be integer codes 0..K-1; got dtype {groups.dtype}")
    k = len(group_labels)
    if k < 2:
        raise ValueError(f"group_labels must name at least 2 subgroups; got {list(group_labels)}")
    bad = sorted(set(np.unique(groups).tolist()) - set(range(k)))
    if bad:
        raise ValueError(f"group codes must be in 0..{k - 1} (one per group label); got {bad}")
    absent = sorted(set(range(k)) - set(np.unique(groups).tolist()))
    if absent:
        raise ValueError(
            f"every subgroup needs test rows; no rows for {[group_labels[a] for a in absent]}"
        )
    if not scores:
        raise ValueError("scores must map at least one model name to its scores")
    for name, s in scores.items():
        if np.asarray(s).shape != (n,):
            raise ValueError(f"scores[{name!r}] must have shape ({n},); got {np.asarray(s).shape}")
    for m, ref in (relative_to or {}).items():
        for name in (m, ref):
            if name not in scores:
                raise ValueError(
                    f"relative_to names model {name!r}, which is not in scores {sorted(scores)}"
                )
    unknown = [c for c in controls if c not in CONTROLS]
    if unknown:
        raise ValueError(f"controls must be among {CONTROLS}; got {unknown}")
    if any(c != "none" for c in controls):
        if weights is None or len(weights) == 0:
            raise ValueError(f"controls {[c for c in controls if c != 'none']} need a weight table")
        missing = [c for c in _WEIGHT_KEY_COLUMNS if c not in weights.columns]
        if missing:
            raise ValueError(f"weight table lacks the columns {missing}")
    return y, groups


def controlled_evaluation(
    y: np.ndarray,
    groups: np.ndarray,
    scores: Mapping[str, np.ndarray],
    *,
    weights: pd.DataFrame | None,
    group_labels: Sequence[str],
    relative_to: Mapping[str, str] | None = None,
    controls: Sequence[str] | None = None,
    metrics: Sequence[str] = METRICS,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int | np.random.SeedSequence,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
    shared_space: bool = True,
    batch_size: int | None = None,
    n_threads: int = 1,
    study: str = "",
    setting: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Disaggregated and controlled evaluation of several models with paired bootstrap intervals.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Binary labels (0/1) of the test rows.
    groups : ndarray of shape (n_samples,)
        Subgroup codes ``0 .. K-1`` (``K = len(group_labels)``); every subgroup must have rows.
    scores : mapping of str to ndarray of shape (n_samples,)
        Scores in [0, 1] of each model (e.g. ``{"x": ..., "xa": ...}``).
    weights : pandas.DataFrame or None
        Long weight table ``weight_source, control, model, row, p_0 .. p_{K-1}`` holding
        ``P(A = k | V)`` per test row (``docs/design.md``); X and Y weights have ``model == "*"``,
        R weights one block per model. May mix weight sources (``estimated``, ``oracle``). ``None``
        allows only ``controls=("none",)``.
    group_labels : sequence of str
        Display label of each subgroup code.
    relative_to : mapping of str to str, optional
        ``{model: reference}`` pairs for the relative comparison ``metric(model) -
        metric(reference)`` (paper Figure B1), e.g. ``{"xa": "x", "xa_stratified": "x"}``.
    controls : sequence of str, optional
        Control variables among ``("none", "X", "Y", "R")``. By default ``none`` plus every control
        present in ``weights``.
    metrics : sequence of str
        Metric names of :data:`disaggregated_eval.metrics.METRICS`.
    n_resamples : int
        Bootstrap resamples (paper: 10,000).
    confidence : float
        Level of the percentile intervals, in (0, 1).
    seed : int or numpy.random.SeedSequence
        Seed of the resamples; the same seed gives bit-identical tables.
    threshold, preference_threshold : float
        Decision threshold of ``Yhat`` and the net-benefit preference threshold (paper: 0.5).
    shared_space : bool
        Also report the Cai et al. shared-space weighted subgroup metrics.
    batch_size, n_threads, progress
        Passed to :func:`disaggregated_eval.bootstrap.bootstrap_evaluations`.
    study, setting : str
        Identifiers copied into the table.

    Returns
    -------
    pandas.DataFrame
        Tidy table with the columns :data:`TIDY_COLUMNS`: one row per (model, comparison, control,
        weight source, group, metric). ``comparison`` is one of ``"absolute"`` (unweighted metric of
        a subgroup or ``"overall"``), ``"weighted_population"`` (``M_a``),
        ``"controlled_difference"`` (``T_a``), ``"shared_space"`` (Cai et al.) and ``"relative"``
        (``model - reference``); ``weight_source`` is ``"none"`` for unweighted quantities. ``estimate`` is the value on the full test set (not the
        bootstrap mean); ``ci_low``/``ci_high`` the percentile interval over the resamples where
        the quantity is defined; ``n_undefined`` the number of resamples where it is not.

    Raises
    ------
    ValueError
        If labels, groups, scores, weights, controls or model names are inconsistent (the message
        names the offending value).

    Notes
    -----
    Weights are treated as fixed and travel with their rows (paper A.3). The whole test set is
    resampled, so subgroup sizes vary across resamples, as in the paper. Source: paper section 4.2,
    Algorithms 1-2, Supplementary A.1 and A.3.
    """
    if controls is None:
        present = set() if weights is None or len(weights) == 0 else set(weights["control"])
        controls = ("none",) + tuple(c for c in CONTROLS[1:] if c in present)
    controls = tuple(controls)
    y, groups = _validate(y, groups, scores, group_labels, relative_to, controls, weights)
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1); got {confidence!r}")
    n = y.shape[0]
    k = len(group_labels)
    models = list(scores)
    sources = [] if weights is None or len(weights) == 0 else sorted(set(weights["weight_source"]))
    in_group = [groups == a for a in range(k)]
    shares = [float(m.mean()) for m in in_group]

    evaluations: list[Evaluation] = []
    index: dict[_Key, int] = {}
    matrices: dict[tuple[str, str, str], np.ndarray] = {}

    def add(key: _Key, model: str, w: np.ndarray) -> None:
        index[key] = len(evaluations)
        evaluations.append(Evaluation(score=model, weights=np.ascontiguousarray(w, dtype=np.float64)))

    ones = np.ones(n)
    for m in models:
        add(_Key(m, "absolute", "none", "none", "overall"), m, ones)
        for a in range(k):
            add(_Key(m, "absolute", "none", "none", group_labels[a]), m, in_group[a].astype(np.float64))
        for source in sources:
            for control in controls:
                if control == "none":
                    continue
                # X and Y weights do not depend on the model: extract and check them once.
                key = (source, control, m if control == "R" else "*")
                if key not in matrices:
                    matrices[key] = weight_matrix(
                        weights, weight_source=source, control=control, model=m, n_rows=n, n_groups=k
                    )
                p = matrices[key]
                for a in range(k):
                    add(_Key(m, "weighted_population", control, source, group_labels[a]), m, p[:, a])
                    if shared_space:
                        add(
                            _Key(m, "shared_space", control, source, group_labels[a]),
                            m,
                            shared_space_weights(p[:, a], in_group[a], shares[a]),
                        )

    result = bootstrap_evaluations(
        y,
        {m: np.asarray(scores[m], dtype=np.float64) for m in models},
        evaluations,
        n_resamples=n_resamples,
        seed=seed,
        metrics=tuple(metrics),
        threshold=threshold,
        preference_threshold=preference_threshold,
        batch_size=batch_size,
        n_threads=n_threads,
        progress=progress,
    )

    # Every reported quantity is a difference of two evaluations (or one evaluation minus nothing).
    out_keys: list[_Key] = []
    plus: list[int] = []
    minus: list[int] = []

    def emit(key: _Key, i: int, j: int = -1) -> None:
        out_keys.append(key)
        plus.append(i)
        minus.append(j)

    for key, i in index.items():
        emit(key, i)
    for m in models:
        overall = index[_Key(m, "absolute", "none", "none", "overall")]
        for a in range(k):
            label = group_labels[a]
            subgroup = index[_Key(m, "absolute", "none", "none", label)]
            if "none" in controls:
                emit(_Key(m, "weighted_population", "none", "none", label), overall)
                emit(_Key(m, "controlled_difference", "none", "none", label), subgroup, overall)
            for source in sources:
                for control in controls:
                    if control == "none":
                        continue
                    ma = index[_Key(m, "weighted_population", control, source, label)]
                    emit(_Key(m, "controlled_difference", control, source, label), subgroup, ma)
    for m, ref in (relative_to or {}).items():
        for label in ("overall", *group_labels):
            emit(
                _Key(m, "relative", "none", "none", label, reference=ref),
                index[_Key(m, "absolute", "none", "none", label)],
                index[_Key(ref, "absolute", "none", "none", label)],
            )
    return _summarise(result, out_keys, np.array(plus), np.array(minus), confidence, study, setting)


def _summarise(
    result: BootstrapResult,
    keys: list[_Key],
    plus: np.ndarray,
    minus: np.ndarray,
    confidence: float,
    study: str,
    setting: str,
) -> pd.DataFrame:
    metrics = list(result.metrics)
    n_metrics = len(metrics)
    has_minus = minus >= 0
    safe_minus = np.where(has_minus, minus, 0)
    point = result.point[plus] - np.where(has_minus[:, None], result.point[safe_minus], 0.0)
    n_resamples = result.replicates.shape[0]
    lows = np.empty_like(point)
    highs = np.empty_like(point)
    undefined = np.empty(point.shape, dtype=np.int64)
    # Chunk over quantities so the (n_resamples, chunk, n_metrics) difference stays small.
    chunk = max(1, int(2**25 // max(1, n_resamples * n_metrics)))
    for start in range(0, len(keys), chunk):
        sl = slice(start, start + chunk)
        reps = result.replicates[:, plus[sl], :]
        sub = result.replicates[:, safe_minus[sl], :]
        reps = reps - np.where(has_minus[sl][None, :, None], sub, 0.0)
        low, high, n_undef = percentile_interval(reps, confidence=confidence, axis=0)
        lows[sl], highs[sl], undefined[sl] = low, high, n_undef
    q = len(keys)
    frame = pd.DataFrame(
        {
            "study": study,
            "setting": setting,
            "model": np.repeat([k.model for k in keys], n_metrics),
            "reference": np.repeat([k.reference for k in keys], n_metrics),
            "comparison": np.repeat([k.comparison for k in keys], n_metrics),
            "control": np.repeat([k.control for k in keys], n_metrics),
            "weight_source": np.repeat([k.weight_source for k in keys], n_metrics),
            "group": np.repeat([k.group for k in keys], n_metrics),
            "metric": np.tile(metrics, q),
            "estimate": point.ravel(),
            "ci_low": lows.ravel(),
            "ci_high": highs.ravel(),
            "n_resamples": n_resamples,
            "n_undefined": undefined.ravel(),
        },
        columns=list(TIDY_COLUMNS),
    )
    return frame
