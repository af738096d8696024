"""Outcome models, and the grid-searched classifier every model of the project is fitted with.

Outcome models predict ``Y`` from the covariates ``X`` in three ways (paper sections 2 and 5,
Supplementary A.3): ``x`` uses ``X`` only, ``xa`` uses ``X`` and the group ``A`` as a categorical
feature, and ``xa_stratified`` is one model on ``X`` per group, each row being scored by its own
group's model. The weight models ``P(A | V)`` are in :mod:`disaggregated_eval.weight_models`; both
fit :func:`fit_classifier`.

Every model is a :class:`sklearn.ensemble.HistGradientBoostingClassifier` whose ``max_leaf_nodes``
is chosen from a grid by stratified k-fold cross-validation with the lowest mean log loss, then refit
on all of its training data (paper Supplementary A.3; :class:`sklearn.model_selection.GridSearchCV`);
or, for cheap refits on new evaluation sets, given (``max_leaf_nodes=``), which reproduces the grid
search's refit bit for bit. Every ``random_state`` comes from :mod:`disaggregated_eval.seeds` with
the name paths of ``docs/design.md``: ``("outcome_models", dataset, model)`` and
``("outcome_models", dataset, "xa_stratified", group)``.

Missing feature values (NaN) stay missing: the gradient boosting handles them natively. Categorical
features are integer-coded columns (codes ``0..254``, NaN for missing).

Threads: ``n_jobs`` parallel fits of each grid search run in joblib's ``loky`` worker processes with
one OpenMP thread each (``joblib.parallel_config(inner_max_num_threads=1)``); without that limit the
workers inherit ``OMP_NUM_THREADS`` (which Snakemake sets to the job's threads), so ``n_jobs = t``
workers would run ``t * t`` OpenMP threads on ``t`` cores. ``n_threads`` sets the OpenMP threads of
the fits and predictions in the calling process (the refit of each grid search). Results do not
depend on either.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
from joblib import parallel_config
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from threadpoolctl import threadpool_limits

from . import seeds
from ._validation import (
    check_columns,
    check_group_codes,
    check_int,
    check_labels,
    check_names,
    check_seed,
    format_values,
)
from .vocabulary import MODEL_TYPES

__all__ = [
    "fit_classifier",
    "OutcomeModels",
    "fit_outcome_models",
]

#: Largest categorical code HistGradientBoosting accepts (``max_bins - 1`` with the default 255 bins).
_MAX_CATEGORY_CODE = 254
#: Rows each class needs in a fit without a grid search: HistGradientBoosting's early stopping
#: (on for more than 10,000 rows) holds out a validation set stratified by class.
_MIN_ROWS_FIXED = 2


# ----------------------------------------------------------------------------------------------
# Checks shared with ``weight_models`` (the generic ones are in ``_validation``)
# ----------------------------------------------------------------------------------------------


def _check_grid(grid) -> list[int]:
    message = "grid must be a non-empty list of integers >= 2 (max_leaf_nodes)"
    if isinstance(grid, (str, bytes)) or not isinstance(grid, Iterable):
        raise ValueError(f"{message}; got {grid!r}")
    values = list(grid)
    if not values:
        raise ValueError(f"{message}; got {grid!r}")
    bad = [v for v in values if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 2]
    if bad:
        raise ValueError(f"{message}; got bad values {bad!r} in {grid!r}")
    if len({int(v) for v in values}) != len(values):
        raise ValueError(f"grid values must be distinct; got {grid!r}")
    return [int(v) for v in values]


def _check_n_threads(n_threads) -> int | None:
    if n_threads is None:
        return None
    if isinstance(n_threads, (bool, np.bool_)) or not isinstance(n_threads, (int, np.integer)) or n_threads < 1:
        raise ValueError(f"n_threads must be None or an integer >= 1; got {n_threads!r}")
    return int(n_threads)


def _check_dataset(dataset) -> str:
    if not isinstance(dataset, str) or not dataset:
        raise ValueError(f"dataset must be a non-empty string; got {dataset!r}")
    return dataset


def _check_feature_names(features, categorical, *, reserved: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Distinct feature names, categorical ones among them, none of the ``reserved`` columns."""
    features = check_names(features, "features")
    categorical = check_names(categorical, "categorical")
    for what, name in reserved.items():
        if name in features:
            raise ValueError(f"the {what} column {name!r} must not be among features {features!r}")
    stray = [c for c in categorical if c not in features]
    if stray:
        raise ValueError(f"categorical features {stray!r} are not among features {features!r}")
    return features, categorical


