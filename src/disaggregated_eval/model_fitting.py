"""The grid-searched classifier every model of the project is fitted with, its checks and its threads.

Every model (the outcome models of :mod:`disaggregated_eval.outcome_models`, the weight models
``P(A | V)`` of :mod:`disaggregated_eval.weight_models`, the coverage study's refits) is a
:class:`sklearn.ensemble.HistGradientBoostingClassifier` whose ``max_leaf_nodes`` is chosen from a
grid by stratified k-fold cross-validation with the lowest mean log loss, then refit on all of its
training data (paper Supplementary A.3; :class:`sklearn.model_selection.GridSearchCV`); or, for cheap
refits on new evaluation sets, given (``max_leaf_nodes=``), which reproduces the grid search's refit
bit for bit: :func:`fit_classifier`. A caller that fits many models checks its arguments once, up
front, with the checks below (:func:`check_grid`, :func:`check_features`,
:func:`check_class_counts`, ...), then fits each model with :func:`fit_classifier_unchecked`.

Missing feature values (NaN) stay missing: the gradient boosting handles them natively. Categorical
features are integer-coded columns (codes ``0..MAX_CATEGORY_CODE``, NaN for missing).

Threads: ``n_jobs`` parallel fits of each grid search run in joblib's ``loky`` worker processes with
one OpenMP thread each (:func:`worker_threads`); without that limit the workers inherit
``OMP_NUM_THREADS`` (which Snakemake sets to the job's threads), so ``n_jobs = t`` workers would run
``t * t`` OpenMP threads on ``t`` cores. ``n_threads`` sets the OpenMP threads of the fits and
predictions in the calling process (the refit of each grid search; :func:`openmp_threads`). Results
do not depend on either.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from joblib import parallel_config
from threadpoolctl import threadpool_limits

from .validation import check_columns, check_int, check_names, format_values

if TYPE_CHECKING:  # scikit-learn is imported where a model is fitted (0.6 s and 25 MB an audit without controls
    # does not need)
    from sklearn.ensemble import HistGradientBoostingClassifier

__all__ = [
    "MAX_CATEGORY_CODE",
    "check_grid",
    "check_n_threads",
    "check_dataset",
    "check_feature_names",
    "check_features",
    "check_class_counts",
    "row_requirement",
    "openmp_threads",
    "worker_threads",
    "fit_classifier",
    "fit_classifier_unchecked",
    "chosen_max_leaf_nodes",
    "report_fit",
]

#: Largest categorical code HistGradientBoosting accepts (``max_bins - 1`` with the default 255 bins).
MAX_CATEGORY_CODE = 254
#: Rows each class needs in a fit without a grid search: HistGradientBoosting's early stopping
#: (on for more than 10,000 rows) holds out a validation set stratified by class.
_MIN_ROWS_FIXED = 2


# ----------------------------------------------------------------------------------------------
# Checks of the arguments of a fit (the generic ones are in ``validation``)
# ----------------------------------------------------------------------------------------------


def check_grid(grid) -> list[int]:
    """The candidate values of ``max_leaf_nodes`` of a grid search.

    Parameters
    ----------
    grid : iterable of int
        Distinct integers >= 2 (not bool), at least one.

    Returns
    -------
    list of int
        The values as Python ints, in the order given.

    Raises
    ------
    ValueError
        If ``grid`` is a string or not iterable, is empty, holds a value that is not an integer >= 2
        (the bad values are named), or holds a value twice.
    """
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


def check_n_threads(n_threads) -> int | None:
    """The OpenMP threads of the fits in the calling process.

    Parameters
    ----------
    n_threads : int or None
        An integer >= 1 (not bool), or None for the process default.

    Returns
    -------
    int or None

    Raises
    ------
    ValueError
        If ``n_threads`` is neither None nor an integer >= 1.
    """
    if n_threads is None:
        return None
    if isinstance(n_threads, (bool, np.bool_)) or not isinstance(n_threads, (int, np.integer)) or n_threads < 1:
        raise ValueError(f"n_threads must be None or an integer >= 1; got {n_threads!r}")
    return int(n_threads)


def check_dataset(dataset) -> str:
    """The dataset name of a fit's seed path (``("outcome_models", dataset, ...)``).

    Parameters
    ----------
    dataset : str
        A non-empty string.

    Returns
    -------
    str
        ``dataset`` itself.

    Raises
    ------
    ValueError
        If ``dataset`` is not a non-empty string.
    """
    if not isinstance(dataset, str) or not dataset:
        raise ValueError(f"dataset must be a non-empty string; got {dataset!r}")
    return dataset


def check_feature_names(features, categorical, *, reserved: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Distinct feature names, the categorical ones among them, none of the ``reserved`` columns.

    Parameters
    ----------
    features, categorical : iterable of str
        Feature columns, and the integer-coded categorical features among them.
    reserved : mapping of str to str
        Columns that must not be features, by what they are (``{"group": "a", "label": "y"}``).

    Returns
    -------
    features, categorical : list of str

    Raises
    ------
    ValueError
        If either is not a list of distinct strings (:func:`disaggregated_eval.validation.check_names`),
        a reserved column is a feature, or a categorical feature is not among ``features``.
    """
    features = check_names(features, "features")
    categorical = check_names(categorical, "categorical")
    for what, name in reserved.items():
        if name in features:
            raise ValueError(f"the {what} column {name!r} must not be among features {features!r}")
    stray = [c for c in categorical if c not in features]
    if stray:
        raise ValueError(f"categorical features {stray!r} are not among features {features!r}")
    return features, categorical


