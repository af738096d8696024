"""Weight models ``P(A = a | V)`` of the evaluated population (paper Algorithm 2).

Weight models estimate ``P(A = a | V)`` for the control variables ``V in {X, Y, R}`` of the evaluated
population (``docs/method.md``, "Weights"):

- for the score ``R`` they are always cross-fitted on the evaluation (test) set (paper
  Supplementary A.3): no row is weighted by a model that saw it;
- for ``X`` and ``Y`` they are fitted on the training split and predict the test split when both
  come from the evaluated population (``fit_xy_on="train"``), and cross-fitted on the test split
  like ``R`` when the training split is a selected sample ``S = 1`` of it (``fit_xy_on="test"``; the
  selection settings of paper Supplementary A.2: weights fitted on the training split would be
  ``P(A | V, S = 1)``, not the ``P(A | V)`` of the population being evaluated).

Each model is the grid-searched gradient boosting of
:func:`disaggregated_eval.model_fitting.fit_classifier` (multiclass, target ``A``). Every
``random_state`` comes from :mod:`disaggregated_eval.seeds` with the name paths of ``docs/design.md``:

- ``("weight_models", dataset, "X")``, ``("weight_models", dataset, "Y")`` for fits on the training
  split;
- cross-fitting below a branch ``b``: the outer split of the evaluation rows uses ``b`` and the fit
  without outer fold ``k`` uses ``b + (k,)``, with ``b = ("weight_models", dataset, "R", model)`` for
  ``R`` and ``b = ("weight_models", dataset, "X" | "Y", "test")`` for ``X`` and ``Y``.

Besides the pipeline's gradient boosting, :func:`group_proba_for_control` picks an estimator that
fits the control variable (``docs/method.md``, "Weights"): the cross-fitted cell frequency
(:func:`crossfit_cell_frequency`) for a ``V`` with at most :data:`MAX_CELLS` distinct values, a spline
logistic regression (:func:`crossfit_spline_logistic`) for a continuous score, the gradient boosting
(:func:`crossfit_group_proba`) for several covariates; all with the same outer folds for the same
seed. The spline's cost follows the cells of ``V``, not its rows: on many rows it is fitted on each
group's counts in at most :data:`SPLINE_BINS` cells of ``V`` (exact where ``V`` has that few distinct
values, a measured approximation where it has more). Diagnostics of the resulting weights are in :mod:`disaggregated_eval.weight_diagnostics`.

Threads: as in :mod:`disaggregated_eval.model_fitting` (``n_jobs`` worker processes with one
OpenMP thread each, ``n_threads`` OpenMP threads in the calling process); results depend on neither.
The spline fits run BLAS on one thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from joblib import Parallel, delayed
from threadpoolctl import threadpool_limits

from . import seeds

if TYPE_CHECKING:  # scikit-learn is imported where a weight model is fitted (0.6 s and 25 MB an audit without
    # controls does not need)
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline
from .model_fitting import (
    MAX_CATEGORY_CODE,
    check_class_counts,
    check_dataset,
    check_feature_names,
    check_features,
    check_grid,
    check_n_threads,
    chosen_max_leaf_nodes,
    fit_classifier_unchecked,
    openmp_threads,
    report_fit,
    row_requirement,
    worker_threads,
)
from .validation import (
    check_1d,
    check_choice,
    check_columns,
    check_group_codes,
    check_int,
    check_labels,
    check_length,
    check_names,
    check_scores,
    check_seed,
    check_unique_labels,
)
from .vocabulary import WEIGHT_CONTROLS
from .weight_table import ANY_MODEL, concat_weight_tables, weight_table

__all__ = [
    "R_FEATURE",
    "R_CLIP",
    "FITTED_ON_TRAIN",
    "FITTED_ON_TEST",
    "SELECTION_COLUMNS",
    "logit_score",
    "score_frame",
    "crossfit_fold_ids",
    "shared_fold_ids",
    "crossfit_group_proba",
    "fit_weight_models",
    "selected_max_leaf_nodes",
    "MAX_CELLS",
    "as_control_frame",
    "cell_codes",
    "crossfit_cell_frequency",
    "SPLINE_KNOTS",
    "SPLINE_C_GRID",
    "SPLINE_BINS",
    "SPLINE_ROWS_PER_POINT",
    "crossfit_spline_logistic",
    "WEIGHT_METHODS",
    "GroupProba",
    "choose_weight_method",
    "group_proba_for_control",
]

#: Name of the single feature ``logit(clip(R))`` of the cross-fitted ``P(A | R)`` models.
R_FEATURE = "logit_r"
#: Scores are clipped to ``[R_CLIP, 1 - R_CLIP]`` before the logit.
R_CLIP = 1e-6
#: ``fitted_on`` entry of weight models fitted on the training split and predicting the test split.
FITTED_ON_TRAIN = "train"
#: ``fitted_on`` entry of weight models cross-fitted on the test split.
FITTED_ON_TEST = "test (cross-fitted)"
#: Columns of the weight-model selection table (``weight_model_selection.csv``).
SELECTION_COLUMNS: tuple[str, ...] = (
    "control",
    "model",
    "fitted_on",
    "fold",
    "max_leaf_nodes",
    "mean_cv_log_loss",
    "std_cv_log_loss",
    "selected",
)
#: Where ``fit_xy_on`` can fit the weight models of X and Y.
_XY_SOURCES: tuple[str, ...] = ("train", "test")


def _check_group_labels(group_labels, n_groups: int) -> list[str] | None:
    if group_labels is None:
        return None
    labels = check_unique_labels(group_labels, "group_labels")
    if len(labels) != n_groups:
        raise ValueError(f"group_labels must name the {n_groups} groups (n_groups); got {len(labels)}: {labels!r}")
    return labels


def _group_name(code: int, labels: Sequence[str] | None) -> str:
    """``group 3`` or, with display labels, ``group 3 ('Multiracial')``: used in error messages."""
    return f"group {code}" if labels is None else f"group {code} ({labels[code]!r})"


# ----------------------------------------------------------------------------------------------
# Cross-fitting P(A = a | V) on an evaluation set
# ----------------------------------------------------------------------------------------------


def logit_score(scores) -> np.ndarray:
    """``logit(clip(R, R_CLIP, 1 - R_CLIP))``, the feature of the ``P(A | R)`` models.

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Scores in [0, 1].

    Returns
    -------
    ndarray of shape (n_samples,), float64
    """
    r = np.clip(np.asarray(scores, dtype=np.float64), R_CLIP, 1.0 - R_CLIP)
    return np.log(r) - np.log1p(-r)


def score_frame(scores) -> pd.DataFrame:
    """The ``V = R`` frame of a score: one column :data:`R_FEATURE` = :func:`logit_score` (scores).

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
        Scores in [0, 1].

    Returns
    -------
    DataFrame of shape (n_samples, 1)
        With a fresh ``RangeIndex``; pass it to :func:`crossfit_group_proba` to cross-fit
        ``P(A | R)`` as :func:`fit_weight_models` does.
    """
    return pd.DataFrame({R_FEATURE: logit_score(scores)})


def crossfit_fold_ids(groups, *, crossfit_folds: int, random_state: int) -> np.ndarray:
    """Outer fold of each evaluation row for cross-fitting ``P(A | V)`` (paper Algorithm 2).

    ``StratifiedKFold(crossfit_folds, shuffle=True, random_state=random_state)`` on the rows,
    stratified by group. :func:`fit_weight_models` uses ``random_state = sklearn_seed(seed,
    "weight_models", dataset, "R", model)`` for ``V = R``.

    Parameters
    ----------
    groups : array-like of shape (n_samples,)
        Group codes of the evaluation rows.
    crossfit_folds : int
        Number of outer folds (>= 2).
    random_state : int
        Seed of the splitter.

    Returns
    -------
    ndarray of shape (n_samples,), int64
        Fold index ``0..crossfit_folds-1`` of every row (the fold in which it is held out).

    Raises
    ------
    ValueError
        If ``crossfit_folds`` is not an integer >= 2 or a group has fewer rows than folds.
    """
    crossfit_folds = check_int(crossfit_folds, "crossfit_folds", minimum=2)
    groups = check_1d(groups, "groups")
    check_class_counts(groups, crossfit_folds, "cannot cross-fit", name="group")
    return _fold_ids(groups, crossfit_folds, random_state)


def _fold_ids(groups: np.ndarray, crossfit_folds: int, random_state: int) -> np.ndarray:
    from sklearn.model_selection import StratifiedKFold

    fold = np.full(groups.shape[0], -1, dtype=np.int64)
    splitter = StratifiedKFold(n_splits=crossfit_folds, shuffle=True, random_state=random_state)
    for k, (_, held_out) in enumerate(splitter.split(np.zeros((groups.shape[0], 1)), groups)):
        fold[held_out] = k
    return fold


def _group_proba(estimator: HistGradientBoostingClassifier, X: pd.DataFrame, n_groups: int, where: str) -> np.ndarray:
    """``predict_proba`` with column ``k`` = P(A = k | V), whatever classes the model saw."""
    classes = np.asarray(estimator.classes_).astype(np.int64)
    absent = sorted(set(range(n_groups)) - set(classes.tolist()))
    if absent:
        raise ValueError(
            f"group(s) {absent} absent from the training data of {where}; P(A = a | V) cannot be estimated for them"
        )
    proba = np.zeros((X.shape[0], n_groups), dtype=np.float64)
    proba[:, classes] = estimator.predict_proba(X)
    return proba


@dataclass(frozen=True)
class _Crossfit:
    """The checked plan of one cross-fitting: outer folds and seeds, fixed before any fit."""

    fold_ids: np.ndarray  # (n_rows,) outer fold of every row
    seed: np.random.SeedSequence  # branch: outer split at the branch, fold k at branch + (k,)

    def fold_seed(self, k: int) -> int:
        return seeds.sklearn_seed(self.seed, k)


def _plan_crossfit(
    groups: np.ndarray,
    *,
    n_groups: int,
    crossfit_folds: int,
    n_splits: int,
    max_leaf_nodes: int | None,
    seed: np.random.SeedSequence,
    where: str,
    variable: str,
    context: str,
    labels: Sequence[str] | None,
    inner: bool = True,
    fold_ids: np.ndarray | None = None,
) -> _Crossfit:
    """Outer folds of ``groups``, checked before any fit: every group needs ``crossfit_folds`` rows,
    and (``inner``: models with an inner cross-validation) ``n_splits`` rows (2 with a given
    ``max_leaf_nodes``) in the training part of every outer fold. Errors name the group (with its
    label), the fold and the control variable. A given split ``fold_ids`` (:func:`_check_fold_ids`) is
    used where every group has those rows in the training part of every fold (also without ``inner``,
    where the split of ``seed``, stratified by group, has them by construction); otherwise the split of
    ``seed`` is drawn, as without it.
    """
    counts = np.bincount(groups, minlength=n_groups)
    for code in range(n_groups):
        if counts[code] < crossfit_folds:
            raise ValueError(
                f"{_group_name(code, labels)} has {counts[code]} rows in {where}, fewer than "
                f"crossfit_folds={crossfit_folds}; P(A = {code} | {variable}) cannot be cross-fitted"
            )
    min_rows, need = row_requirement(n_splits, max_leaf_nodes is not None)
    folds = crossfit_folds if inner else 0
    if fold_ids is not None and _training_shortfall(groups, fold_ids, n_groups, crossfit_folds, min_rows) is None:
        return _Crossfit(fold_ids=fold_ids, seed=seed)
    fold_ids = _fold_ids(groups, crossfit_folds, seeds.sklearn_seed(seed))
    short = _training_shortfall(groups, fold_ids, n_groups, folds, min_rows)
    if short is not None:
        code, k, count = short
        raise ValueError(
            f"{_group_name(code, labels)} has {count} rows in the training part of outer fold {k} "
            f"({context}), fewer than {need}; P(A = {code} | {variable}) cannot be estimated"
        )
    return _Crossfit(fold_ids=fold_ids, seed=seed)


def _training_shortfall(
    groups: np.ndarray, fold_ids: np.ndarray, n_groups: int, folds: int, min_rows: int
) -> tuple[int, int, int] | None:
    """The first ``(group, fold, rows)`` whose training part (the rows outside outer fold ``fold``, for
    the first ``folds`` folds) holds fewer than ``min_rows`` rows of the group; None when none does."""
    for k in range(folds):
        counts = np.bincount(groups[fold_ids != k], minlength=n_groups)
        short = np.flatnonzero(counts < min_rows)
        if short.size:
            return int(short[0]), k, int(counts[short[0]])
    return None


def shared_fold_ids(strata, *, crossfit_folds: int, random_state: int) -> np.ndarray:
    """One outer split for several cross-fittings of the same rows, stratified by ``strata``.

    The rows are put in the order of their stratum, in a random order within it, and dealt to the folds
    in turn (``0, 1, ..., crossfit_folds - 1, 0, ...``) over that whole order: every stratum's rows,
    and the rows as a whole, are spread over the folds within one row of even. Several fits given this
    split (``fold_ids`` of :func:`group_proba_for_control`) hold out the same rows together, so rows that
    agree in the strata and in ``V`` get the same weights in every fit (the audit passes the finest cell
    of its attributes: its bootstrap then merges such rows into one unit, ``docs/method.md``, "Weights").
    Unlike :class:`sklearn.model_selection.StratifiedKFold` it takes strata with fewer rows than folds
    (many intersection cells are) without a warning.

    Parameters
    ----------
    strata : array-like of shape (n_samples,), int
        Stratum of each row (any integers).
    crossfit_folds : int
        Number of outer folds (>= 2).
    random_state : int
        Seed of the order within the strata.

    Returns
    -------
    ndarray of shape (n_samples,), int64
        Fold index ``0..crossfit_folds-1`` of every row.

    Raises
    ------
    ValueError
        If ``strata`` is not one-dimensional or ``crossfit_folds`` is not an integer >= 2.

    Examples
    --------
    >>> import numpy as np
    >>> folds = shared_fold_ids(np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1]), crossfit_folds=2, random_state=0)
    >>> np.bincount(folds[:4]).tolist(), np.bincount(folds[4:]).tolist()
    ([2, 2], [3, 3])
    """
    crossfit_folds = check_int(crossfit_folds, "crossfit_folds", minimum=2)
    strata = check_1d(strata, "strata")
    rng = np.random.default_rng(random_state)
    order = np.lexsort((rng.random(strata.shape[0]), strata))
    fold = np.empty(strata.shape[0], dtype=np.int64)
    fold[order] = np.arange(strata.shape[0], dtype=np.int64) % crossfit_folds
    return fold


def _check_fold_ids(fold_ids, n_rows: int, crossfit_folds: int) -> np.ndarray | None:
    """A given outer split: ``n_rows`` integers in ``0..crossfit_folds - 1`` (None stays None)."""
    if fold_ids is None:
        return None
    fold_ids = check_1d(fold_ids, "fold_ids")
    check_length(fold_ids, n_rows, "fold_ids", reference="V")
    if fold_ids.dtype.kind not in "iu" or (fold_ids.size and (fold_ids.min() < 0 or fold_ids.max() >= crossfit_folds)):
        raise ValueError(f"fold_ids must hold integers in 0..{crossfit_folds - 1} (crossfit_folds={crossfit_folds})")
    return fold_ids.astype(np.int64, copy=False)


def _crossfit(
    V: pd.DataFrame,
    groups: np.ndarray,
    plan: _Crossfit,
    *,
    n_groups: int,
    categorical: Sequence[str],
    grid: list[int],
    max_leaf_nodes: int | None,
    n_splits: int,
    n_jobs: int,
    variable: str,
    context: str,
    progress: Callable[[str], object] | None,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Cross-fitting on checked inputs: for each outer fold, fit on the other folds, predict it."""
    proba = np.full((len(V), n_groups), np.nan, dtype=np.float64)
    tables = []
    for k in range(int(plan.fold_ids.max()) + 1):
        held_out = plan.fold_ids == k
        start = time.perf_counter()
        estimator, table = fit_classifier_unchecked(
            V.loc[~held_out],
            groups[~held_out],
            categorical_features=categorical,
            grid=grid,
            max_leaf_nodes=max_leaf_nodes,
            n_splits=n_splits,
            random_state=plan.fold_seed(k),
            n_jobs=n_jobs,
        )
        proba[held_out] = _group_proba(estimator, V.loc[held_out], n_groups, f"{context}, outer fold {k}")
        report_fit(
            progress,
            f"weight model P(A | {variable}) {context}, outer fold {k}: fit on {int((~held_out).sum())} rows, "
            f"predict {int(held_out.sum())} rows, max_leaf_nodes={chosen_max_leaf_nodes(table)}, "
            f"{time.perf_counter() - start:.1f} s",
        )
        table.insert(0, "fold", k)
        tables.append(table)
    return proba, pd.concat(tables, ignore_index=True)