def _check_features(df: pd.DataFrame, features: Sequence[str], categorical: Sequence[str], frame: str) -> None:
    """Features must be numeric; categorical features integer codes in 0..254 or NaN."""
    for name in features:
        if not pd.api.types.is_numeric_dtype(df[name].dtype):
            raise ValueError(
                f"feature {name!r} of {frame} must be numeric (categorical features integer-coded); "
                f"got dtype {df[name].dtype}"
            )
    for name in categorical:
        values = df[name].to_numpy(dtype=np.float64, na_value=np.nan)
        values = values[~np.isnan(values)]
        bad = values[(values != np.round(values)) | (values < 0) | (values > _MAX_CATEGORY_CODE)]
        if bad.size:
            raise ValueError(
                f"categorical feature {name!r} of {frame} must hold integer codes 0..{_MAX_CATEGORY_CODE} "
                f"(NaN for missing); got values {format_values(bad.tolist())}"
            )


def _check_class_counts(y: np.ndarray, n_splits: int, what: str, name: str = "class", need: str | None = None) -> None:
    classes, counts = np.unique(y, return_counts=True)
    small = [(c, n) for c, n in zip(classes.tolist(), counts.tolist()) if n < n_splits]
    if small:
        detail = ", ".join(f"{name} {c} has {n} rows" for c, n in small)
        need = need or f"n_splits={n_splits} (stratified cross-validation)"
        raise ValueError(f"{what}: {detail}, fewer than {need}")


def _row_requirement(n_splits: int, fixed: bool) -> tuple[int, str]:
    """Rows each class needs in a fit, and how to say it: ``n_splits`` for a grid search, 2 for a
    fit with a given ``max_leaf_nodes`` (``fixed``)."""
    if not fixed:
        return n_splits, f"n_splits={n_splits}"
    return _MIN_ROWS_FIXED, (
        f"{_MIN_ROWS_FIXED} (a fit with a given max_leaf_nodes holds out a stratified early-stopping set)"
    )


def _openmp_threads(n_threads: int | None):
    """Limit the OpenMP threads of HistGradientBoosting (``None``: leave the current limit)."""
    if n_threads is None:
        return contextlib.nullcontext()
    return threadpool_limits(limits=n_threads, user_api="openmp")


def _worker_threads(n_jobs: int):
    """joblib workers with one OpenMP thread each (they would inherit ``OMP_NUM_THREADS``)."""
    if n_jobs == 1:
        return contextlib.nullcontext()
    return parallel_config(backend="loky", inner_max_num_threads=1)


def _report(progress: Callable[[str], object] | None, message: str) -> None:
    if progress is not None:
        progress(message)


# ----------------------------------------------------------------------------------------------
# One classifier: grid-searched or with a given max_leaf_nodes
# ----------------------------------------------------------------------------------------------