def check_features(df: pd.DataFrame, features: Sequence[str], categorical: Sequence[str], frame: str) -> None:
    """Check the feature columns of a frame: numeric, categorical ones integer codes ``0..254`` or NaN.

    Parameters
    ----------
    df : DataFrame of shape (n_samples, >= n_features)
        Holds the columns ``features`` (checked by the caller).
    features : sequence of str
        Columns that must have a numeric dtype.
    categorical : sequence of str
        Columns among ``features`` that must hold integer codes ``0..MAX_CATEGORY_CODE`` or NaN.
    frame : str
        How ``df`` is named in messages.

    Raises
    ------
    ValueError
        If a feature is not numeric (its dtype is named) or a categorical feature holds another value
        (the first few are named).
    """
    for name in features:
        if not pd.api.types.is_numeric_dtype(df[name].dtype):
            raise ValueError(
                f"feature {name!r} of {frame} must be numeric (categorical features integer-coded); "
                f"got dtype {df[name].dtype}"
            )
    for name in categorical:
        values = df[name].to_numpy(dtype=np.float64, na_value=np.nan)
        values = values[~np.isnan(values)]
        bad = values[(values != np.round(values)) | (values < 0) | (values > MAX_CATEGORY_CODE)]
        if bad.size:
            raise ValueError(
                f"categorical feature {name!r} of {frame} must hold integer codes 0..{MAX_CATEGORY_CODE} "
                f"(NaN for missing); got values {format_values(bad.tolist())}"
            )


def check_class_counts(y: np.ndarray, n_splits: int, what: str, name: str = "class", need: str | None = None) -> None:
    """Check that every class of a target has at least ``n_splits`` rows.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Class labels.
    n_splits : int
        Rows each class needs (the folds of a stratified cross-validation, or
        :func:`row_requirement`'s count).
    what : str
        What cannot be done otherwise, at the start of the message (``"cannot cross-fit"``).
    name : str, default="class"
        What a class is called in the message (``"label"``, ``"group"``).
    need : str or None, default=None
        How the requirement is said; default ``n_splits={n_splits} (stratified cross-validation)``.

    Raises
    ------
    ValueError
        ``{what}: {name} {c} has {n} rows, ..., fewer than {need}``, naming every class short of rows.
    """
    classes, counts = np.unique(y, return_counts=True)
    small = [(c, n) for c, n in zip(classes.tolist(), counts.tolist()) if n < n_splits]
    if small:
        detail = ", ".join(f"{name} {c} has {n} rows" for c, n in small)
        need = need or f"n_splits={n_splits} (stratified cross-validation)"
        raise ValueError(f"{what}: {detail}, fewer than {need}")


def row_requirement(n_splits: int, fixed: bool) -> tuple[int, str]:
    """Rows each class needs in a fit, and how to say it in a message.

    Parameters
    ----------
    n_splits : int
        Folds of the grid search's cross-validation.
    fixed : bool
        Whether the fit has a given ``max_leaf_nodes`` (no grid search).

    Returns
    -------
    rows : int
        ``n_splits`` for a grid search; 2 for a fit with a given ``max_leaf_nodes`` (its early
        stopping, on above 10,000 rows, holds out a validation set stratified by class).
    need : str
        The requirement as text, for :func:`check_class_counts`'s ``need``.
    """
    if not fixed:
        return n_splits, f"n_splits={n_splits}"
    return _MIN_ROWS_FIXED, (
        f"{_MIN_ROWS_FIXED} (a fit with a given max_leaf_nodes holds out a stratified early-stopping set)"
    )