def crossfit_group_proba(
    V: pd.DataFrame,
    groups,
    *,
    n_groups: int,
    categorical: Sequence[str] = (),
    grid: Sequence[int] = (10, 25, 50),
    max_leaf_nodes: int | None = None,
    n_splits: int = 5,
    crossfit_folds: int = 5,
    seed: int | np.random.SeedSequence,
    fold_ids: np.ndarray | None = None,
    group_labels: Sequence[str] | None = None,
    n_jobs: int = 1,
    n_threads: int | None = None,
    progress: Callable[[str], object] | None = None,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Cross-fitted ``P(A = a | V)`` of every row of an evaluation set, for any ``V`` (Algorithm 2).

    The rows are split into ``crossfit_folds`` outer folds stratified by group
    (:func:`crossfit_fold_ids` with ``random_state = sklearn_seed(seed)``); for each outer fold
    ``k`` a multiclass :func:`~disaggregated_eval.model_fitting.fit_classifier` of the group on the
    columns of ``V`` is fitted on the other folds (inner ``n_splits``-fold grid search with
    ``random_state = sklearn_seed(seed, k)``, or the given ``max_leaf_nodes``) and predicts fold
    ``k``, so no row is weighted by a model that saw it (paper Supplementary A.3; ``docs/method.md``,
    "Weights"). :func:`fit_weight_models` calls the same steps, so with ``seed =
    seeds.seed_sequence(root, "weight_models", dataset, "R", model)`` and ``V = score_frame(scores)``
    this reproduces its ``P(A | R)`` bit for bit.

    Parameters
    ----------
    V : DataFrame of shape (n_samples, n_columns)
        The control variable: covariates (``df[features]``), the label (``df[["y"]]``), or a score
        (:func:`score_frame`: the logit of the clipped score, as :func:`fit_weight_models` uses).
        Numeric columns; NaN means missing.
    groups : array-like of shape (n_samples,)
        Group codes ``0..n_groups-1`` of the rows.
    n_groups : int
        Number of groups ``K`` (2..255).
    categorical : sequence of str, default=()
        Integer-coded categorical columns of ``V`` (codes 0..254, NaN missing).
    grid : sequence of int, default=(10, 25, 50)
        Candidate ``max_leaf_nodes`` of each inner grid search; not used with ``max_leaf_nodes``.
    max_leaf_nodes : int or None, default=None
        Fit this value in every outer fold instead of a grid search (e.g. the value selected in a
        main run, :func:`selected_max_leaf_nodes`): ``crossfit_folds`` fits instead of
        ``crossfit_folds * (len(grid) * n_splits + 1)``.
    n_splits : int, default=5
        Folds of each inner grid search.
    crossfit_folds : int, default=5
        Outer folds.
    seed : int or numpy.random.SeedSequence
        Seed branch: a root seed, or (as in the pipeline) ``seeds.seed_sequence(root, *path)``.
    fold_ids : ndarray of shape (n_samples,), int, optional
        A given outer split (e.g. :func:`shared_fold_ids`, one split for several fits), used where every
        group has the rows it needs in each fold's training part; otherwise (and by default) the
        split of ``seed``.
    group_labels : sequence of str, optional
        Display labels of the ``n_groups`` groups, used in error messages.
    n_jobs : int, default=1
        Parallel fits of each grid search (worker processes with one OpenMP thread each).
    n_threads : int or None, default=None
        OpenMP threads of the fits in this process; ``None`` leaves the process default. Results
        depend on neither.
    progress : callable, optional
        Called with one log line per outer fold.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_groups)
        Column ``k`` holds ``P(A = k | V)`` of the row; rows sum to 1.
    selection : DataFrame
        One row per outer fold and ``max_leaf_nodes``: ``fold`` (int64), ``max_leaf_nodes``,
        ``mean_cv_log_loss``, ``std_cv_log_loss`` (NaN with ``max_leaf_nodes`` given), ``selected``.

    Raises
    ------
    TypeError
        If ``V`` is not a DataFrame.
    ValueError
        If ``V`` has no columns, a non-numeric column or invalid categorical codes; ``groups`` has
        the wrong length or codes outside ``0..n_groups-1``; a group has fewer than
        ``crossfit_folds`` rows, or fewer than ``n_splits`` rows (2 with ``max_leaf_nodes``) in the
        training part of an outer fold (the message names the group, with its label if given, and
        the fold); or another argument is invalid.
    """
    check_columns(V, [], "V")
    columns = check_names(list(V.columns), "V's columns")
    if not columns:
        raise ValueError("V must have at least one column")
    categorical = check_names(categorical, "categorical")
    check_columns(V, categorical, "V")
    check_features(V, columns, categorical, "V")
    n_groups = check_int(n_groups, "n_groups", minimum=2, maximum=MAX_CATEGORY_CODE + 1)
    codes = check_group_codes(groups, "groups", n_groups)
    check_length(codes, len(V), "groups", reference="V")
    labels = _check_group_labels(group_labels, n_groups)
    grid, max_leaf_nodes, n_splits = _check_search(grid, max_leaf_nodes, n_splits)
    crossfit_folds = check_int(crossfit_folds, "crossfit_folds", minimum=2)
    n_jobs = check_int(n_jobs, "n_jobs")
    n_threads = check_n_threads(n_threads)
    variable = columns[0] if len(columns) == 1 else "V"
    context = f"V = {variable}" if len(columns) == 1 else f"V = ({', '.join(columns)})"
    plan = _plan_crossfit(
        codes,
        n_groups=n_groups,
        crossfit_folds=crossfit_folds,
        n_splits=n_splits,
        max_leaf_nodes=max_leaf_nodes,
        seed=_seed_branch(seed),
        where="V",
        variable=variable,
        context=context,
        labels=labels,
        fold_ids=_check_fold_ids(fold_ids, len(V), crossfit_folds),
    )
    with openmp_threads(n_threads):
        return _crossfit(
            V,
            codes,
            plan,
            n_groups=n_groups,
            categorical=categorical,
            grid=grid,
            max_leaf_nodes=max_leaf_nodes,
            n_splits=n_splits,
            n_jobs=n_jobs,
            variable=variable,
            context=context,
            progress=progress,
        )


def _check_search(grid, max_leaf_nodes, n_splits) -> tuple[list[int], int | None, int]:
    """``(grid, None, n_splits)`` for a grid search, ``([], max_leaf_nodes, n_splits)`` without."""
    n_splits = check_int(n_splits, "n_splits", minimum=2)
    if max_leaf_nodes is None:
        return check_grid(grid), None, n_splits
    return [], check_int(max_leaf_nodes, "max_leaf_nodes", minimum=2), n_splits


def _seed_branch(seed) -> np.random.SeedSequence:
    """A seed branch from a root seed (int >= 0) or a SeedSequence."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    return seeds.seed_sequence(check_seed(seed))