def fit_classifier(
    X: pd.DataFrame,
    y,
    *,
    categorical_features: Sequence[str] = (),
    grid: Sequence[int] = (10, 25, 50),
    max_leaf_nodes: int | None = None,
    n_splits: int = 5,
    random_state: int,
    n_jobs: int = 1,
    n_threads: int | None = None,
) -> tuple[HistGradientBoostingClassifier, pd.DataFrame]:
    """Fit a gradient-boosted classifier with ``max_leaf_nodes`` chosen by cross-validated log loss.

    ``GridSearchCV(HistGradientBoostingClassifier(random_state=random_state,
    categorical_features=...), {"max_leaf_nodes": grid}, scoring="neg_log_loss",
    cv=StratifiedKFold(n_splits, shuffle=True, random_state=random_state), refit=True)``: the grid
    value with the lowest mean held-out log loss is refit on all rows (paper Supplementary A.3).
    With ``max_leaf_nodes`` given, only that refit is done (no cross-validation): the estimator is
    then bit-identical to the grid search's when the grid search selected the same value.
    Works for binary targets (outcome models) and multiclass targets (weight models ``P(A | V)``).

    Parameters
    ----------
    X : DataFrame of shape (n_samples, n_features)
        Numeric features. NaN means missing and is handled natively by the gradient boosting.
    y : array-like of shape (n_samples,)
        Class labels (two or more classes, each with at least ``n_splits`` rows; at least 2 rows
        with ``max_leaf_nodes`` given).
    categorical_features : sequence of str, default=()
        Names of integer-coded categorical features (codes 0..254, NaN for missing). Names that
        are not columns of ``X`` are ignored, so one list can serve models with and without ``A``.
    grid : sequence of int, default=(10, 25, 50)
        Candidate values of ``max_leaf_nodes`` (integers >= 2); not used if ``max_leaf_nodes`` is given.
    max_leaf_nodes : int or None, default=None
        Fit this value directly instead of searching ``grid``.
    n_splits : int, default=5
        Folds of the stratified cross-validation (>= 2).
    random_state : int
        Seed of both the classifier and the cross-validation splitter (from
        :func:`disaggregated_eval.seeds.sklearn_seed`).
    n_jobs : int, default=1
        Parallel fits of ``GridSearchCV``, in worker processes with one OpenMP thread each.
    n_threads : int or None, default=None
        OpenMP threads of the fits in this process (the refit); ``None`` leaves the process default
        (all cores unless ``OMP_NUM_THREADS`` is set). The result does not depend on it.

    Returns
    -------
    estimator : HistGradientBoostingClassifier
        The selected configuration refit on all of ``X``.
    table : DataFrame of shape (len(grid), 4), or (1, 4) with ``max_leaf_nodes`` given
        Columns ``max_leaf_nodes`` (int64), ``mean_cv_log_loss`` and ``std_cv_log_loss`` (float64,
        mean and standard deviation over the held-out folds; NaN without a grid search),
        ``selected`` (bool, exactly one True: the lowest mean log loss, the first in grid order on
        ties).

    Raises
    ------
    TypeError
        If ``X`` is not a DataFrame.
    ValueError
        If ``grid``, ``max_leaf_nodes`` or ``n_splits`` is invalid, ``y`` does not have one entry per
        row, contains missing values, has fewer than two classes, or a class has too few rows.
    """
    check_columns(X, [], "X")
    if max_leaf_nodes is None:
        grid = _check_grid(grid)
    else:
        max_leaf_nodes = check_int(max_leaf_nodes, "max_leaf_nodes", minimum=2)
    n_splits = check_int(n_splits, "n_splits", minimum=2)
    n_jobs = check_int(n_jobs, "n_jobs")
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X; got shape {y.shape}")
    if pd.isna(y).any():
        raise ValueError("y contains missing values")
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(f"y must contain at least two classes; got only {format_values(classes.tolist())}")
    min_rows, need = _row_requirement(n_splits, max_leaf_nodes is not None)
    _check_class_counts(y, min_rows, "cannot cross-validate" if max_leaf_nodes is None else "cannot fit", need=need)
    with _openmp_threads(_check_n_threads(n_threads)):
        return _fit_classifier(
            X,
            y,
            categorical_features=categorical_features,
            grid=grid,
            max_leaf_nodes=max_leaf_nodes,
            n_splits=n_splits,
            random_state=random_state,
            n_jobs=n_jobs,
        )


def _fit_classifier(
    X: pd.DataFrame,
    y: np.ndarray,
    *,
    categorical_features: Sequence[str],
    grid: list[int],
    max_leaf_nodes: int | None,
    n_splits: int,
    random_state: int,
    n_jobs: int,
) -> tuple[HistGradientBoostingClassifier, pd.DataFrame]:
    """:func:`fit_classifier` on checked arguments."""
    categorical = [c for c in categorical_features if c in X.columns] or None
    estimator = HistGradientBoostingClassifier(random_state=random_state, categorical_features=categorical)
    if max_leaf_nodes is not None:
        # GridSearchCV's refit is clone(estimator).set_params(**best_params).fit(X, y): the same fit.
        estimator.set_params(max_leaf_nodes=max_leaf_nodes).fit(X, y)
        table = pd.DataFrame(
            {
                "max_leaf_nodes": np.array([max_leaf_nodes], dtype=np.int64),
                "mean_cv_log_loss": np.array([np.nan]),
                "std_cv_log_loss": np.array([np.nan]),
                "selected": np.array([True]),
            }
        )
        return estimator, table
    search = GridSearchCV(
        estimator,
        {"max_leaf_nodes": grid},
        scoring="neg_log_loss",
        cv=StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=random_state),
        refit=True,
        n_jobs=n_jobs,
        error_score="raise",
    )
    with _worker_threads(n_jobs):
        search.fit(X, y)
    results = search.cv_results_
    table = pd.DataFrame(
        {
            "max_leaf_nodes": np.asarray(results["param_max_leaf_nodes"], dtype=np.int64),
            "mean_cv_log_loss": -np.asarray(results["mean_test_score"], dtype=np.float64),
            "std_cv_log_loss": np.asarray(results["std_test_score"], dtype=np.float64),
            "selected": np.arange(len(grid)) == search.best_index_,
        }
    )
    return search.best_estimator_, table


def _selected(table: pd.DataFrame) -> int:
    return int(table.loc[table["selected"], "max_leaf_nodes"].iloc[0])