# ----------------------------------------------------------------------------------------------
# Threads
# ----------------------------------------------------------------------------------------------


def openmp_threads(n_threads: int | None) -> contextlib.AbstractContextManager:
    """Limit the OpenMP threads of HistGradientBoosting in the calling process.

    Parameters
    ----------
    n_threads : int or None
        Threads (checked by :func:`check_n_threads`); ``None`` leaves the current limit.

    Returns
    -------
    context manager
        :func:`threadpoolctl.threadpool_limits` on the ``openmp`` API, or a no-op.
    """
    if n_threads is None:
        return contextlib.nullcontext()
    return threadpool_limits(limits=n_threads, user_api="openmp")


def worker_threads(n_jobs: int) -> contextlib.AbstractContextManager:
    """joblib worker processes with one OpenMP thread each (they would inherit ``OMP_NUM_THREADS``).

    Parameters
    ----------
    n_jobs : int
        Parallel fits of a grid search; with 1 nothing runs in a worker.

    Returns
    -------
    context manager
        ``joblib.parallel_config(backend="loky", inner_max_num_threads=1)``, or a no-op for ``n_jobs=1``.
    """
    if n_jobs == 1:
        return contextlib.nullcontext()
    return parallel_config(backend="loky", inner_max_num_threads=1)


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
        grid = check_grid(grid)
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
    min_rows, need = row_requirement(n_splits, max_leaf_nodes is not None)
    check_class_counts(y, min_rows, "cannot cross-validate" if max_leaf_nodes is None else "cannot fit", need=need)
    with openmp_threads(check_n_threads(n_threads)):
        return fit_classifier_unchecked(
            X,
            y,
            categorical_features=categorical_features,
            grid=grid,
            max_leaf_nodes=max_leaf_nodes,
            n_splits=n_splits,
            random_state=random_state,
            n_jobs=n_jobs,
        )


def fit_classifier_unchecked(
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
    """:func:`fit_classifier` on arguments the caller has checked, in its own OpenMP thread limit.

    For a caller fitting many models: it checks once (:func:`check_grid`, :func:`check_class_counts`
    with :func:`row_requirement`, ...) and sets the threads once (:func:`openmp_threads`) around all
    its fits. Nothing is checked here: a bad argument fails inside scikit-learn.

    Parameters
    ----------
    X : DataFrame of shape (n_samples, n_features)
        Numeric features.
    y : ndarray of shape (n_samples,)
        Class labels without missing values, every class with enough rows.
    categorical_features : sequence of str
        As in :func:`fit_classifier` (names that are not columns of ``X`` are ignored).
    grid : list of int
        Checked candidate values of ``max_leaf_nodes``; not used if ``max_leaf_nodes`` is given.
    max_leaf_nodes : int or None
        A value to fit directly, or None for the grid search.
    n_splits, random_state, n_jobs : int
        As in :func:`fit_classifier`.

    Returns
    -------
    estimator, table
        As in :func:`fit_classifier`.
    """
    from sklearn.ensemble import HistGradientBoostingClassifier  # imported when a model is fitted (0.6 s, 25 MB)
    from sklearn.model_selection import GridSearchCV, StratifiedKFold

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
    with worker_threads(n_jobs):
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


def chosen_max_leaf_nodes(table: pd.DataFrame) -> int:
    """The ``max_leaf_nodes`` a fit selected.

    Parameters
    ----------
    table : DataFrame
        A table of :func:`fit_classifier` (columns ``max_leaf_nodes`` and ``selected``, exactly one
        row selected).

    Returns
    -------
    int
    """
    return int(table.loc[table["selected"], "max_leaf_nodes"].iloc[0])


def report_fit(progress: Callable[[str], object] | None, message: str) -> None:
    """Give one log line of a fit to ``progress``, if there is one.

    Parameters
    ----------
    progress : callable or None
        Called with ``message``; None reports nothing.
    message : str
        The line (model, rows, selected ``max_leaf_nodes``, seconds).
    """
    if progress is not None:
        progress(message)