# ----------------------------------------------------------------------------------------------
# Weight models of a dataset: X, Y (on train or cross-fitted on test) and R (cross-fitted)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _WeightSettings:
    """The checked scalar arguments of :func:`fit_weight_models`."""

    features: list[str]
    categorical: list[str]
    group: str
    label: str
    n_groups: int
    labels: list[str] | None
    grid: list[int]
    max_leaf_nodes: int | Mapping | None
    n_splits: int
    crossfit_folds: int
    fit_xy_on: str
    seed: int
    dataset: str
    n_jobs: int
    controls: list[str]

    def fitted_on(self, control: str) -> str:
        return FITTED_ON_TRAIN if control != "R" and self.fit_xy_on == "train" else FITTED_ON_TEST

    def leaves(self, control: str, model: str) -> int | None:
        """The given ``max_leaf_nodes`` of a weight model, ``None`` for a grid search."""
        if self.max_leaf_nodes is None or isinstance(self.max_leaf_nodes, int):
            return self.max_leaf_nodes
        for key in ((control, model), control):
            if key in self.max_leaf_nodes:
                return self.max_leaf_nodes[key]
        raise ValueError(
            f"max_leaf_nodes has no entry for control {control!r}, model {model!r}; give ({control!r}, "
            f"{model!r}) or {control!r} (keys: {list(self.max_leaf_nodes)!r})"
        )


@dataclass(frozen=True)
class _WeightFit:
    """One weight model P(A | V) to fit, with its data, checked before any fit."""

    control: str
    model: str
    fitted_on: str
    V_fit: pd.DataFrame  # the rows the model is fitted on (train, or all test rows when cross-fitted)
    groups_fit: np.ndarray
    V_predict: pd.DataFrame | None  # test rows to predict (train-fitted only)
    categorical: list[str]
    max_leaf_nodes: int | None
    random_state: int | None  # train-fitted: the grid search's seed
    crossfit: _Crossfit | None  # cross-fitted: outer folds and seeds
    variable: str
    context: str


def _check_weight_settings(
    *,
    features,
    categorical,
    group,
    label,
    n_groups,
    group_labels,
    grid,
    max_leaf_nodes,
    n_splits,
    crossfit_folds,
    fit_xy_on,
    seed,
    dataset,
    n_jobs,
    controls,
) -> _WeightSettings:
    """Step 1 of :func:`fit_weight_models`: every scalar argument."""
    features, categorical = check_feature_names(features, categorical, reserved={"group": group})
    n_splits = check_int(n_splits, "n_splits", minimum=2)
    if max_leaf_nodes is None:
        grid = check_grid(grid)
    elif isinstance(max_leaf_nodes, Mapping):
        grid = []
        max_leaf_nodes = {key: check_int(v, f"max_leaf_nodes[{key!r}]", minimum=2) for key, v in max_leaf_nodes.items()}
    else:
        grid = []
        max_leaf_nodes = check_int(max_leaf_nodes, "max_leaf_nodes", minimum=2)
    crossfit_folds = check_int(crossfit_folds, "crossfit_folds", minimum=2)
    n_groups = check_int(n_groups, "n_groups", minimum=2, maximum=MAX_CATEGORY_CODE + 1)
    if isinstance(controls, str):
        controls = [controls]
    controls = list(controls)
    if not controls or len(set(controls)) != len(controls) or any(c not in WEIGHT_CONTROLS for c in controls):
        raise ValueError(
            f"controls must be a non-empty list of distinct values from {list(WEIGHT_CONTROLS)}; got {controls!r}"
        )
    if "X" in controls and not features:
        raise ValueError("features must name at least one column for control 'X'")
    return _WeightSettings(
        features=features,
        categorical=categorical,
        group=group,
        label=label,
        n_groups=n_groups,
        labels=_check_group_labels(group_labels, n_groups),
        grid=grid,
        max_leaf_nodes=max_leaf_nodes,
        n_splits=n_splits,
        crossfit_folds=crossfit_folds,
        fit_xy_on=check_choice(fit_xy_on, "fit_xy_on", _XY_SOURCES),
        seed=check_seed(seed),
        dataset=check_dataset(dataset),
        n_jobs=check_int(n_jobs, "n_jobs"),
        controls=controls,
    )


def _control_frames(
    train: pd.DataFrame | None, test: pd.DataFrame, test_scores, s: _WeightSettings
) -> tuple[dict[tuple[str, str], tuple[pd.DataFrame | None, pd.DataFrame]], np.ndarray | None, np.ndarray | None]:
    """Step 2: check the data and build the ``V`` frames of every (control, model).

    Returns ``{(control, model): (V on train or None, V on test)}`` in output order, and the checked
    group codes of train (if needed) and test (if needed).
    """
    on_train = [c for c in s.controls if c != "R" and s.fit_xy_on == "train"]
    crossfitted = [c for c in s.controls if c not in on_train]
    needs = {"X": s.features, "Y": [s.label], "R": []}
    a_train = a_test = None
    if on_train:
        if train is None:
            raise ValueError(f"train is needed for the weight models of {on_train} (fit_xy_on='train'); got None")
        check_columns(train, list(dict.fromkeys([s.group] + [c for k in on_train for c in needs[k]])), "train")
        a_train = check_group_codes(train[s.group], f"train[{s.group!r}]", s.n_groups)
        min_rows, need = row_requirement(s.n_splits, s.max_leaf_nodes is not None)
        counts = np.bincount(a_train, minlength=s.n_groups)
        for code in range(s.n_groups):
            if counts[code] < min_rows:
                raise ValueError(
                    f"{_group_name(code, s.labels)} has {counts[code]} rows in train, fewer than {need}; "
                    f"P(A = {code} | V) cannot be estimated"
                )
    test_columns = [c for k in s.controls if k != "R" for c in needs[k]] + ([s.group] if crossfitted else [])
    check_columns(test, list(dict.fromkeys(test_columns)), "test")
    frames: dict[tuple[str, str], tuple[pd.DataFrame | None, pd.DataFrame]] = {}
    for control in s.controls:
        fit_on_train = control in on_train
        if control == "X":
            if fit_on_train:
                check_features(train, s.features, s.categorical, "train")
            check_features(test, s.features, s.categorical, "test")
            frames[("X", ANY_MODEL)] = (train[s.features] if fit_on_train else None, test[s.features])
        elif control == "Y":
            y_train = check_labels(train[s.label], f"train[{s.label!r}]", dtype=np.int64) if fit_on_train else None
            y_test = check_labels(test[s.label], f"test[{s.label!r}]", dtype=np.int64)
            frames[("Y", ANY_MODEL)] = (
                pd.DataFrame({s.label: y_train}, index=train.index) if fit_on_train else None,
                pd.DataFrame({s.label: y_test}, index=test.index),
            )
        else:
            for model, r in _check_test_scores(test_scores, len(test)).items():
                frames[("R", model)] = (None, score_frame(r))
    if crossfitted:
        a_test = check_group_codes(test[s.group], f"test[{s.group!r}]", s.n_groups)
    return frames, a_train, a_test


