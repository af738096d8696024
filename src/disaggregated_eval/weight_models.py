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
:func:`disaggregated_eval.outcome_models.fit_classifier` (multiclass, target ``A``). Every
``random_state`` comes from :mod:`disaggregated_eval.seeds` with the name paths of ``docs/design.md``:

- ``("weight_models", dataset, "X")``, ``("weight_models", dataset, "Y")`` for fits on the training
  split;
- cross-fitting below a branch ``b``: the outer split of the evaluation rows uses ``b`` and the fit
  without outer fold ``k`` uses ``b + (k,)``, with ``b = ("weight_models", dataset, "R", model)`` for
  ``R`` and ``b = ("weight_models", dataset, "X" | "Y", "test")`` for ``X`` and ``Y``.

Threads: as in :mod:`disaggregated_eval.outcome_models` (``n_jobs`` worker processes with one
OpenMP thread each, ``n_threads`` OpenMP threads in the calling process); results depend on neither.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import StratifiedKFold

from . import seeds
from ._validation import (
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
from .outcome_models import (
    _MAX_CATEGORY_CODE,
    _check_class_counts,
    _check_dataset,
    _check_feature_names,
    _check_features,
    _check_grid,
    _check_n_threads,
    _fit_classifier,
    _openmp_threads,
    _report,
    _row_requirement,
    _selected,
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
    "crossfit_group_proba",
    "fit_weight_models",
    "selected_max_leaf_nodes",
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
    _check_class_counts(groups, crossfit_folds, "cannot cross-fit", name="group")
    return _fold_ids(groups, crossfit_folds, random_state)


def _fold_ids(groups: np.ndarray, crossfit_folds: int, random_state: int) -> np.ndarray:
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
) -> _Crossfit:
    """Outer folds of ``groups``, checked before any fit: every group needs ``crossfit_folds`` rows,
    and ``n_splits`` rows (2 with a given ``max_leaf_nodes``) in the training part of every outer
    fold. Errors name the group (with its label), the fold and the control variable.
    """
    counts = np.bincount(groups, minlength=n_groups)
    for code in range(n_groups):
        if counts[code] < crossfit_folds:
            raise ValueError(
                f"{_group_name(code, labels)} has {counts[code]} rows in {where}, fewer than "
                f"crossfit_folds={crossfit_folds}; P(A = {code} | {variable}) cannot be cross-fitted"
            )
    fold_ids = _fold_ids(groups, crossfit_folds, seeds.sklearn_seed(seed))
    min_rows, need = _row_requirement(n_splits, max_leaf_nodes is not None)
    for k in range(crossfit_folds):
        counts = np.bincount(groups[fold_ids != k], minlength=n_groups)
        for code in range(n_groups):
            if counts[code] < min_rows:
                raise ValueError(
                    f"{_group_name(code, labels)} has {counts[code]} rows in the training part of outer fold {k} "
                    f"({context}), fewer than {need}; P(A = {code} | {variable}) cannot be estimated"
                )
    return _Crossfit(fold_ids=fold_ids, seed=seed)


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
        estimator, table = _fit_classifier(
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
        _report(
            progress,
            f"weight model P(A | {variable}) {context}, outer fold {k}: fit on {int((~held_out).sum())} rows, "
            f"predict {int(held_out.sum())} rows, max_leaf_nodes={_selected(table)}, "
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
    group_labels: Sequence[str] | None = None,
    n_jobs: int = 1,
    n_threads: int | None = None,
    progress: Callable[[str], object] | None = None,
) -> tuple[np.ndarray, pd.DataFrame]:
    """Cross-fitted ``P(A = a | V)`` of every row of an evaluation set, for any ``V`` (Algorithm 2).

    The rows are split into ``crossfit_folds`` outer folds stratified by group
    (:func:`crossfit_fold_ids` with ``random_state = sklearn_seed(seed)``); for each outer fold
    ``k`` a multiclass :func:`fit_classifier` of the group on the columns of ``V`` is fitted on the
    other folds (inner ``n_splits``-fold grid search with ``random_state = sklearn_seed(seed, k)``,
    or the given ``max_leaf_nodes``) and predicts fold ``k``, so no row is weighted by a model that
    saw it (paper Supplementary A.3; ``docs/method.md``, "Weights"). :func:`fit_weight_models`
    calls the same steps, so with ``seed = seeds.seed_sequence(root, "weight_models", dataset, "R",
    model)`` and ``V = score_frame(scores)`` this reproduces its ``P(A | R)`` bit for bit.

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
    _check_features(V, columns, categorical, "V")
    n_groups = check_int(n_groups, "n_groups", minimum=2, maximum=_MAX_CATEGORY_CODE + 1)
    codes = check_group_codes(groups, "groups", n_groups)
    check_length(codes, len(V), "groups", reference="V")
    labels = _check_group_labels(group_labels, n_groups)
    grid, max_leaf_nodes, n_splits = _check_search(grid, max_leaf_nodes, n_splits)
    crossfit_folds = check_int(crossfit_folds, "crossfit_folds", minimum=2)
    n_jobs = check_int(n_jobs, "n_jobs")
    n_threads = _check_n_threads(n_threads)
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
    )
    with _openmp_threads(n_threads):
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
        return _check_grid(grid), None, n_splits
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
    features, categorical = _check_feature_names(features, categorical, reserved={"group": group})
    n_splits = check_int(n_splits, "n_splits", minimum=2)
    if max_leaf_nodes is None:
        grid = _check_grid(grid)
    elif isinstance(max_leaf_nodes, Mapping):
        grid = []
        max_leaf_nodes = {key: check_int(v, f"max_leaf_nodes[{key!r}]", minimum=2) for key, v in max_leaf_nodes.items()}
    else:
        grid = []
        max_leaf_nodes = check_int(max_leaf_nodes, "max_leaf_nodes", minimum=2)
    crossfit_folds = check_int(crossfit_folds, "crossfit_folds", minimum=2)
    n_groups = check_int(n_groups, "n_groups", minimum=2, maximum=_MAX_CATEGORY_CODE + 1)
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
        dataset=_check_dataset(dataset),
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
        min_rows, need = _row_requirement(s.n_splits, s.max_leaf_nodes is not None)
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
                _check_features(train, s.features, s.categorical, "train")
            _check_features(test, s.features, s.categorical, "test")
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
        estimator, table = _fit_classifier(
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
        _report(
            progress,
            f"weight model P(A | {fit.variable}) {fit.context}: fit on {len(fit.V_fit)} rows, predict "
            f"{len(fit.V_predict)} rows, max_leaf_nodes={_selected(table)}, {time.perf_counter() - start:.1f} s",
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
      with ``fit_xy_on="train"`` a multiclass :func:`fit_classifier` of ``A`` on the training split
      (seed ``("weight_models", dataset, "X" | "Y")``) predicts the test split, which is right when
      both splits come from the evaluated population; with ``fit_xy_on="test"`` they are
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
    n_threads = _check_n_threads(n_threads)
    fits = _plan_weight_fits(train, test, test_scores, settings)
    blocks, tables = [], []
    with _openmp_threads(n_threads):
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
