"""Outcome models and weight models ``P(A | V)``.

Outcome models predict ``Y`` from the covariates ``X`` in three ways (SPEC 1, 4.1): ``x`` uses ``X``
only, ``xa`` uses ``X`` and the group ``A`` as a categorical feature, and ``xa_stratified`` is one
model on ``X`` per group, each row being scored by its own group's model. Weight models estimate
``P(A = a | V)`` for the control variables ``V in {X, Y, R}`` (SPEC 4.2): for ``X`` and ``Y`` they are
fitted on the training split and predict the test split; for the score ``R`` they are cross-fitted on
the test split (paper Supplementary A.3 and Algorithm 2).

Every model is a :class:`sklearn.ensemble.HistGradientBoostingClassifier` whose ``max_leaf_nodes``
is chosen from a grid by stratified k-fold cross-validation with the lowest mean log loss, then refit
on all of its training data (paper A.3; :class:`sklearn.model_selection.GridSearchCV`). Every
``random_state`` comes from :func:`disaggregated_eval.seeds.sklearn_seed` with the name paths of
``docs/design.md``:

- ``("outcome_models", dataset, model)`` and ``("outcome_models", dataset, "xa_stratified", group)``;
- ``("weight_models", dataset, "X")``, ``("weight_models", dataset, "Y")``;
- ``("weight_models", dataset, "R", model)`` for the outer cross-fitting split of the test rows and
  ``("weight_models", dataset, "R", model, fold)`` for the grid search fitted without outer fold
  ``fold``.

Missing feature values (NaN) stay missing: the gradient boosting handles them natively. Categorical
features are integer-coded columns (codes ``0..254``, NaN for missing).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from threadpoolctl import threadpool_limits

from disaggregated_eval import seeds

__all__ = [
    "MODEL_TYPES",
    "WEIGHT_CONTROLS",
    "R_FEATURE",
    "R_CLIP",
    "fit_classifier",
    "OutcomeModels",
    "fit_outcome_models",
    "fit_weight_models",
    "crossfit_fold_ids",
    "logit_score",
]

#: Outcome model types, always all three (SPEC 1).
MODEL_TYPES: tuple[str, ...] = ("x", "xa", "xa_stratified")
#: Control variables for which weight models ``P(A | V)`` are fitted.
WEIGHT_CONTROLS: tuple[str, ...] = ("X", "Y", "R")
#: Name of the single feature ``logit(clip(R))`` of the cross-fitted ``P(A | R)`` models.
R_FEATURE = "logit_r"
#: Scores are clipped to ``[R_CLIP, 1 - R_CLIP]`` before the logit.
R_CLIP = 1e-6
#: Largest categorical code HistGradientBoosting accepts (``max_bins - 1`` with the default 255 bins).
_MAX_CATEGORY_CODE = 254



# ----------------------------------------------------------------------------------------------
# Validation helpers (public functions validate; the internals trust their callers)
# ----------------------------------------------------------------------------------------------


def _format_values(values: Iterable, limit: int = 10) -> str:
    values = sorted(set(values), key=lambda v: (str(type(v)), v))
    shown = ", ".join(repr(v.item() if isinstance(v, np.generic) else v) for v in values[:limit])
    more = f", ... ({len(values) - limit} more)" if len(values) > limit else ""
    return "{" + shown + more + "}"


def _check_grid(grid) -> list[int]:
    if isinstance(grid, (str, bytes)) or not isinstance(grid, Iterable):
        raise ValueError(f"grid must be a non-empty list of integers >= 2 (max_leaf_nodes); got {grid!r}")
    values = list(grid)
    if not values:
        raise ValueError(f"grid must be a non-empty list of integers >= 2 (max_leaf_nodes); got {grid!r}")
    bad = [
        v
        for v in values
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 2
    ]
    if bad:
        raise ValueError(
            f"grid must be a non-empty list of integers >= 2 (max_leaf_nodes); got bad values {bad!r} in {grid!r}"
        )
    if len(set(int(v) for v in values)) != len(values):
        raise ValueError(f"grid values must be distinct; got {grid!r}")
    return [int(v) for v in values]


def _check_n_splits(n_splits, name: str = "n_splits") -> int:
    if isinstance(n_splits, (bool, np.bool_)) or not isinstance(n_splits, (int, np.integer)) or n_splits < 2:
        raise ValueError(f"{name} must be an integer >= 2; got {n_splits!r}")
    return int(n_splits)


def _check_names(names, what: str) -> list[str]:
    if isinstance(names, str):
        raise ValueError(f"{what} must be a list of column names, not a single string; got {names!r}")
    names = list(names)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise ValueError(f"{what} must be column names (str); got {bad!r}")
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise ValueError(f"{what} contain duplicates: {duplicated!r}")
    return names


def _check_columns(df, columns: Sequence[str], frame: str) -> None:
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{frame} must be a pandas DataFrame; got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{frame} is missing columns {missing!r}; it has {list(df.columns)!r}")


def _check_features(
    df: pd.DataFrame, features: Sequence[str], categorical: Sequence[str], frame: str
) -> None:
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
                f"(NaN for missing); got values {_format_values(bad.tolist())}"
            )


def _integer_codes(values, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(codes, bad)``: int64 codes and the values that are not integers in ``lo..hi``."""
    s = pd.Series(values)
    if pd.api.types.is_numeric_dtype(s.dtype) and not pd.api.types.is_bool_dtype(s.dtype):
        arr = s.to_numpy(dtype=np.float64, na_value=np.nan)
        with np.errstate(invalid="ignore"):
            ok = np.isfinite(arr) & (arr == np.round(arr)) & (arr >= lo) & (arr <= hi)
        bad = s.to_numpy()[~ok]
        return np.where(ok, arr, -1).astype(np.int64), bad
    arr = s.to_numpy(dtype=object)
    ok = np.array([_is_int_in(v, lo, hi) for v in arr], dtype=bool)
    codes = np.array([int(v) if k else -1 for v, k in zip(arr, ok)], dtype=np.int64)
    return codes, arr[~ok]