def _check_test_scores(test_scores, n_test: int) -> dict[str, np.ndarray]:
    if not isinstance(test_scores, Mapping) or not test_scores:
        raise ValueError("test_scores must be a non-empty mapping of model type to scores for control 'R'")
    scores = {}
    for model, values in test_scores.items():
        if not isinstance(model, str) or model == ANY_MODEL:
            raise ValueError(f"test_scores keys must be model names (str, not {ANY_MODEL!r}); got {model!r}")
        name = f"test_scores[{model!r}]"
        array = check_1d(values, name)
        check_length(array, n_test, name, reference="test")
        scores[model] = check_scores(array, name=name)
    return scores


def _plan_weight_fits(train, test, test_scores, s: _WeightSettings) -> list[_WeightFit]:
    """Steps 2 and 3 of :func:`fit_weight_models`: data checks, ``V`` frames, outer folds."""
    frames, a_train, a_test = _control_frames(train, test, test_scores, s)
    fits = []
    for (control, model), (V_train, V_test) in frames.items():
        fitted_on = s.fitted_on(control)
        leaves = s.leaves(control, model)
        categorical = s.categorical if control == "X" else []
        if fitted_on == FITTED_ON_TRAIN:
            fits.append(
                _WeightFit(
                    control=control,
                    model=model,
                    fitted_on=fitted_on,
                    V_fit=V_train,
                    groups_fit=a_train,
                    V_predict=V_test,
                    categorical=categorical,
                    max_leaf_nodes=leaves,
                    random_state=seeds.sklearn_seed(s.seed, "weight_models", s.dataset, control),
                    crossfit=None,
                    variable=control,
                    context=f"V = {control} (train)",
                )
            )
            continue
        branch = (control, model) if control == "R" else (control, "test")
        context = f"V = R for model {model!r}" if control == "R" else f"V = {control} (test, cross-fitted)"
        plan = _plan_crossfit(
            a_test,
            n_groups=s.n_groups,
            crossfit_folds=s.crossfit_folds,
            n_splits=s.n_splits,
            max_leaf_nodes=leaves,
            seed=seeds.seed_sequence(s.seed, "weight_models", s.dataset, *branch),
            where="test",
            variable=control,
            context=context,
            labels=s.labels,
        )
        fits.append(
            _WeightFit(
                control=control,
                model=model,
                fitted_on=fitted_on,
                V_fit=V_test,
                groups_fit=a_test,
                V_predict=None,
                categorical=categorical,
                max_leaf_nodes=leaves,
                random_state=None,
                crossfit=plan,
                variable=control,
                context=context,
            )
        )
    return fits


def _run_weight_fit(fit: _WeightFit, s: _WeightSettings, progress) -> tuple[np.ndarray, pd.DataFrame]:
    """Step 4: fit one weight model; ``P(A | V)`` of every test row and its selection rows."""
    if fit.crossfit is not None:
        proba, table = _crossfit(
            fit.V_fit,
            fit.groups_fit,
            fit.crossfit,
            n_groups=s.n_groups,
            categorical=fit.categorical,
            grid=s.grid,
            max_leaf_nodes=fit.max_leaf_nodes,
            n_splits=s.n_splits,
            n_jobs=s.n_jobs,
            variable=fit.variable,
            context=fit.context,
            progress=progress,
        )
    else:
        start = time.perf_counter()
        estimator, table = fit_classifier_unchecked(
            fit.V_fit,
            fit.groups_fit,
            categorical_features=fit.categorical,
            grid=s.grid,
            max_leaf_nodes=fit.max_leaf_nodes,
            n_splits=s.n_splits,
            random_state=fit.random_state,
            n_jobs=s.n_jobs,
        )
        proba = _group_proba(estimator, fit.V_predict, s.n_groups, fit.context)
        report_fit(
            progress,
            f"weight model P(A | {fit.variable}) {fit.context}: fit on {len(fit.V_fit)} rows, predict "
            f"{len(fit.V_predict)} rows, max_leaf_nodes={chosen_max_leaf_nodes(table)}, "
            f"{time.perf_counter() - start:.1f} s",
        )
        table.insert(0, "fold", pd.NA)
    table["fold"] = table["fold"].astype("Int64")
    table.insert(0, "fitted_on", fit.fitted_on)
    table.insert(0, "model", fit.model)
    table.insert(0, "control", fit.control)
    return proba, table