def _positive_proba(estimator: HistGradientBoostingClassifier, X: pd.DataFrame) -> np.ndarray:
    """P(Y = 1) from a binary classifier trained on labels 0/1."""
    column = list(estimator.classes_).index(1)
    return np.ascontiguousarray(estimator.predict_proba(X)[:, column], dtype=np.float64)


# ----------------------------------------------------------------------------------------------
# Outcome models
# ----------------------------------------------------------------------------------------------


@dataclass
class OutcomeModels:
    """The three fitted outcome model types of one dataset (paper sections 2 and 5, Supplementary A.3).

    Attributes
    ----------
    x : HistGradientBoostingClassifier
        Subgroup-agnostic model on ``features``.
    xa : HistGradientBoostingClassifier
        Subgroup-aware model on ``features + [group]``, the group being a categorical feature.
    xa_stratified : dict of int to HistGradientBoostingClassifier
        One model on ``features`` per group code.
    features : tuple of str
        Feature columns, in the order the models were fitted with.
    categorical : tuple of str
        The categorical features among ``features``.
    group : str
        Name of the group column.

    Notes
    -----
    A plain dataclass of scikit-learn estimators, so it pickles with :mod:`joblib`.
    """

    x: HistGradientBoostingClassifier
    xa: HistGradientBoostingClassifier
    xa_stratified: dict[int, HistGradientBoostingClassifier]
    features: tuple[str, ...]
    categorical: tuple[str, ...] = ()
    group: str = "a"
    model_types: ClassVar[tuple[str, ...]] = MODEL_TYPES

    @property
    def groups(self) -> tuple[int, ...]:
        """Group codes with an ``xa_stratified`` model, sorted."""
        return tuple(sorted(self.xa_stratified))

    def predict(self, df: pd.DataFrame) -> pd.DataFrame:
        """Predict ``P(Y = 1)`` with every model type.

        Parameters
        ----------
        df : DataFrame of shape (n_samples, >= n_features + 1)
            Must contain ``features`` and the group column (integer codes).

        Returns
        -------
        DataFrame of shape (n_samples, 3)
            Columns ``x``, ``xa``, ``xa_stratified`` (float64 probabilities of ``Y = 1``), index of
            ``df``. ``xa_stratified`` scores each row with the model of its own group.

        Raises
        ------
        ValueError
            If columns are missing, group codes are not non-negative integers, or a row's group has
            no ``xa_stratified`` model.
        """
        features = list(self.features)
        check_columns(df, features + [self.group], "df")
        groups = check_group_codes(df[self.group], f"df[{self.group!r}]", max_code=_MAX_CATEGORY_CODE)
        unknown = sorted(set(np.unique(groups).tolist()) - set(self.xa_stratified))
        if unknown:
            raise ValueError(
                f"no xa_stratified model for group(s) {unknown} of df[{self.group!r}]; "
                f"models exist for groups {list(self.groups)}"
            )
        X = df[features]
        stratified = np.empty(len(df), dtype=np.float64)
        for code in np.unique(groups):
            rows = groups == code
            stratified[rows] = _positive_proba(self.xa_stratified[int(code)], X.loc[rows])
        return pd.DataFrame(
            {
                "x": _positive_proba(self.x, X),
                "xa": _positive_proba(self.xa, df[features + [self.group]]),
                "xa_stratified": stratified,
            },
            index=df.index,
        )