def _check_labels(values, frame: str, label: str) -> np.ndarray:
    codes, bad = _integer_codes(values, 0, 1)
    if bad.size:
        raise ValueError(f"labels ({frame}[{label!r}]) must be 0/1; got values {_format_values(map(_show, bad))}")
    return codes


def _check_groups(values, frame: str, group: str, n_groups: int | None) -> np.ndarray:
    hi = (n_groups - 1) if n_groups is not None else _MAX_CATEGORY_CODE
    codes, bad = _integer_codes(values, 0, hi)
    if bad.size:
        expected = f"0..{n_groups - 1} (n_groups={n_groups})" if n_groups is not None else f"0..{hi}"
        raise ValueError(
            f"group codes ({frame}[{group!r}]) must be integers in {expected}; "
            f"got values {_format_values(map(_show, bad))}"
        )
    return codes


def _show(v):
    """A hashable, printable stand-in for a bad value (NaN and None included)."""
    if v is None or v is pd.NA:
        return "missing"
    if isinstance(v, (float, np.floating)) and np.isnan(v):
        return "nan"
    return v.item() if isinstance(v, np.generic) else v


def _is_int_in(v, lo: int, hi: int) -> bool:
    if v is None or v is pd.NA or isinstance(v, (bool, np.bool_, str, bytes)):
        return False
    if isinstance(v, (int, np.integer)):
        return lo <= int(v) <= hi
    if isinstance(v, (float, np.floating)):
        return bool(np.isfinite(v)) and float(v).is_integer() and lo <= v <= hi
    return False