def fit_weight_models(
    train: pd.DataFrame | None,
    test: pd.DataFrame,
    test_scores: Mapping[str, np.ndarray],
    *,
    features: Sequence[str],
    categorical: Sequence[str] = (),
    group: str = "a",
    label: str = "y",
    n_groups: int,
    group_labels: Sequence[str] | None = None,
    grid: Sequence[int] = (10, 25, 50),
    max_leaf_nodes: int | Mapping[str | tuple[str, str], int] | None = None,
    n_splits: int = 5,
    crossfit_folds: int = 5,
    fit_xy_on: str = "train",
    seed: int,
    dataset: str,
    n_jobs: int = 1,
    controls: Sequence[str] = WEIGHT_CONTROLS,
    n_threads: int | None = None,
    progress: Callable[[str], object] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Estimate ``P(A = a | V)`` of the evaluated population for every test row (paper Algorithm 2).

    The weights must describe the population being evaluated, the test split (paper
    Supplementary A.2, A.3; ``docs/method.md``, "Weights"):

    - ``V = R``, one per entry of ``test_scores``: cross-fitting on the test split
      (:func:`crossfit_group_proba` on :func:`score_frame` of the scores, seed branch
      ``("weight_models", dataset, "R", model)``).
    - ``V = X`` (``features``, without ``A``) and ``V = Y`` (the single feature ``label``):
      with ``fit_xy_on="train"`` a multiclass :func:`~disaggregated_eval.model_fitting.fit_classifier`
      of ``A`` on the training split (seed ``("weight_models", dataset, "X" | "Y")``) predicts the
      test split, which is right when both splits come from the evaluated population; with ``fit_xy_on="test"`` they are
      cross-fitted on the test split like ``R`` (seed branch ``("weight_models", dataset, "X" |
      "Y", "test")``), which is needed when the training split is a selected sample (the
      selection settings: fitted on it, the weights would be ``P(A | V, S = 1)``).

    Parameters
    ----------
    train : DataFrame of shape (n_train, ...) or None
        Training split with ``features``, ``group`` and ``label``; used only for ``X`` and ``Y``
        with ``fit_xy_on="train"`` (may be None otherwise).
    test : DataFrame of shape (n_test, ...)
        Test split: ``features`` (for ``X``), ``label`` (for ``Y``), ``group`` (for cross-fitted
        controls). Its row order defines ``row``.
    test_scores : mapping of str to ndarray of shape (n_test,)
        Scores ``R`` in [0, 1] of each model type on the test rows (used for ``R`` only).
    features, categorical : sequence of str
        Feature columns and the integer-coded categorical ones among them.
    group, label : str, default "a", "y"
        Names of the group and label columns.
    n_groups : int
        Number of groups ``K``; group codes must be in ``0..K-1``.
    group_labels : sequence of str, optional
        Display labels of the groups, used in error messages.
    grid : sequence of int, default=(10, 25, 50)
        Candidate ``max_leaf_nodes`` of every grid search; not used with ``max_leaf_nodes``.
    max_leaf_nodes : int, mapping or None, default=None
        Fixed hyperparameters instead of grid searches, for cheap refits on new evaluation sets:
        one value for every model, or a mapping with keys ``(control, model)`` (``model`` ``"*"``
        for X and Y) or ``control``, e.g. :func:`selected_max_leaf_nodes` of a main run's
        selection table. A fixed value reproduces the grid search's refit when it equals the
        selected value.
    n_splits : int, default=5
        Folds of every inner grid search.
    crossfit_folds : int, default=5
        Outer folds of every cross-fitting.
    fit_xy_on : {"train", "test"}, default "train"
        Where the weight models of ``X`` and ``Y`` are fitted (see above).
    seed : int
        Root seed (paths above).
    dataset : str
        Dataset name (part of the seed paths).
    n_jobs : int, default=1
        Parallel fits of each grid search (worker processes with one OpenMP thread each).
    controls : sequence of str, default=("X", "Y", "R")
        The control variables to estimate, a subset of ``vocabulary.WEIGHT_CONTROLS``.
    n_threads : int or None, default=None
        OpenMP threads of the fits in this process (via :mod:`threadpoolctl`); ``None`` leaves the
        process default (all cores unless ``OMP_NUM_THREADS`` is set). Results depend on neither
        ``n_threads`` nor ``n_jobs``.
    progress : callable, optional
        Called with one log line per fitted model (the fits take minutes at full size).

    Returns
    -------
    weights : DataFrame of shape (n_test * (n_X + n_Y + len(test_scores) * n_R), 4 + K)
        The long table of :mod:`disaggregated_eval.weight_table` (``weight_source`` ``"estimated"``),
        ordered by control (as in ``controls``), model (as in ``test_scores``), row.
    selection : DataFrame
        One row per fitted model and ``max_leaf_nodes``, columns :data:`SELECTION_COLUMNS`:
        ``control``, ``model``, ``fitted_on`` (:data:`FITTED_ON_TRAIN` or :data:`FITTED_ON_TEST`),
        ``fold`` (Int64 outer fold of cross-fitted models, missing otherwise), ``max_leaf_nodes``,
        ``mean_cv_log_loss``, ``std_cv_log_loss`` (NaN for a given ``max_leaf_nodes``), ``selected``.

    Raises
    ------
    ValueError
        If columns are missing, labels are not 0/1, group codes are not in ``0..K-1``, a group has
        fewer than ``n_splits`` training rows (train-fitted ``X``, ``Y``) or fewer than
        ``crossfit_folds`` test rows or too few rows in the training part of an outer fold
        (cross-fitted controls), scores are missing, of the wrong length or outside [0, 1], or an
        argument (``grid``, ``max_leaf_nodes``, ``n_splits``, ``crossfit_folds``, ``n_groups``,
        ``controls``, ``fit_xy_on``, ``seed``) is invalid. Everything is checked before any fit.
    """
    settings = _check_weight_settings(
        features=features,
        categorical=categorical,
        group=group,
        label=label,
        n_groups=n_groups,
        group_labels=group_labels,
        grid=grid,
        max_leaf_nodes=max_leaf_nodes,
        n_splits=n_splits,
        crossfit_folds=crossfit_folds,
        fit_xy_on=fit_xy_on,
        seed=seed,
        dataset=dataset,
        n_jobs=n_jobs,
        controls=controls,
    )
    n_threads = check_n_threads(n_threads)
    fits = _plan_weight_fits(train, test, test_scores, settings)
    blocks, tables = [], []
    with openmp_threads(n_threads):
        for fit in fits:
            proba, table = _run_weight_fit(fit, settings, progress)
            blocks.append(weight_table(proba, weight_source="estimated", control=fit.control, model=fit.model))
            tables.append(table)
    selection = pd.concat(tables, ignore_index=True)[list(SELECTION_COLUMNS)]
    for column in ("control", "model", "fitted_on"):
        selection[column] = selection[column].astype(str)
    return concat_weight_tables(blocks), selection


def selected_max_leaf_nodes(selection: pd.DataFrame) -> dict[tuple[str, str], int]:
    """The ``max_leaf_nodes`` a main run selected for each weight model, for fixed-value refits.

    Parameters
    ----------
    selection : DataFrame
        The selection table of :func:`fit_weight_models` (``weight_model_selection.csv``), with
        columns ``control``, ``model``, ``max_leaf_nodes`` and ``selected``.

    Returns
    -------
    dict of (str, str) to int
        ``(control, model) -> max_leaf_nodes``. For a cross-fitted model, whose outer folds may
        have selected different values, the value selected in most folds (the smallest on ties).
        Pass it as ``max_leaf_nodes`` to :func:`fit_weight_models`.

    Raises
    ------
    ValueError
        If a column is missing or a (control, model) has no selected row.
    """
    check_columns(selection, ["control", "model", "max_leaf_nodes", "selected"], "selection")
    out: dict[tuple[str, str], int] = {}
    for (control, model), part in selection.groupby(["control", "model"], sort=False):
        chosen = part.loc[part["selected"].astype(bool), "max_leaf_nodes"].to_numpy(dtype=np.int64)
        if chosen.size == 0:
            raise ValueError(f"selection has no selected row for control {control!r}, model {model!r}")
        values, counts = np.unique(chosen, return_counts=True)
        out[(str(control), str(model))] = int(values[np.argmax(counts)])
    return out


# ----------------------------------------------------------------------------------------------
# Discrete V: P(A | V) as the cross-fitted cell frequency
# ----------------------------------------------------------------------------------------------

#: Most distinct values (cells) a control variable may take for ``P(A | V)`` to be estimated by
#: :func:`crossfit_cell_frequency` under ``method="auto"`` (:func:`group_proba_for_control`): a
#: binary label, a score in deciles or percentiles, a few categorical features. With 50 cells and
#: the cross-fitting's 80% of the rows, a cell holds on average 1.6% of them (320 of 20,000 rows).
MAX_CELLS = 50


def as_control_frame(V, name: str = "V") -> pd.DataFrame:
    """A control variable as a DataFrame.

    Parameters
    ----------
    V : DataFrame of shape (n_samples, n_columns), or array-like of shape (n_samples,) or (n_samples, d)
        The control variable.
    name : str, default="V"
        How the argument is named in messages.

    Returns
    -------
    DataFrame of shape (n_samples, n_columns)
        A frame as is (not copied); an array of shape (n,) as the column ``v``, of shape (n, d) as the
        columns ``v0 .. v{d-1}``.

    Raises
    ------
    ValueError
        If an array has no or more than two dimensions.
    """
    if isinstance(V, pd.DataFrame):
        return V
    array = np.asarray(V)
    if array.ndim == 1:
        return pd.DataFrame({"v": array})
    if array.ndim == 2:
        return pd.DataFrame(array, columns=[f"v{j}" for j in range(array.shape[1])])
    raise ValueError(f"{name} must be a DataFrame or an array of shape (n,) or (n, d); got shape {array.shape}")


def cell_codes(V) -> tuple[np.ndarray, int]:
    """The cell of every row of a discrete control variable: rows with equal values share a cell.

    Parameters
    ----------
    V : DataFrame of shape (n_samples, n_columns), or array of shape (n_samples,) or (n_samples, d)
        The control variable (one or several columns). A missing value (NaN) is a value of its own.

    Returns
    -------
    codes : ndarray of shape (n_samples,), int64
        Cell ``0..n_cells-1`` of each row, numbered in the sorted order of the distinct values.
    n_cells : int
        Number of distinct values (rows) of ``V``.

    Raises
    ------
    ValueError
        If ``V`` has no columns or more than two dimensions.
    """
    frame = as_control_frame(V)
    if frame.shape[1] == 0:
        raise ValueError("V must have at least one column")
    if len(frame) == 0:
        return np.zeros(0, dtype=np.int64), 0
    codes = frame.groupby(list(frame.columns), sort=True, dropna=False).ngroup().to_numpy(dtype=np.int64)
    return codes, int(codes.max()) + 1


def crossfit_cell_frequency(
    V,
    groups,
    *,
    n_groups: int,
    crossfit_folds: int = 5,
    seed: int | np.random.SeedSequence,
    fold_ids: np.ndarray | None = None,
    group_labels: Sequence[str] | None = None,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Cross-fitted ``P(A = a | V)`` of a discrete control variable: the group shares of its cell.

    Where ``V`` takes few distinct values (a binary label, a score in deciles), ``P(A | V)`` is a
    contingency table and its estimate is the cell frequency: exact, without a model or a grid
    search (``docs/method.md``, "Weights"). Cross-fitting as in :func:`crossfit_group_proba`, with
    the same outer split for the same ``seed`` (:func:`crossfit_fold_ids`, ``random_state =
    sklearn_seed(seed)``, stratified by group): the row of outer fold ``k`` with value ``v`` gets the
    group shares among the rows of the *other* folds with value ``v``, so no row is weighted by
    its own label.

    A value of ``V`` that occurs in fold ``k`` but in none of the other folds (at most a few rows:
    such a value has no row in 80% of the data with 5 folds) has no rows to estimate from; its
    rows get the group shares of all the other folds' rows (the marginal ``P(A)``, the estimate
    when ``V`` tells nothing). This keeps the weights a probability distribution and leaves every
    other cell's frequency untouched (smoothing every cell towards the marginal would bias the small
    cells); the number of such rows per fold is reported in ``table``.

    Parameters
    ----------
    V : DataFrame of shape (n_samples, n_columns), or array of shape (n_samples,) or (n_samples, d)
        The control variable; each distinct value (row) is a cell (:func:`cell_codes`; NaN is a
        value of its own).
    groups : array-like of shape (n_samples,)
        Group codes ``0..n_groups-1``.
    n_groups : int
        Number of groups ``K`` (2..255).
    crossfit_folds : int, default=5
        Outer folds (>= 2).
    seed : int or numpy.random.SeedSequence
        Seed branch of the outer split (as in :func:`crossfit_group_proba`: a root seed, or
        ``seeds.seed_sequence(root, *path)``).
    fold_ids : ndarray of shape (n_samples,), int, optional
        A given outer split (e.g. :func:`shared_fold_ids`, one split for several fits), used where every
        group has the rows it needs in each fold's training part; otherwise (and by default) the
        split of ``seed``.
    group_labels : sequence of str, optional
        Display labels of the groups, used in error messages.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_groups)
        Column ``k`` holds the estimated ``P(A = k | V)`` of the row; rows sum to 1.
    table : DataFrame of shape (crossfit_folds, 4)
        One row per outer fold: ``fold``, ``n_fit_rows`` (rows of the other folds), ``n_cells``
        (distinct values of ``V`` among them) and ``n_unseen_rows`` (rows of the fold whose value
        is absent from the other folds and which got the marginal group shares), all int64.

    Raises
    ------
    ValueError
        If ``groups`` has the wrong length or codes outside ``0..n_groups-1``, a group has fewer than
        ``crossfit_folds`` rows (the message names it), or an argument is invalid.
    """
    frame = as_control_frame(V)
    codes, n_cells = cell_codes(frame)
    n_groups = check_int(n_groups, "n_groups", minimum=2, maximum=MAX_CATEGORY_CODE + 1)
    a = check_group_codes(groups, "groups", n_groups)
    check_length(a, len(frame), "groups", reference="V")
    labels = _check_group_labels(group_labels, n_groups)
    crossfit_folds = check_int(crossfit_folds, "crossfit_folds", minimum=2)
    plan = _plan_crossfit(
        a,
        n_groups=n_groups,
        crossfit_folds=crossfit_folds,
        n_splits=2,
        max_leaf_nodes=None,
        seed=_seed_branch(seed),
        where="V",
        variable="V",
        context="cell frequency",
        labels=labels,
        inner=False,
        fold_ids=_check_fold_ids(fold_ids, len(frame), crossfit_folds),
    )
    return _cell_frequency(codes, n_cells, a, plan.fold_ids, n_groups)


def _cell_frequency(
    codes: np.ndarray, n_cells: int, groups: np.ndarray, fold_ids: np.ndarray, n_groups: int
) -> tuple[np.ndarray, pd.DataFrame]:
    """:func:`crossfit_cell_frequency` on checked inputs."""
    proba = np.empty((codes.shape[0], n_groups), dtype=np.float64)
    records = []
    for k in range(int(fold_ids.max()) + 1):
        held_out = fold_ids == k
        fit = ~held_out
        counts = np.bincount(codes[fit] * n_groups + groups[fit], minlength=n_cells * n_groups)
        counts = counts.reshape(n_cells, n_groups).astype(np.float64)
        totals = counts.sum(axis=1)
        marginal = np.bincount(groups[fit], minlength=n_groups) / fit.sum()
        seen = totals > 0
        table = np.where(seen[:, None], counts / np.where(seen, totals, 1.0)[:, None], marginal[None, :])
        proba[held_out] = table[codes[held_out]]
        records.append((k, int(fit.sum()), int(seen.sum()), int((~seen[codes[held_out]]).sum())))
    table = pd.DataFrame.from_records(records, columns=["fold", "n_fit_rows", "n_cells", "n_unseen_rows"])
    return proba, table.astype(np.int64)


# ----------------------------------------------------------------------------------------------
# Continuous V (a score): spline logistic regression
# ----------------------------------------------------------------------------------------------

#: Knots of the cubic B-spline basis of :func:`crossfit_spline_logistic`: at these quantiles of ``V``
#: (the minimum, the maximum and 8 between), from the rows each model is fitted on.
SPLINE_KNOTS = 10
#: Candidate inverse L2 penalties ``C`` of the spline logistic regression (chosen by cross-validated
#: log loss).
SPLINE_C_GRID: tuple[float, ...] = (0.01, 0.1, 1.0, 10.0, 100.0)
#: Solver of the spline logistic regression: Newton steps with a Cholesky factorisation of the
#: (13 x 13 per class) Hessian converge in 5-20 iterations whatever the scaling of the features;
#: lbfgs needed 100-250 and stopped at its tolerance with cross-validated log losses up to 4e-4
#: higher (measured on 16,000 rows, 2 and 3 groups: 3-6 times the time).
_SPLINE_SOLVER = "newton-cholesky"
_SPLINE_MAX_ITER = 100
#: The linear term of the spline model is ``V`` standardised and multiplied by this factor, so that
#: the L2 penalty on its coefficient is ``1 / factor^2`` of the spline coefficients' (1%): the
#: penalty then shrinks ``logit P(A | V)`` towards a straight line in ``V``, not towards a constant
#: (which flattens the tails where a small group lives when the cross-validation picks a strong
#: penalty, as it does at a few thousand rows).
_LINEAR_FACTOR = 10.0
#: Most cells of ``V`` a spline of :func:`crossfit_spline_logistic` is fitted on: ``V``'s distinct
#: values when there are at most this many (exact), else this many bins of ``V`` (half of equal
#: counts, half of equal width; ``docs/method.md``, "Weights", bounds and measures the approximation).
SPLINE_BINS = 512
#: The fits of :func:`crossfit_spline_logistic` use the cells when the rows fall into at most a
#: fourth as many (cell, group) points as there are rows (every point then stands for 4 rows or more
#: on average); otherwise they are fitted on the rows themselves.
SPLINE_ROWS_PER_POINT = 4


def _spline_knots(v: np.ndarray, n_knots: int) -> np.ndarray:
    """Knots at ``n_knots`` equally spaced quantiles of ``v`` (ties merged), shape (k, 1)."""
    return np.unique(np.quantile(v, np.linspace(0.0, 1.0, n_knots)))[:, None]


def _linear_term(v: np.ndarray, center: float, scale: float) -> np.ndarray:
    """``(v - center) / scale``: the (hardly penalised) linear term of the spline model."""
    return (v - center) / scale


def _spline_pipeline(v: np.ndarray, knots: np.ndarray) -> Pipeline:
    """The spline logistic regression of a fit on the rows ``v`` (shape (n,)): the B-spline basis on
    ``knots`` (:func:`_spline_knots` of ``v``), the linear term standardised by ``v``'s mean and
    standard deviation; ``C`` not set."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import FeatureUnion, Pipeline
    from sklearn.preprocessing import FunctionTransformer, SplineTransformer

    linear = FunctionTransformer(
        _linear_term, kw_args={"center": float(v.mean()), "scale": float(v.std()) / _LINEAR_FACTOR}
    )
    features = FeatureUnion(
        [("linear", linear), ("spline", SplineTransformer(knots=knots, degree=3, extrapolation="linear"))]
    )
    logistic = LogisticRegression(solver=_SPLINE_SOLVER, max_iter=_SPLINE_MAX_ITER)
    return Pipeline([("features", features), ("logistic", logistic)])


@dataclass(frozen=True)
class _SplineCells:
    """The cells of ``V`` a spline is fitted on: ``V``'s distinct values, or bins of ``V``."""

    codes: np.ndarray  # (n_rows,) cell of every row, int64
    n_cells: int
    values: np.ndarray | None  # (n_cells,) the value of each cell if the cells are V's distinct values

    @property
    def aggregation(self) -> str:
        return "distinct values" if self.values is not None else "bins"

    def take(self, index: np.ndarray) -> _SplineCells:
        return _SplineCells(self.codes[index], self.n_cells, self.values)

    def points(self, v: np.ndarray, groups: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The (cell, group) points of rows ``v``, ``groups`` (whose cells are ``self.codes``), in the
        order of cell then group: ``x`` (the cell's value, or the mean of ``v`` over the point's rows),
        the group and the number of rows, each of shape (n_points,)."""
        key = self.codes * n_groups + groups
        counts = np.bincount(key, minlength=self.n_cells * n_groups)
        keep = np.flatnonzero(counts)
        if self.values is not None:
            x = self.values[keep // n_groups]
        else:
            x = np.bincount(key, weights=v, minlength=self.n_cells * n_groups)[keep] / counts[keep]
        return x, keep % n_groups, counts[keep].astype(np.float64)


def _bin_edges(v: np.ndarray, n_bins: int) -> np.ndarray:
    """Edges of at most ``n_bins`` bins of ``v``: ``n_bins // 2`` of equal counts (quantiles) and
    ``n_bins // 2`` of equal width between the minimum and the maximum, merged."""
    half = n_bins // 2
    quantiles = np.quantile(v, np.linspace(0.0, 1.0, half + 1))
    widths = np.linspace(v.min(), v.max(), half + 1)
    return np.unique(np.concatenate([quantiles, widths]))


def _spline_cells(v: np.ndarray, groups: np.ndarray, n_groups: int, n_bins: int | None) -> _SplineCells | None:
    """The cells a cross-fitted spline is fitted on (``docs/method.md``, "Weights"), or None for rows.

    ``V``'s distinct values if there are at most ``n_bins``, else at most ``n_bins`` bins
    (:func:`_bin_edges`); the fits use the cells only if the rows' (cell, group) points number at most
    a :data:`SPLINE_ROWS_PER_POINT`-th of the rows.
    """
    if n_bins is None:
        return None
    values, inverse = np.unique(v, return_inverse=True)
    if values.size <= n_bins:
        cells = _SplineCells(inverse.astype(np.int64).ravel(), int(values.size), values)
    else:
        edges = _bin_edges(v, n_bins)
        codes = np.clip(np.searchsorted(edges, v, side="right") - 1, 0, edges.size - 2).astype(np.int64)
        cells = _SplineCells(codes, int(edges.size - 1), None)
    key = cells.codes * n_groups + groups
    points = np.count_nonzero(np.bincount(key, minlength=cells.n_cells * n_groups))
    return cells if points * SPLINE_ROWS_PER_POINT <= v.size else None


def _point_log_loss(
    pipeline: Pipeline,
    C: float,
    fit: tuple[np.ndarray, np.ndarray, np.ndarray],
    held: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> float:
    """Held-out log loss (mean over the held-out rows) of the spline fitted at ``C`` on points ``fit``."""
    from sklearn.base import clone
    from sklearn.metrics import log_loss

    estimator = clone(pipeline).set_params(logistic__C=C)
    estimator.fit(fit[0][:, None], fit[1], logistic__sample_weight=fit[2])
    proba = estimator.predict_proba(held[0][:, None])
    return float(log_loss(held[1], proba, sample_weight=held[2], labels=estimator.classes_))


def _fit_spline_logistic(
    v: np.ndarray,
    groups: np.ndarray,
    *,
    cells: _SplineCells | None,
    n_groups: int,
    n_knots: int,
    C_grid: list[float],
    n_splits: int,
    random_state: int,
    n_jobs: int,
) -> tuple[Pipeline | GridSearchCV, pd.DataFrame]:
    """One grid search of the spline logistic regression of ``groups`` on ``v`` (shape (n,)).

    On the rows (``cells`` None): scikit-learn's ``GridSearchCV``. On the (cell, group) points of
    ``cells`` (:meth:`_SplineCells.points`) with their row counts as sample weights: the same search
    written out, with the same inner folds of *rows* (``StratifiedKFold`` of the rows, seeded by
    ``random_state``): each inner fit on the points of its training rows, its log loss the mean over
    its held-out rows (their points, weighted by their counts), the refit on all points. The knots
    and the linear term come from the rows either way.
    """
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

    knots = _spline_knots(v, n_knots)
    pipeline = _spline_pipeline(v, knots)
    cv = StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=random_state)
    # One BLAS thread: the matrices are small (rows x ~13 columns), so threads only wait for each
    # other (measured: 8x the wall time with 2 threads on a busy machine), and a fixed thread count
    # keeps the summation order, hence the bits, the same on every machine.
    with worker_threads(n_jobs), threadpool_limits(limits=1, user_api="blas"):
        if cells is None:
            search = GridSearchCV(
                pipeline, {"logistic__C": C_grid}, scoring="neg_log_loss", cv=cv, refit=True, n_jobs=n_jobs,
                error_score="raise",
            )  # fmt: skip
            search.fit(v[:, None], groups)
            losses = -np.asarray(search.cv_results_["mean_test_score"], dtype=np.float64)
            spread = np.asarray(search.cv_results_["std_test_score"], dtype=np.float64)
            estimator, best, n_points = search, int(search.best_index_), v.shape[0]
        else:
            inner = [
                (cells.take(train).points(v[train], groups[train], n_groups),
                 cells.take(held).points(v[held], groups[held], n_groups))
                for train, held in cv.split(np.zeros((v.shape[0], 1)), groups)
            ]  # fmt: skip
            scores = Parallel(n_jobs=n_jobs)(
                delayed(_point_log_loss)(pipeline, C, fit, held) for C in C_grid for fit, held in inner
            )
            scores = np.asarray(scores, dtype=np.float64).reshape(len(C_grid), len(inner))
            losses, spread = scores.mean(axis=1), scores.std(axis=1)
            best = int(np.argmin(losses))  # the first on ties, as GridSearchCV
            x, a, w = cells.points(v, groups, n_groups)
            estimator = clone(pipeline).set_params(logistic__C=C_grid[best])
            estimator.fit(x[:, None], a, logistic__sample_weight=w)
            n_points = x.shape[0]
    table = pd.DataFrame(
        {
            "n_fit_rows": np.full(len(C_grid), v.shape[0], dtype=np.int64),
            "aggregation": "rows" if cells is None else cells.aggregation,
            "n_fit_points": np.full(len(C_grid), n_points, dtype=np.int64),
            "n_knots": np.full(len(C_grid), knots.shape[0], dtype=np.int64),
            "C": np.asarray(C_grid, dtype=np.float64),
            "mean_cv_log_loss": losses,
            "std_cv_log_loss": spread,
            "selected": np.arange(len(C_grid)) == best,
        }
    )
    return estimator, table


def crossfit_spline_logistic(
    V,
    groups,
    *,
    n_groups: int,
    n_knots: int = SPLINE_KNOTS,
    C_grid: Sequence[float] = SPLINE_C_GRID,
    n_splits: int = 5,
    crossfit_folds: int = 5,
    seed: int | np.random.SeedSequence,
    fold_ids: np.ndarray | None = None,
    group_labels: Sequence[str] | None = None,
    n_jobs: int = 1,
    progress: Callable[[str], object] | None = None,
    n_bins: int | None = SPLINE_BINS,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Cross-fitted ``P(A = a | V)`` of a continuous one-column ``V`` by spline logistic regression.

    For a score, ``V`` is :func:`score_frame` of it (``logit(clip(R))``). In each outer fold a
    multinomial logistic regression of the group on ``V`` and a cubic B-spline basis of ``V``
    (:class:`sklearn.preprocessing.SplineTransformer`, knots at :data:`SPLINE_KNOTS` quantiles of
    the fold's fit rows, linear beyond the outer knots) is fitted on the other folds, its L2
    penalty ``C`` chosen from ``C_grid`` by stratified ``n_splits``-fold cross-validated log loss
    (:class:`sklearn.model_selection.GridSearchCV`), and predicts the held-out fold. The linear term
    is scaled so that the penalty hardly touches it: a strong penalty shrinks the log-odds towards a
    straight line in ``V`` (a logistic regression on ``V``), not towards a constant. Unlike the
    gradient boosting of :func:`crossfit_group_proba`, whose leaves of at least 20 rows and
    early-stopped shrinkage flatten ``P(A | R)`` where a small group lives (the tails of the score),
    the spline follows the log-odds there and continues them linearly beyond the data: the
    simulation of ``benchmarks/bench_weight_calibration.py`` measures both against the exact
    oracle (``docs/method.md``, "Weights").

    Cost follows the cells of ``V``, not its rows (``docs/method.md``, "Weights"). The likelihood of
    rows that share a value of ``V`` and a group is that value's term times their count, so each fit
    can be on the (cell, group) points of its rows with their counts as sample weights: the cells
    are ``V``'s distinct values where it has at most ``n_bins`` (exact), else ``n_bins`` bins of
    ``V`` (half of equal counts, half of equal width, from every row's ``V``), each point at the
    mean ``V`` of its rows (an approximation whose first-order error cancels; measured in
    ``docs/method.md``). The points are used when every point stands for at least
    :data:`SPLINE_ROWS_PER_POINT` rows on average (a continuous score from about ``4 * n_bins *
    n_groups`` rows); otherwise, and with ``n_bins=None``, the fits are on the rows (as
    :class:`~sklearn.model_selection.GridSearchCV`). Either way the inner folds are folds of rows
    (the same split), each inner fit and each held-out log loss counts the rows of its fold's
    points, the outer fold's rows never enter its own fit, the knots and the linear term come from
    the fit rows, and each held-out row is predicted at its own ``V``.

    Seeds as in :func:`crossfit_group_proba`: the outer split from ``sklearn_seed(seed)`` (the same
    folds for the same ``seed``), the inner cross-validation of fold ``k`` from
    ``sklearn_seed(seed, k)``; the Newton-Cholesky fits are deterministic (one BLAS thread), and so
    are the cells.

    Parameters
    ----------
    V : DataFrame of shape (n_samples, 1), or array of shape (n_samples,)
        One numeric column without missing values, with at least 3 distinct values.
    groups : array-like of shape (n_samples,)
        Group codes ``0..n_groups-1``.
    n_groups : int
        Number of groups ``K`` (2..255).
    n_knots : int, default=SPLINE_KNOTS
        Knots of the spline basis (>= 3; ties of the quantiles are merged).
    C_grid : sequence of float, default=SPLINE_C_GRID
        Candidate inverse penalties (positive).
    n_splits : int, default=5
        Folds of each inner cross-validation (>= 2).
    crossfit_folds : int, default=5
        Outer folds (>= 2).
    seed : int or numpy.random.SeedSequence
        Seed branch.
    fold_ids : ndarray of shape (n_samples,), int, optional
        A given outer split (e.g. :func:`shared_fold_ids`, one split for several fits), used where every
        group has the rows it needs in each fold's training part; otherwise (and by default) the
        split of ``seed``.
    group_labels : sequence of str, optional
        Display labels of the groups, used in error messages.
    n_jobs : int, default=1
        Parallel fits of each grid search (worker processes).
    progress : callable, optional
        Called with one log line per outer fold.
    n_bins : int or None, default=SPLINE_BINS
        Most cells of ``V`` the fits may use (>= 2); None fits on the rows.

    Returns
    -------
    proba : ndarray of shape (n_samples, n_groups)
        Column ``k`` holds the estimated ``P(A = k | V)``; rows sum to 1.
    table : DataFrame
        One row per outer fold and ``C``: ``fold``, ``n_fit_rows`` (rows of the other folds),
        ``aggregation`` (``"rows"``, ``"distinct values"`` or ``"bins"``: what the fits were on),
        ``n_fit_points`` (the (cell, group) points of the fold's refit; its rows without cells),
        ``n_knots`` (int64), ``C``, ``mean_cv_log_loss``, ``std_cv_log_loss`` (float64),
        ``selected`` (bool).

    Raises
    ------
    ValueError
        If ``V`` has not exactly one numeric column, has missing or infinite values or fewer than 3
        distinct values (use :func:`crossfit_cell_frequency`); if ``groups`` has the wrong length or
        codes outside ``0..n_groups-1``; if a group has fewer than ``crossfit_folds`` rows or fewer
        than ``n_splits`` rows in the training part of an outer fold (the message names it); or if
        another argument is invalid.
    """
    frame = as_control_frame(V)
    v = _check_continuous(frame)
    n_groups = check_int(n_groups, "n_groups", minimum=2, maximum=MAX_CATEGORY_CODE + 1)
    a = check_group_codes(groups, "groups", n_groups)
    check_length(a, len(frame), "groups", reference="V")
    labels = _check_group_labels(group_labels, n_groups)
    n_knots = check_int(n_knots, "n_knots", minimum=3)
    C_grid = _check_C_grid(C_grid)
    n_splits = check_int(n_splits, "n_splits", minimum=2)
    crossfit_folds = check_int(crossfit_folds, "crossfit_folds", minimum=2)
    n_jobs = check_int(n_jobs, "n_jobs")
    n_bins = None if n_bins is None else check_int(n_bins, "n_bins", minimum=2)
    variable = str(frame.columns[0])
    plan = _plan_crossfit(
        a,
        n_groups=n_groups,
        crossfit_folds=crossfit_folds,
        n_splits=n_splits,
        max_leaf_nodes=None,
        seed=_seed_branch(seed),
        where="V",
        variable=variable,
        context=f"V = {variable}, spline logistic",
        labels=labels,
        fold_ids=_check_fold_ids(fold_ids, len(frame), crossfit_folds),
    )
    return _crossfit_spline(
        v, a, plan, n_groups=n_groups, n_knots=n_knots, C_grid=C_grid, n_splits=n_splits, n_jobs=n_jobs,
        n_bins=n_bins, variable=variable, progress=progress,
    )  # fmt: skip


def _check_continuous(frame: pd.DataFrame) -> np.ndarray:
    if frame.shape[1] != 1:
        raise ValueError(f"V must have exactly one column for the spline logistic model; got {frame.shape[1]}")
    name = frame.columns[0]
    if not pd.api.types.is_numeric_dtype(frame[name].dtype):
        raise ValueError(f"V column {name!r} must be numeric; got dtype {frame[name].dtype}")
    v = frame[name].to_numpy(dtype=np.float64, na_value=np.nan)
    if not np.isfinite(v).all():
        raise ValueError(f"V column {name!r} must be finite (no missing values) for the spline logistic model")
    distinct = np.unique(v).size
    if distinct < 3:
        raise ValueError(
            f"V column {name!r} has {distinct} distinct value(s); a spline needs at least 3 "
            "(use crossfit_cell_frequency for a discrete V)"
        )
    return np.ascontiguousarray(v)


def _check_C_grid(C_grid) -> list[float]:
    message = "C_grid must be a non-empty sequence of distinct positive numbers"
    if isinstance(C_grid, (str, bytes)) or not isinstance(C_grid, Sequence) or not len(C_grid):
        raise ValueError(f"{message}; got {C_grid!r}")
    values = []
    for c in C_grid:
        if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, float, np.integer, np.floating)):
            raise ValueError(f"{message}; got {C_grid!r}")
        if not np.isfinite(c) or c <= 0:
            raise ValueError(f"{message}; got {C_grid!r}")
        values.append(float(c))
    if len(set(values)) != len(values):
        raise ValueError(f"{message}; got {C_grid!r}")
    return values


def _crossfit_spline(
    v: np.ndarray,
    groups: np.ndarray,
    plan: _Crossfit,
    *,
    n_groups: int,
    n_knots: int,
    C_grid: list[float],
    n_splits: int,
    n_jobs: int,
    n_bins: int | None,
    variable: str,
    progress: Callable[[str], object] | None,
) -> tuple[np.ndarray, pd.DataFrame]:
    proba = np.full((v.shape[0], n_groups), np.nan, dtype=np.float64)
    tables = []
    cells = _spline_cells(v, groups, n_groups, n_bins)  # of all rows' V (not their groups' folds)
    for k in range(int(plan.fold_ids.max()) + 1):
        held_out = plan.fold_ids == k
        start = time.perf_counter()
        search, table = _fit_spline_logistic(
            v[~held_out],
            groups[~held_out],
            cells=None if cells is None else cells.take(~held_out),
            n_groups=n_groups,
            n_knots=n_knots,
            C_grid=C_grid,
            n_splits=n_splits,
            random_state=plan.fold_seed(k),
            n_jobs=n_jobs,
        )
        classes = np.asarray(search.classes_).astype(np.int64)
        proba[held_out] = 0.0
        with threadpool_limits(limits=1, user_api="blas"):
            proba[np.ix_(held_out, classes)] = search.predict_proba(v[held_out, None])
        chosen = float(table.loc[table["selected"], "C"].iloc[0])
        points = "" if cells is None else f" ({int(table['n_fit_points'].iloc[0])} points of {cells.aggregation})"
        report_fit(
            progress,
            f"weight model P(A | {variable}) spline logistic, outer fold {k}: fit on {int((~held_out).sum())} rows"
            f"{points}, predict {int(held_out.sum())} rows, C={chosen:g}, {time.perf_counter() - start:.1f} s",
        )
        table.insert(0, "fold", k)
        tables.append(table)
    out = pd.concat(tables, ignore_index=True)
    out["fold"] = out["fold"].astype(np.int64)
    return proba, out


# ----------------------------------------------------------------------------------------------
# One entry point: the estimator of P(A | V) that fits the control variable
# ----------------------------------------------------------------------------------------------

#: Estimators of ``P(A | V)`` of :func:`group_proba_for_control`.
WEIGHT_METHODS: tuple[str, ...] = ("cell_frequency", "spline_logistic", "gradient_boosting")


@dataclass(frozen=True)
class GroupProba:
    """Cross-fitted ``P(A = a | V)`` of every row and how it was estimated.

    Attributes
    ----------
    proba : ndarray of shape (n_samples, n_groups)
        Column ``k`` holds ``P(A = k | V)`` of the row; rows sum to 1.
    method : str
        One of :data:`WEIGHT_METHODS`.
    table : DataFrame
        The estimator's per-fold table (:func:`crossfit_cell_frequency`,
        :func:`crossfit_spline_logistic` or :func:`crossfit_group_proba`).
    note : str
        One sentence on the estimate for a practitioner's notes (the method, and for cell
        frequencies the rows whose value of ``V`` only occurs in their own fold).
    """

    proba: np.ndarray
    method: str
    table: pd.DataFrame
    note: str


def _spline_note(table: pd.DataFrame) -> str:
    """The note of a spline fit: the estimator, and the cells of ``V`` it was fitted on, if any."""
    note = "P(A | V) is a cross-fitted logistic regression on a cubic spline basis of V"
    aggregation = str(table["aggregation"].iloc[0])
    if aggregation == "rows":
        return note

    def span(column: str) -> str:
        low, high = int(table[column].min()), int(table[column].max())
        return f"{low:,}" if low == high else f"{low:,}-{high:,}"

    cells = "at the distinct values of V (exact)" if aggregation == "distinct values" else "in bins of V"
    return (
        f"{note}, fitted on each group's row counts {cells}: {span('n_fit_points')} points for "
        f"{span('n_fit_rows')} rows per outer fold (docs/method.md, 'Weights')"
    )


def choose_weight_method(V, *, categorical: Sequence[str] = (), max_cells: int = MAX_CELLS) -> str:
    """The estimator ``method="auto"`` of :func:`group_proba_for_control` uses for ``V``.

    - ``"cell_frequency"`` if ``V`` has at most ``max_cells`` distinct values (rows): a binary
      label, a score in deciles, a few categorical features;
    - ``"spline_logistic"`` if ``V`` is one numeric, non-categorical column without missing values
      (a continuous score, or one numeric feature);
    - ``"gradient_boosting"`` otherwise (several features, missing values, many categories).

    Parameters
    ----------
    V : DataFrame of shape (n_samples, n_columns), or array of shape (n_samples,) or (n_samples, d)
    categorical : sequence of str, default=()
        Categorical columns of ``V``.
    max_cells : int, default=MAX_CELLS

    Returns
    -------
    str
        One of :data:`WEIGHT_METHODS`.
    """
    frame = as_control_frame(V)
    _, n_cells = cell_codes(frame)
    if n_cells <= check_int(max_cells, "max_cells", minimum=1):
        return "cell_frequency"
    if frame.shape[1] == 1 and frame.columns[0] not in categorical:
        column = frame.iloc[:, 0]
        if (
            pd.api.types.is_numeric_dtype(column.dtype)
            and np.isfinite(column.to_numpy(np.float64, na_value=np.nan)).all()
        ):
            return "spline_logistic"
    return "gradient_boosting"


def group_proba_for_control(
    V,
    groups,
    *,
    n_groups: int,
    method: str = "auto",
    max_cells: int = MAX_CELLS,
    categorical: Sequence[str] = (),
    grid: Sequence[int] = (10, 25, 50),
    max_leaf_nodes: int | None = None,
    n_knots: int = SPLINE_KNOTS,
    C_grid: Sequence[float] = SPLINE_C_GRID,
    n_bins: int | None = SPLINE_BINS,
    n_splits: int = 5,
    crossfit_folds: int = 5,
    seed: int | np.random.SeedSequence,
    fold_ids: np.ndarray | None = None,
    group_labels: Sequence[str] | None = None,
    n_jobs: int = 1,
    n_threads: int | None = None,
    progress: Callable[[str], object] | None = None,
) -> GroupProba:
    """Cross-fitted ``P(A = a | V)`` with the estimator that fits ``V`` (``docs/method.md``, "Weights").

    ``method="auto"`` (:func:`choose_weight_method`): the cell frequency
    (:func:`crossfit_cell_frequency`) for a ``V`` with at most ``max_cells`` distinct values (exact,
    instant); the spline logistic regression (:func:`crossfit_spline_logistic`) for one continuous
    column, e.g. a score's :func:`score_frame`; the grid-searched gradient boosting
    (:func:`crossfit_group_proba`) for several features. Every method uses the same outer folds for
    the same ``seed``, so no row is weighted by a model that saw it.

    Parameters
    ----------
    V : DataFrame of shape (n_samples, n_columns), or array of shape (n_samples,) or (n_samples, d)
        The control variable: covariates, the label, or :func:`score_frame` of a score.
    groups : array-like of shape (n_samples,)
        Group codes ``0..n_groups-1``.
    n_groups : int
        Number of groups ``K``.
    method : {"auto", "cell_frequency", "spline_logistic", "gradient_boosting"}, default="auto"
    max_cells : int, default=MAX_CELLS
        Largest number of distinct values of ``V`` for the cell frequency under ``"auto"``.
    categorical : sequence of str, default=()
        Categorical columns of ``V`` (gradient boosting; excluded from the spline).
    grid, max_leaf_nodes
        Of the gradient boosting (:func:`crossfit_group_proba`).
    n_knots, C_grid, n_bins
        Of the spline logistic regression (:func:`crossfit_spline_logistic`).
    n_splits : int, default=5
        Folds of the inner cross-validation (spline, gradient boosting).
    crossfit_folds : int, default=5
        Outer folds.
    seed : int or numpy.random.SeedSequence
        Seed branch (outer split at the branch, fold ``k``'s inner search at ``branch + (k,)``).
    fold_ids : ndarray of shape (n_samples,), int, optional
        A given outer split (e.g. :func:`shared_fold_ids`, one split for several fits), used where every
        group has the rows it needs in each fold's training part; otherwise (and by default) the
        split of ``seed``.
    group_labels : sequence of str, optional
        Display labels of the groups, used in error messages.
    n_jobs, n_threads, progress
        As in :func:`crossfit_group_proba` (``n_threads`` only concerns the gradient boosting);
        ``progress`` is called once per outer fold by every method.

    Returns
    -------
    GroupProba
        ``proba`` of shape (n_samples, n_groups), the ``method`` used, its per-fold ``table`` and
        a ``note``.

    Raises
    ------
    ValueError
        If ``method`` is unknown, or as the chosen estimator raises (checked before any fit).
    """
    method = check_choice(method, "method", ("auto",) + WEIGHT_METHODS)
    frame = as_control_frame(V)
    if method == "auto":
        method = choose_weight_method(frame, categorical=categorical, max_cells=max_cells)
    if method == "cell_frequency":
        proba, table = crossfit_cell_frequency(
            frame,
            groups,
            n_groups=n_groups,
            crossfit_folds=crossfit_folds,
            seed=seed,
            group_labels=group_labels,
            fold_ids=fold_ids,
        )
        for fold in table.itertuples():
            report_fit(
                progress,
                f"weight model P(A | V) cell frequency, outer fold {fold.fold}: {fold.n_cells} value(s) of V in "
                f"{fold.n_fit_rows} rows, {fold.n_unseen_rows} held-out row(s) with an unseen value",
            )
        unseen = int(table["n_unseen_rows"].sum())
        _, n_cells = cell_codes(frame)
        note = f"P(A | V) is the cross-fitted cell frequency over the {n_cells} distinct value(s) of V"
        if unseen:
            note += (
                f"; {unseen} row(s) have a value of V that occurs only in their own outer fold and get the "
                "group shares of the other folds"
            )
        return GroupProba(proba, method, table, note)
    if method == "spline_logistic":
        proba, table = crossfit_spline_logistic(
            frame, groups, n_groups=n_groups, n_knots=n_knots, C_grid=C_grid, n_splits=n_splits,
            crossfit_folds=crossfit_folds, seed=seed, group_labels=group_labels, n_jobs=n_jobs, progress=progress,
            n_bins=n_bins, fold_ids=fold_ids,
        )  # fmt: skip
        return GroupProba(proba, method, table, _spline_note(table))
    proba, table = crossfit_group_proba(
        frame, groups, n_groups=n_groups, categorical=categorical, grid=grid, max_leaf_nodes=max_leaf_nodes,
        n_splits=n_splits, crossfit_folds=crossfit_folds, seed=seed, group_labels=group_labels, n_jobs=n_jobs,
        n_threads=n_threads, progress=progress, fold_ids=fold_ids,
    )  # fmt: skip
    note = "P(A | V) is a cross-fitted, grid-searched gradient boosting classifier"
    return GroupProba(proba, method, table, note)
