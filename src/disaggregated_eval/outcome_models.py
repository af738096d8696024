"""Outcome models ``x``, ``xa`` and ``xa_stratified`` (paper sections 2 and 5, Supplementary A.3).

Outcome models predict ``Y`` from the covariates ``X`` in three ways: ``x`` uses ``X`` only, ``xa``
uses ``X`` and the group ``A`` as a categorical feature, and ``xa_stratified`` is one model on ``X``
per group, each row being scored by its own group's model. Each is the grid-searched gradient
boosting of :func:`disaggregated_eval.model_fitting.fit_classifier` (as are the weight models
``P(A | V)`` of :mod:`disaggregated_eval.weight_models`). Every ``random_state`` comes from
:mod:`disaggregated_eval.seeds` with the name paths of ``docs/design.md``: ``("outcome_models",
dataset, model)`` and ``("outcome_models", dataset, "xa_stratified", group)``.

Missing feature values (NaN) stay missing: the gradient boosting handles them natively. Categorical
features are integer-coded columns (codes ``0..254``, NaN for missing).

Threads: as in :mod:`disaggregated_eval.model_fitting` (``n_jobs`` worker processes with one OpenMP
thread each, ``n_threads`` OpenMP threads in the calling process); results depend on neither.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier

from . import seeds
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
)
from .validation import check_columns, check_group_codes, check_int, check_labels, check_seed
from .vocabulary import MODEL_TYPES

__all__ = [
    "OutcomeModels",
    "fit_outcome_models",
]


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
        groups = check_group_codes(df[self.group], f"df[{self.group!r}]", max_code=MAX_CATEGORY_CODE)
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

    Each model is :func:`disaggregated_eval.model_fitting.fit_classifier` (grid search of
    ``max_leaf_nodes`` by stratified ``n_splits``-fold cross-validated log loss, refit on all its
    rows; paper Supplementary A.3).
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
    features, categorical = check_feature_names(features, categorical, reserved={"group": group, "label": label})
    if not features:
        raise ValueError("features must name at least one column")
    grid = check_grid(grid)
    n_splits = check_int(n_splits, "n_splits", minimum=2)
    n_jobs = check_int(n_jobs, "n_jobs")
    n_threads = check_n_threads(n_threads)
    seed = check_seed(seed)
    dataset = check_dataset(dataset)
    check_columns(train, features + [group, label], "train")
    check_features(train, features, categorical, "train")
    y = check_labels(train[label], f"train[{label!r}]", dtype=np.int64)
    a = check_group_codes(train[group], f"train[{group!r}]", max_code=MAX_CATEGORY_CODE)
    check_class_counts(y, n_splits, "train", name="label")
    codes, counts = np.unique(a, return_counts=True)
    for code, count in zip(codes.tolist(), counts.tolist()):
        if count < n_splits:
            raise ValueError(f"group {code} has {count} rows in train, fewer than n_splits={n_splits}")
        check_class_counts(y[a == code], n_splits, f"group {code} in train", name="label")

    X = train[features]
    tables = []

    def fit(name: str, frame: pd.DataFrame, target: np.ndarray, cats: list[str], group_name: str, *path):
        start = time.perf_counter()
        estimator, table = fit_classifier_unchecked(
            frame,
            target,
            categorical_features=cats,
            grid=grid,
            max_leaf_nodes=None,
            n_splits=n_splits,
            random_state=seeds.sklearn_seed(seed, "outcome_models", dataset, name, *path),
            n_jobs=n_jobs,
        )
        report_fit(
            progress,
            f"outcome model {name} (group {group_name}): {len(frame)} rows x {frame.shape[1]} features, "
            f"max_leaf_nodes={chosen_max_leaf_nodes(table)}, {time.perf_counter() - start:.1f} s",
        )
        table.insert(0, "group", group_name)
        table.insert(0, "model", name)
        tables.append(table)
        return estimator

    with openmp_threads(n_threads):
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