def _check_class_counts(y: np.ndarray, n_splits: int, what: str, name: str = "class") -> None:
    classes, counts = np.unique(y, return_counts=True)
    small = [(c, n) for c, n in zip(classes.tolist(), counts.tolist()) if n < n_splits]
    if small:
        detail = ", ".join(f"{name} {c} has {n} rows" for c, n in small)
        raise ValueError(f"{what}: {detail}, fewer than n_splits={n_splits} (stratified cross-validation)")


def _check_seed_args(seed, dataset) -> None:
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    if not isinstance(dataset, str) or not dataset:
        raise ValueError(f"dataset must be a non-empty string; got {dataset!r}")


def _check_n_threads(n_threads) -> int | None:
    if n_threads is None:
        return None
    if isinstance(n_threads, (bool, np.bool_)) or not isinstance(n_threads, (int, np.integer)) or n_threads < 1:
        raise ValueError(f"n_threads must be None or an integer >= 1; got {n_threads!r}")
    return int(n_threads)


def _openmp_threads(n_threads: int | None):
    """Limit the OpenMP threads of HistGradientBoosting (``None``: leave the current limit)."""
    if n_threads is None:
        return contextlib.nullcontext()
    return threadpool_limits(limits=n_threads, user_api="openmp")


def _report(progress: Callable[[str], object] | None, message: str) -> None:
    if progress is not None:
        progress(message)


# ----------------------------------------------------------------------------------------------
# One grid-searched classifier
# ----------------------------------------------------------------------------------------------