def fit_outcome_models(
    train: pd.DataFrame,
    *,
    features: Sequence[str],
    categorical: Sequence[str] = (),
    group: str = "a",
    label: str = "y",
    grid: Sequence[int] = (10, 25, 50),
    n_splits: int = 5,
    seed: int,
    dataset: str,
    n_jobs: int = 1,
    n_threads: int | None = None,
    progress: Callable[[str], object] | None = None,
) -> tuple[OutcomeModels, pd.DataFrame]:
    """Fit the outcome models ``x``, ``xa`` and ``xa_stratified`` on the training split.

    Each model is :func:`fit_classifier` (grid search of ``max_leaf_nodes`` by stratified
    ``n_splits``-fold cross-validated log loss, refit on all its rows; paper Supplementary A.3).
    ``x`` uses ``features``; ``xa`` uses ``features`` and ``group`` as a categorical feature;
    ``xa_stratified`` fits one model on ``features`` per group, on that group's rows only.

    Parameters
    ----------
    train : DataFrame of shape (n_samples, >= n_features + 2)
        Training split with ``features``, ``group`` (integer codes 0..254) and ``label`` (0/1).
    features : sequence of str
        Feature columns (numeric; NaN for missing). Must not contain ``group`` or ``label``.
    categorical : sequence of str, default=()
        The integer-coded categorical features among ``features`` (codes 0..254, NaN missing).
    group, label : str, default "a", "y"
        Names of the group and label columns.
    grid : sequence of int, default=(10, 25, 50)
        Candidate ``max_leaf_nodes``.
    n_splits : int, default=5
        Folds of the inner cross-validation.
    seed : int
        Root seed; model ``m`` uses ``sklearn_seed(seed, "outcome_models", dataset, m)`` and the
        stratified model of group ``g`` ``sklearn_seed(seed, "outcome_models", dataset,
        "xa_stratified", g)``.
    dataset : str
        Dataset name (part of the seed path).
    n_jobs : int, default=1
        Parallel fits of each grid search (worker processes with one OpenMP thread each).
    n_threads : int or None, default=None
        OpenMP threads of the fits in this process (the refits; via :mod:`threadpoolctl`);
        ``None`` leaves the process default (all cores unless ``OMP_NUM_THREADS`` is set). Results
        do not depend on it or on ``n_jobs``.
    progress : callable, optional
        Called with one log line per fitted model.

    Returns
    -------
    models : OutcomeModels
    selection : DataFrame
        One row per (model, group, max_leaf_nodes): columns ``model`` (str), ``group`` (str:
        ``"overall"`` for ``x`` and ``xa``, the group code for ``xa_stratified``),
        ``max_leaf_nodes`` (int64), ``mean_cv_log_loss``, ``std_cv_log_loss`` (float64),
        ``selected`` (bool).

    Raises
    ------
    ValueError
        If columns are missing or not numeric, categorical codes are invalid, labels are not 0/1,
        group codes are not integers in 0..254, ``grid`` or ``n_splits`` is invalid, or a group (or
        a label within a group) has fewer than ``n_splits`` rows.
    """
    features, categorical = _check_feature_names(features, categorical, reserved={"group": group, "label": label})
    if not features:
        raise ValueError("features must name at least one column")
    grid = _check_grid(grid)
    n_splits = check_int(n_splits, "n_splits", minimum=2)
    n_jobs = check_int(n_jobs, "n_jobs")
    n_threads = _check_n_threads(n_threads)
    seed = check_seed(seed)
    dataset = _check_dataset(dataset)
    check_columns(train, features + [group, label], "train")
    _check_features(train, features, categorical, "train")
    y = check_labels(train[label], f"train[{label!r}]", dtype=np.int64)
    a = check_group_codes(train[group], f"train[{group!r}]", max_code=_MAX_CATEGORY_CODE)
    _check_class_counts(y, n_splits, "train", name="label")
    codes, counts = np.unique(a, return_counts=True)
    for code, count in zip(codes.tolist(), counts.tolist()):
        if count < n_splits:
            raise ValueError(f"group {code} has {count} rows in train, fewer than n_splits={n_splits}")
        _check_class_counts(y[a == code], n_splits, f"group {code} in train", name="label")

    X = train[features]
    tables = []

    def fit(name: str, frame: pd.DataFrame, target: np.ndarray, cats: list[str], group_name: str, *path):
        start = time.perf_counter()
        estimator, table = _fit_classifier(
            frame,
            target,
            categorical_features=cats,
            grid=grid,
            max_leaf_nodes=None,
            n_splits=n_splits,
            random_state=seeds.sklearn_seed(seed, "outcome_models", dataset, name, *path),
            n_jobs=n_jobs,
        )
        _report(
            progress,
            f"outcome model {name} (group {group_name}): {len(frame)} rows x {frame.shape[1]} features, "
            f"max_leaf_nodes={_selected(table)}, {time.perf_counter() - start:.1f} s",
        )
        table.insert(0, "group", group_name)
        table.insert(0, "model", name)
        tables.append(table)
        return estimator

    with _openmp_threads(n_threads):
        model_x = fit("x", X, y, categorical, "overall")
        model_xa = fit("xa", train[features + [group]], y, categorical + [group], "overall")
        stratified = {}
        for code in codes.tolist():
            rows = a == code
            stratified[int(code)] = fit("xa_stratified", X.loc[rows], y[rows], categorical, str(code), int(code))
    models = OutcomeModels(
        x=model_x,
        xa=model_xa,
        xa_stratified=stratified,
        features=tuple(features),
        categorical=tuple(categorical),
        group=group,
    )
    selection = pd.concat(tables, ignore_index=True)
    selection["model"] = selection["model"].astype(str)
    selection["group"] = selection["group"].astype(str)
    return models, selection