def fit_classifier(
    X: pd.DataFrame,
    y,
    *,
    categorical_features: Sequence[str] = (),
    grid: Sequence[int] = (10, 25, 50),
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
    Works for binary targets (outcome models) and multiclass targets (weight models ``P(A | V)``).

    Parameters
    ----------
    X : DataFrame of shape (n_samples, n_features)
        Numeric features. NaN means missing and is handled natively by the gradient boosting.
    y : array-like of shape (n_samples,)
        Class labels (two or more classes, each with at least ``n_splits`` rows).
    categorical_features : sequence of str, default=()
        Names of integer-coded categorical features (codes 0..254, NaN for missing). Names that
        are not columns of ``X`` are ignored, so one list can serve models with and without ``A``.
    grid : sequence of int, default=(10, 25, 50)
        Candidate values of ``max_leaf_nodes`` (integers >= 2).
    n_splits : int, default=5
        Folds of the stratified cross-validation (>= 2).
    random_state : int
        Seed of both the classifier and the cross-validation splitter (from
        :func:`disaggregated_eval.seeds.sklearn_seed`).
    n_jobs : int, default=1
        Parallel fits of ``GridSearchCV``.
    n_threads : int or None, default=None
        OpenMP threads of each HistGradientBoosting fit and prediction (via :mod:`threadpoolctl`);
        ``None`` leaves the process default (all cores unless ``OMP_NUM_THREADS`` is set). Set it to
        the cores actually available: oversubscribed OpenMP threads slow the fits by an order of
        magnitude on a shared machine.

    Returns
    -------
    estimator : HistGradientBoostingClassifier
        The selected configuration refit on all of ``X``.
    table : DataFrame of shape (len(grid), 4)
        Columns ``max_leaf_nodes`` (int64), ``mean_cv_log_loss`` and ``std_cv_log_loss`` (float64,
        mean and standard deviation over the held-out folds), ``selected`` (bool, exactly one True:
        the lowest mean log loss, the first in grid order on ties).

    Raises
    ------
    TypeError
        If ``X`` is not a DataFrame.
    ValueError
        If ``grid`` or ``n_splits`` is invalid, ``y`` does not have one entry per row, contains
        missing values, has fewer than two classes, or a class has fewer than ``n_splits`` rows.
    """
    grid = _check_grid(grid)
    n_splits = _check_n_splits(n_splits)
    if not isinstance(X, pd.DataFrame):
        raise TypeError(f"X must be a pandas DataFrame; got {type(X).__name__}")
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X; got shape {y.shape}")
    if pd.isna(y).any():
        raise ValueError("y contains missing values")
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(f"y must contain at least two classes; got only {_format_values(classes.tolist())}")
    _check_class_counts(y, n_splits, "cannot cross-validate")
    categorical = [c for c in categorical_features if c in X.columns] or None
    estimator = HistGradientBoostingClassifier(random_state=random_state, categorical_features=categorical)
    search = GridSearchCV(
        estimator,
        {"max_leaf_nodes": grid},
        scoring="neg_log_loss",
        cv=StratifiedKFold(n_splits=n_splits, shuffle=True, random_state=random_state),
        refit=True,
        n_jobs=n_jobs,
        error_score="raise",
    )
    with _openmp_threads(_check_n_threads(n_threads)):
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


def _positive_proba(estimator: HistGradientBoostingClassifier, X: pd.DataFrame) -> np.ndarray:
    """P(Y = 1) from a binary classifier trained on labels 0/1."""
    column = list(estimator.classes_).index(1)
    return np.ascontiguousarray(estimator.predict_proba(X)[:, column], dtype=np.float64)


# ----------------------------------------------------------------------------------------------
# Outcome models
# ----------------------------------------------------------------------------------------------


@dataclass
class OutcomeModels:
    """The three fitted outcome model types of one dataset (SPEC 1, 4.1).

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
        _check_columns(df, features + [self.group], "df")
        groups = _check_groups(df[self.group], "df", self.group, None)
        unknown = sorted(set(np.unique(groups).tolist()) - set(self.xa_stratified))
        if unknown:
            raise ValueError(
                f"no xa_stratified model for group(s) {unknown} of df[{self.group!r}]; "
                f"models exist for groups {list(self.groups)}"
            )
        X = df[features]
        xa_frame = df[features + [self.group]]
        stratified = np.empty(len(df), dtype=np.float64)
        for code in np.unique(groups):
            rows = groups == code
            stratified[rows] = _positive_proba(self.xa_stratified[int(code)], X.loc[rows])
        return pd.DataFrame(
            {
                "x": _positive_proba(self.x, X),
                "xa": _positive_proba(self.xa, xa_frame),
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
        Parallel fits of each grid search.
    n_threads : int or None, default=None
        OpenMP threads of each HistGradientBoosting fit and prediction (via :mod:`threadpoolctl`);
        ``None`` leaves the process default (all cores unless ``OMP_NUM_THREADS`` is set). Set it to
        the cores actually available: oversubscribed OpenMP threads slow the fits by an order of
        magnitude on a shared machine.
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
    features = _check_names(features, "features")
    categorical = _check_names(categorical, "categorical")
    if not features:
        raise ValueError("features must name at least one column")
    for name, what in ((group, "group"), (label, "label")):
        if name in features:
            raise ValueError(f"the {what} column {name!r} must not be among features {features!r}")
    stray = [c for c in categorical if c not in features]
    if stray:
        raise ValueError(f"categorical features {stray!r} are not among features {features!r}")
    grid = _check_grid(grid)
    n_splits = _check_n_splits(n_splits)
    n_threads = _check_n_threads(n_threads)
    _check_seed_args(seed, dataset)
    _check_columns(train, features + [group, label], "train")
    _check_features(train, features, categorical, "train")
    y = _check_labels(train[label], "train", label)
    a = _check_groups(train[group], "train", group, None)
    _check_class_counts(y, n_splits, "train", name="label")
    codes, counts = np.unique(a, return_counts=True)
    for code, count in zip(codes.tolist(), counts.tolist()):
        if count < n_splits:
            raise ValueError(f"group {code} has {count} rows in train, fewer than n_splits={n_splits}")
        _check_class_counts(y[a == code], n_splits, f"group {code} in train", name="label")

    X = train[features]
    X_a = train[features + [group]]
    categorical_a = categorical + [group]
    tables = []

    def fit(name: str, frame: pd.DataFrame, target: np.ndarray, cats: list[str], group_name: str, *path):
        start = time.perf_counter()
        estimator, table = fit_classifier(
            frame,
            target,
            categorical_features=cats,
            grid=grid,
            n_splits=n_splits,
            random_state=seeds.sklearn_seed(seed, "outcome_models", dataset, name, *path),
            n_jobs=n_jobs,
        )
        chosen = int(table.loc[table["selected"], "max_leaf_nodes"].iloc[0])
        _report(
            progress,
            f"outcome model {name} (group {group_name}): {len(frame)} rows x {frame.shape[1]} features, "
            f"max_leaf_nodes={chosen}, {time.perf_counter() - start:.1f} s",
        )
        table.insert(0, "group", group_name)
        table.insert(0, "model", name)
        tables.append(table)
        return estimator

    with _openmp_threads(n_threads):
        model_x = fit("x", X, y, categorical, "overall")
        model_xa = fit("xa", X_a, y, categorical_a, "overall")
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


# ----------------------------------------------------------------------------------------------
# Weight models P(A | V)
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


def crossfit_fold_ids(groups, *, crossfit_folds: int, random_state: int) -> np.ndarray:
    """Outer fold of each test row for cross-fitting ``P(A | R)`` (paper Algorithm 2).

    ``StratifiedKFold(crossfit_folds, shuffle=True, random_state=random_state)`` on the rows,
    stratified by group. :func:`fit_weight_models` uses ``random_state = sklearn_seed(seed,
    "weight_models", dataset, "R", model)``.

    Parameters
    ----------
    groups : array-like of shape (n_samples,)
        Group codes of the test rows.
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
    crossfit_folds = _check_n_splits(crossfit_folds, "crossfit_folds")
    groups = np.asarray(groups)
    _check_class_counts(groups, crossfit_folds, "cannot cross-fit", name="group")
    fold = np.full(groups.shape[0], -1, dtype=np.int64)
    splitter = StratifiedKFold(n_splits=crossfit_folds, shuffle=True, random_state=random_state)
    for k, (_, held_out) in enumerate(splitter.split(np.zeros((groups.shape[0], 1)), groups)):
        fold[held_out] = k
    return fold


def _group_proba(
    estimator: HistGradientBoostingClassifier, X: pd.DataFrame, n_groups: int, where: str
) -> np.ndarray:
    """``predict_proba`` with column ``k`` = P(A = k | V), whatever classes the model saw."""
    classes = np.asarray(estimator.classes_).astype(np.int64)
    absent = sorted(set(range(n_groups)) - set(classes.tolist()))
    if absent:
        raise ValueError(
            f"group(s) {absent} absent from the training data of {where}; "
            f"P(A = a | V) cannot be estimated for them"
        )
    proba = np.zeros((X.shape[0], n_groups), dtype=np.float64)
    proba[:, classes] = estimator.predict_proba(X)
    return proba


def _weights_frame(control: str, model: str, proba: np.ndarray) -> pd.DataFrame:
    frame = pd.DataFrame(
        {
            "weight_source": "estimated",
            "control": control,
            "model": model,
            "row": np.arange(proba.shape[0], dtype=np.int64),
        }
    )
    for k in range(proba.shape[1]):
        frame[f"p_{k}"] = proba[:, k]
    return frame


def fit_weight_models(
    train: pd.DataFrame,
    test: pd.DataFrame,
    test_scores: Mapping[str, np.ndarray],
    *,
    features: Sequence[str],
    categorical: Sequence[str] = (),
    group: str = "a",
    label: str = "y",
    n_groups: int,
    grid: Sequence[int] = (10, 25, 50),
    n_splits: int = 5,
    crossfit_folds: int = 5,
    seed: int,
    dataset: str,
    n_jobs: int = 1,
    controls: Sequence[str] = WEIGHT_CONTROLS,
    n_threads: int | None = None,
    progress: Callable[[str], object] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Estimate ``P(A = a | V)`` for every test row (paper Supplementary A.3, Algorithm 2).

    - ``V = X``: multiclass :func:`fit_classifier` of ``A`` on ``features`` (without ``A``) on the
      training split, predicted on the test split.
    - ``V = Y``: the same with the single feature ``label``.
    - ``V = R``, one per entry of ``test_scores``: cross-fitting on the test split. The test rows
      are split by ``StratifiedKFold(crossfit_folds, shuffle=True)`` stratified by ``A``
      (:func:`crossfit_fold_ids`); for each outer fold, :func:`fit_classifier` (inner
      ``n_splits``-fold grid search) is fitted on the other folds with the single feature
      ``logit(clip(R, 1e-6, 1 - 1e-6))`` (column ``R_FEATURE``) and predicts the held-out fold, so
      no row is scored by a model that saw it.

    Parameters
    ----------
    train : DataFrame of shape (n_train, ...)
        Training split: ``features``, ``group`` and ``label`` (needed for ``X`` and ``Y``).
    test : DataFrame of shape (n_test, ...)
        Test split: ``features`` (for ``X``), ``label`` (for ``Y``), ``group`` (for ``R``). Its row
        order defines ``row``.
    test_scores : mapping of str to ndarray of shape (n_test,)
        Scores ``R`` in [0, 1] of each model type on the test rows (used for ``R`` only).
    features, categorical : sequence of str
        Feature columns and the integer-coded categorical ones among them.
    group, label : str, default "a", "y"
        Names of the group and label columns.
    n_groups : int
        Number of groups ``K``; group codes must be in ``0..K-1``.
    grid : sequence of int, default=(10, 25, 50)
        Candidate ``max_leaf_nodes``.
    n_splits : int, default=5
        Folds of every inner grid search.
    crossfit_folds : int, default=5
        Outer folds of the cross-fitting for ``R``.
    seed : int
        Root seed. Paths: ``("weight_models", dataset, "X")``, ``(..., "Y")``, the outer split
        ``(..., "R", model)`` and the fit without outer fold ``k`` ``(..., "R", model, k)``.
    dataset : str
        Dataset name (part of the seed path).
    n_jobs : int, default=1
        Parallel fits of each grid search.
    n_threads : int or None, default=None
        OpenMP threads of each HistGradientBoosting fit and prediction (via :mod:`threadpoolctl`);
        ``None`` leaves the process default (all cores unless ``OMP_NUM_THREADS`` is set). Set it to
        the cores actually available: oversubscribed OpenMP threads slow the fits by an order of
        magnitude on a shared machine.
    controls : sequence of str, default=("X", "Y", "R")
        The control variables to estimate, a subset of ``WEIGHT_CONTROLS``.
    progress : callable, optional
        Called with one log line per fitted model (the fits take minutes at full size).

    Returns
    -------
    weights : DataFrame of shape (n_test * (n_X + n_Y + len(test_scores) * n_R), 4 + K)
        Long format of ``docs/design.md``: ``weight_source`` (``"estimated"``), ``control``,
        ``model`` (model type for ``R``, ``"*"`` for ``X`` and ``Y``), ``row`` (int64 test row),
        ``p_0 .. p_{K-1}`` (float64, rows sum to 1). Ordered by control (as in ``controls``),
        model (as in ``test_scores``), row.
    selection : DataFrame
        One row per fitted grid search and ``max_leaf_nodes``: ``control``, ``model``, ``fold``
        (Int64 outer fold for ``R``, missing for ``X`` and ``Y``), ``max_leaf_nodes``,
        ``mean_cv_log_loss``, ``std_cv_log_loss``, ``selected``.

    Raises
    ------
    ValueError
        If columns are missing, labels are not 0/1, group codes are not in ``0..K-1``, a group has
        fewer than ``n_splits`` training rows (``X``, ``Y``) or fewer than ``crossfit_folds`` test
        rows or is absent from (or too small in) the training part of an outer fold (``R``), scores
        are missing, of the wrong length or outside [0, 1], or ``grid``, ``n_splits``,
        ``crossfit_folds``, ``n_groups`` or ``controls`` is invalid.
    """
    features = _check_names(features, "features")
    categorical = _check_names(categorical, "categorical")
    stray = [c for c in categorical if c not in features]
    if stray:
        raise ValueError(f"categorical features {stray!r} are not among features {features!r}")
    if group in features:
        raise ValueError(f"the group column {group!r} must not be among features {features!r}")
    grid = _check_grid(grid)
    n_splits = _check_n_splits(n_splits)
    crossfit_folds = _check_n_splits(crossfit_folds, "crossfit_folds")
    n_threads = _check_n_threads(n_threads)
    _check_seed_args(seed, dataset)
    if isinstance(n_groups, (bool, np.bool_)) or not isinstance(n_groups, (int, np.integer)) or not (
        2 <= n_groups <= _MAX_CATEGORY_CODE + 1
    ):
        raise ValueError(f"n_groups must be an integer in 2..{_MAX_CATEGORY_CODE + 1}; got {n_groups!r}")
    n_groups = int(n_groups)
    if isinstance(controls, str):
        controls = [controls]
    controls = list(controls)
    bad = [c for c in controls if c not in WEIGHT_CONTROLS]
    if bad or not controls or len(set(controls)) != len(controls):
        raise ValueError(
            f"controls must be a non-empty list of distinct values from {list(WEIGHT_CONTROLS)}; got {controls!r}"
        )
    if "X" in controls and not features:
        raise ValueError("features must name at least one column for control 'X'")

    # Columns each control needs.
    train_columns = [group] + (features if "X" in controls else []) + ([label] if "Y" in controls else [])
    test_columns = (features if "X" in controls else []) + ([label] if "Y" in controls else [])
    test_columns += [group] if "R" in controls else []
    if "X" in controls or "Y" in controls:
        _check_columns(train, list(dict.fromkeys(train_columns)), "train")
        a_train = _check_groups(train[group], "train", group, n_groups)
        counts = np.bincount(a_train, minlength=n_groups)
        for code in range(n_groups):
            if counts[code] < n_splits:
                raise ValueError(
                    f"group {code} has {counts[code]} rows in train, fewer than n_splits={n_splits}; "
                    f"P(A = {code} | V) cannot be estimated"
                )
    _check_columns(test, list(dict.fromkeys(test_columns)), "test")
    n_test = len(test)
    if "X" in controls:
        _check_features(train, features, categorical, "train")
        _check_features(test, features, categorical, "test")
    if "Y" in controls:
        y_train = _check_labels(train[label], "train", label)
        y_test = _check_labels(test[label], "test", label)
    scores: dict[str, np.ndarray] = {}
    outer_folds: dict[str, np.ndarray] = {}
    if "R" in controls:
        a_test = _check_groups(test[group], "test", group, n_groups)
        counts = np.bincount(a_test, minlength=n_groups)
        for code in range(n_groups):
            if counts[code] < crossfit_folds:
                raise ValueError(
                    f"group {code} has {counts[code]} rows in test, fewer than crossfit_folds={crossfit_folds}; "
                    f"P(A = {code} | R) cannot be cross-fitted"
                )
        if not isinstance(test_scores, Mapping) or not test_scores:
            raise ValueError("test_scores must be a non-empty mapping of model type to scores for control 'R'")
        for model, values in test_scores.items():
            if not isinstance(model, str) or model == "*":
                raise ValueError(f"test_scores keys must be model names (str, not '*'); got {model!r}")
            r = np.asarray(values, dtype=np.float64)
            if r.shape != (n_test,):
                raise ValueError(f"test_scores[{model!r}] must have shape ({n_test},); got {r.shape}")
            outside = r[~((r >= 0) & (r <= 1))]
            if outside.size:
                raise ValueError(
                    f"test_scores[{model!r}] must be in [0, 1]; got values {_format_values(map(_show, outside))}"
                )
            scores[model] = r
        # Outer folds of every model, checked before any fit: each group must have at least
        # n_splits rows in the training part of every outer fold.
        for model in scores:
            fold_ids = crossfit_fold_ids(
                a_test,
                crossfit_folds=crossfit_folds,
                random_state=seeds.sklearn_seed(seed, "weight_models", dataset, "R", model),
            )
            for k in range(crossfit_folds):
                counts = np.bincount(a_test[fold_ids != k], minlength=n_groups)
                for code in range(n_groups):
                    if counts[code] == 0:
                        raise ValueError(
                            f"group {code} is absent from the training part of outer fold {k} "
                            f"(V = R for model {model!r}); P(A = {code} | R) cannot be estimated"
                        )
                    if counts[code] < n_splits:
                        raise ValueError(
                            f"group {code} has {counts[code]} rows in the training part of outer fold {k} "
                            f"(V = R for model {model!r}), fewer than n_splits={n_splits}"
                        )
            outer_folds[model] = fold_ids

    weights: list[pd.DataFrame] = []
    tables: list[pd.DataFrame] = []

    def fit(control, model, fold, X_fit, target, cats, X_pred, where, *path):
        start = time.perf_counter()
        estimator, table = fit_classifier(
            X_fit,
            target,
            categorical_features=cats,
            grid=grid,
            n_splits=n_splits,
            random_state=seeds.sklearn_seed(seed, "weight_models", dataset, control, *path),
            n_jobs=n_jobs,
        )
        proba = _group_proba(estimator, X_pred, n_groups, where)
        chosen = int(table.loc[table["selected"], "max_leaf_nodes"].iloc[0])
        _report(
            progress,
            f"weight model P(A | {control}) {where}: fit on {len(X_fit)} rows, predict {len(X_pred)} rows, "
            f"max_leaf_nodes={chosen}, {time.perf_counter() - start:.1f} s",
        )
        table.insert(0, "fold", pd.array([fold] * len(table), dtype="Int64"))
        table.insert(0, "model", model)
        table.insert(0, "control", control)
        tables.append(table)
        return proba

    with _openmp_threads(n_threads):
        for control in controls:
            if control == "X":
                proba = fit("X", "*", None, train[features], a_train, categorical, test[features], "V = X (train)")
                weights.append(_weights_frame("X", "*", proba))
            elif control == "Y":
                X_fit = pd.DataFrame({label: y_train}, index=train.index)
                X_pred = pd.DataFrame({label: y_test}, index=test.index)
                proba = fit("Y", "*", None, X_fit, a_train, [], X_pred, "V = Y (train)")
                weights.append(_weights_frame("Y", "*", proba))
            else:
                for model, r in scores.items():
                    feature = pd.DataFrame({R_FEATURE: logit_score(r)})
                    fold_ids = outer_folds[model]
                    proba = np.full((n_test, n_groups), np.nan, dtype=np.float64)
                    for k in range(crossfit_folds):
                        held_out = fold_ids == k
                        proba[held_out] = fit(
                            "R",
                            model,
                            k,
                            feature.loc[~held_out],
                            a_test[~held_out],
                            [],
                            feature.loc[held_out],
                            f"V = R for model {model!r}, outer fold {k}",
                            model,
                            k,
                        )
                    weights.append(_weights_frame("R", model, proba))

    weights_table = pd.concat(weights, ignore_index=True)
    for column in ("weight_source", "control", "model"):
        weights_table[column] = weights_table[column].astype(str)
    selection = pd.concat(tables, ignore_index=True)
    for column in ("control", "model"):
        selection[column] = selection[column].astype(str)
    return weights_table, selection
