"""Coverage study: do the percentile intervals of ``T_a`` have their nominal coverage?

The pipeline's interval for a controlled difference ``T_a`` (paper section 4.2, Algorithms 1-2) is a
percentile bootstrap of the test set with the weights ``P(A = a | V)`` held fixed (paper
Supplementary A.3; ``docs/method.md``, "Bootstrap"): it ignores the uncertainty of the weight
model. This module measures the coverage of those intervals in the simulations, where the
population value of ``T_a`` is known (``docs/method.md``, "Coverage study"):

1. **Truth** (:func:`population_truth`): the population ``T_a`` of a setting and model by numerical
   integration with the exact oracle weights (:func:`disaggregated_eval.population.
   population_controlled_differences`): for the Bayes-optimal scores from the DGP alone, for a
   fitted outcome model (a step function of ``x``) for that fitted model.
2. **Replicates** (:func:`run_replicate`): replicate ``r`` draws a fresh test set of the pipeline's
   test size from the DGP (the outcome models stay those of the main run) and computes ``T_a``
   with its percentile interval exactly as the pipeline does
   (:func:`disaggregated_eval.evaluation.controlled_evaluation`, scheme ``population``):

   * oracle weights (``population.oracle_weights``: closed-form ``P(A | X)``, ``P(A | Y)``, exact
     ``P(A | R)``) for every model (Bayes-optimal scores and fitted models ``x``, ``xa``);
   * estimated weights for the fitted models, refitted on every replicate as the pipeline fits
     them in the main settings (:func:`estimated_weights`): ``P(A | X)`` and ``P(A | Y)`` on a
     fresh training-size sample of the population that is independent of the replicate's test
     rows, predicting the test rows; ``P(A | R)`` cross-fitted on the replicate's test rows, on
     the first ``n_replicates_r`` replicates only (the costly part). Hyperparameters
     (``max_leaf_nodes``) are those the main run selected
     (:func:`disaggregated_eval.weight_models.selected_max_leaf_nodes`), not a new grid search. A fitted
     model's oracle ``T_a`` is computed for the same controls, on the same resamples, so oracle
     and estimated weights are compared replicate by replicate.
3. **Coverage** (:func:`coverage_table`): per cell (dataset, model, control, weight source, group,
   metric), the share of replicates whose interval contains the truth, with its Clopper-Pearson
   interval, the range that a correct 95% interval's coverage falls in with probability >= 95%
   (the nominal band), the mean interval width and the mean bias of the estimate.

Seeds (``docs/design.md``, "Seeds"), replicate ``r`` of dataset ``d`` (:func:`replicate_seed`):
``("coverage", d, "test", r)`` its test set, ``("coverage", d, "train", r)`` the training-size
sample of its weight models, ``("coverage", d, "bootstrap", r)`` its bootstrap (every evaluation
of the replicate on the same resamples) and ``("coverage", d, "weights", r)`` its weight models:
``P(A | X)``, ``P(A | Y)`` with ``random_state`` at that path plus ``"X"`` / ``"Y"``, the
cross-fitting of ``P(A | R)`` of model ``m`` below that path plus ``("R", m)``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats

from . import evaluation, population, seeds, simulate, vocabulary
from .model_fitting import fit_classifier
from .outcome_models import OutcomeModels
from .validation import (
    check_choice,
    check_columns,
    check_int,
    check_open_unit,
    check_positive_int,
    check_seed,
)
from .weight_models import crossfit_group_proba, score_frame
from .weight_table import ANY_MODEL, concat_weight_tables, weight_table

__all__ = [
    "FITTED_MODELS",
    "BAYES_MODELS",
    "ESTIMATED_CONTROLS",
    "SEED_KINDS",
    "REPLICATE_COLUMNS",
    "TRUTH_COLUMNS",
    "COVERAGE_COLUMNS",
    "SUMMARY_COLUMNS",
    "UNDEFINED_TRUTH",
    "TRUTH_TOLERANCE",
    "replicate_seed",
    "draw_replicate",
    "estimated_weights",
    "replicate_intervals",
    "run_replicate",
    "score_oracles",
    "run_study",
    "replicate_parts",
    "run_replicates",
    "study_design",
    "collect_designs",
    "population_truth",
    "nominal_band",
    "clopper_pearson",
    "coverage_table",
    "coverage_summary",
]

#: Fitted outcome models of the study (estimated and oracle weights).
FITTED_MODELS: tuple[str, ...] = ("x", "xa")
#: Bayes-optimal scores of the study (oracle weights).
BAYES_MODELS: tuple[str, ...] = vocabulary.BAYES_MODELS
#: Controls whose weights are estimated per replicate.
ESTIMATED_CONTROLS: tuple[str, ...] = vocabulary.WEIGHT_CONTROLS
#: The four seed branches of a replicate (:func:`replicate_seed`).
SEED_KINDS: tuple[str, ...] = ("test", "train", "bootstrap", "weights")
#: Columns of a replicate's intervals (:func:`replicate_intervals`, :func:`run_replicate`).
REPLICATE_COLUMNS: tuple[str, ...] = (
    "dataset",
    "replicate",
    "model",
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
#: Columns of :func:`population_truth`.
TRUTH_COLUMNS: tuple[str, ...] = ("dataset", "model", "control", "group", "metric", "truth")
#: Columns of :func:`coverage_table`.
COVERAGE_COLUMNS: tuple[str, ...] = (
    "dataset",
    "model",
    "control",
    "weight_source",
    "group",
    "metric",
    "n_replicates",
    "n_covered",
    "coverage",
    "coverage_ci_low",
    "coverage_ci_high",
    "nominal_band_low",
    "nominal_band_high",
    "within_band",
    "mean_width",
    "mean_bias",
    "sd_estimate",
    "truth",
    "n_undefined_replicates",
    "n_resamples",
    "caveat",
)
#: ``caveat`` of a cell whose population ``T_a`` is undefined (:func:`coverage_table`).
UNDEFINED_TRUTH = (
    "truth undefined: the population T_a is undefined (a metric of one of its terms is, e.g. the precision "
    "of a model that predicts no positive in the group), so there is nothing to cover; not counted"
)
#: Columns of :func:`coverage_summary`.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "weight_source",
    "model",
    "control",
    "n_cells",
    "share_within_band",
    "share_below_band",
    "median_coverage",
    "min_coverage",
    "mean_coverage",
    "median_n_replicates",
)
#: An interval covers the truth if ``ci_low - tol <= truth <= ci_high + tol``: the population
#: values are integrals with an error of about 1e-11 (``disaggregated_eval.population``; checked to
#: 1e-9 in ``tests/test_population.py``), so an interval that ends exactly at a degenerate truth
#: (e.g. a specificity of 1 in both terms) is not counted as missing it by rounding.
TRUTH_TOLERANCE = 1e-9

_GROUP_LABELS = vocabulary.SIMULATION_GROUP_LABELS


def _check_dataset(dataset: str) -> str:
    """A main simulation setting: the study mirrors the main settings' weight models (``P(A | X)``,
    ``P(A | Y)`` fitted on an independent training sample of the evaluated population)."""
    return check_choice(dataset, "dataset (coverage study: a main simulation setting)", vocabulary.MAIN_SETTINGS)


def replicate_seed(root: int, dataset: str, kind: str, replicate: int) -> np.random.SeedSequence:
    """The seed branch ``("coverage", dataset, kind, replicate)`` of the root seed.

    Parameters
    ----------
    root : int
        The configured root seed (>= 0).
    dataset : str
        A simulation setting id.
    kind : {"test", "train", "bootstrap", "weights"}
        Which draw of the replicate (module docstring).
    replicate : int
        Replicate index (>= 0).

    Returns
    -------
    numpy.random.SeedSequence

    Raises
    ------
    ValueError
        If ``kind`` is unknown or ``root`` / ``replicate`` is negative.
    """
    check_choice(kind, "kind", SEED_KINDS)
    replicate = check_int(replicate, "replicate", minimum=0)
    return seeds.seed_sequence(check_seed(root), "coverage", dataset, kind, replicate)


def draw_replicate(
    dataset: str, *, n_test: int, n_train: int, seed: int, replicate: int
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Replicate ``replicate``'s test set and the training-size sample of its weight models.

    Both are independent draws from the setting's population (:meth:`simulate.DGP.sample`) with
    the generators of ``("coverage", dataset, "test" | "train", replicate)``; the sizes are the
    pipeline's (``simulation.n_test``, ``simulation.n_train``; paper: 20,000 and 50,000).

    Parameters
    ----------
    dataset : str
        A main simulation setting.
    n_test, n_train : int
        Positive numbers of rows.
    seed : int
        Root seed.
    replicate : int
        Replicate index (>= 0).

    Returns
    -------
    test : DataFrame of shape (n_test, 3)
    train : DataFrame of shape (n_train, 3)
        Columns ``x`` (float64), ``a``, ``y`` (int64 0/1).

    Raises
    ------
    ValueError
        If ``dataset`` is not a main setting, a size is not a positive integer, or ``seed`` /
        ``replicate`` is negative.
    """
    dgp = simulate.get_dgp(_check_dataset(dataset))
    n_test = check_positive_int(n_test, "n_test")
    n_train = check_positive_int(n_train, "n_train")
    test_rng = np.random.Generator(np.random.PCG64(replicate_seed(seed, dataset, "test", replicate)))
    train_rng = np.random.Generator(np.random.PCG64(replicate_seed(seed, dataset, "train", replicate)))
    return dgp.sample(n_test, test_rng), dgp.sample(n_train, train_rng)


def estimated_weights(
    test: pd.DataFrame,
    train: pd.DataFrame | None,
    test_scores: Mapping[str, np.ndarray],
    *,
    max_leaf_nodes: Mapping[tuple[str, str], int],
    controls: Sequence[str] = ESTIMATED_CONTROLS,
    crossfit_folds: int,
    seed: int,
    dataset: str,
    replicate: int,
    n_threads: int | None = 1,
) -> pd.DataFrame:
    """Estimated ``P(A = a | V)`` of a replicate's test rows, refitted as in the main settings.

    As :func:`disaggregated_eval.weight_models.fit_weight_models` with ``fit_xy_on="train"`` and fixed
    hyperparameters (paper Algorithm 2; ``docs/method.md``, "Coverage study"):

    * ``V = X``, ``V = Y``: :func:`model_fitting.fit_classifier` of ``A`` on ``train[["x"]]`` /
      ``train[["y"]]`` (a sample independent of the test rows) with ``max_leaf_nodes[(V, "*")]``
      and ``random_state = sklearn_seed(seed, "coverage", dataset, "weights", replicate, V)``,
      predicting the test rows;
    * ``V = R``: :func:`weight_models.crossfit_group_proba` of ``A`` on :func:`weight_models.score_frame` of each
      model's test scores, ``crossfit_folds`` outer folds, ``max_leaf_nodes[("R", model)]``, seed
      branch ``("coverage", dataset, "weights", replicate, "R", model)``.

    Parameters
    ----------
    test : DataFrame of shape (n_test, >= 3)
        The replicate's test set (columns ``x``, ``a``, ``y``); its row order defines ``row``.
    train : DataFrame of shape (n_train, >= 3) or None
        The replicate's training-size sample; needed for ``X`` and ``Y``.
    test_scores : mapping of str to ndarray of shape (n_test,)
        Scores of each model on ``test`` (for ``R``; may be empty without ``R``).
    max_leaf_nodes : mapping
        ``{(control, model): max_leaf_nodes}`` (``model`` ``"*"`` for X and Y), e.g. the main run's
        :func:`weight_models.selected_max_leaf_nodes`.
    controls : sequence of str, default ("X", "Y", "R")
    crossfit_folds : int
        Outer folds of the cross-fitting (the pipeline's ``models.crossfit_folds``).
    seed : int
        Root seed.
    dataset : str
        The simulation setting (seed paths).
    replicate : int
        Replicate index (seed paths).
    n_threads : int or None, default 1
        OpenMP threads of the fits (results do not depend on it).

    Returns
    -------
    DataFrame
        Long weight table (:mod:`disaggregated_eval.weight_table`), ``weight_source``
        ``"estimated"``, blocks in the order of ``controls`` (``R``: one block per model).

    Raises
    ------
    ValueError
        If a control is unknown, ``train`` is missing for X or Y, ``max_leaf_nodes`` lacks a needed
        entry, or the data fail the checks of the fitting functions.
    """
    controls = [check_choice(c, "controls", ESTIMATED_CONTROLS) for c in controls]
    replicate = check_int(replicate, "replicate", minimum=0)
    check_columns(test, ["x", "a", "y"], "test")
    branch = replicate_seed(seed, dataset, "weights", replicate)

    def leaves(control: str, model: str) -> int:
        key = (control, model)
        if key not in max_leaf_nodes:
            raise ValueError(
                f"max_leaf_nodes has no entry {key!r} (the main run's weight_model_selection.csv has "
                f"{sorted(max_leaf_nodes)!r})"
            )
        return max_leaf_nodes[key]

    blocks = []
    for control in controls:
        if control in ("X", "Y"):
            if train is None:
                raise ValueError(f"train is needed for the weight model of {control} (fitted on a training sample)")
            check_columns(train, ["x", "a", "y"], "train")
            column = "x" if control == "X" else "y"
            estimator, _ = fit_classifier(
                train[[column]],
                train["a"].to_numpy(),
                max_leaf_nodes=leaves(control, ANY_MODEL),
                random_state=seeds.sklearn_seed(branch, control),
                n_threads=n_threads,
            )
            if list(np.asarray(estimator.classes_)) != [0, 1]:
                raise ValueError(f"the training sample of P(A | {control}) must hold both groups 0 and 1")
            proba = estimator.predict_proba(test[[column]])
            blocks.append(weight_table(proba, weight_source="estimated", control=control))
        else:
            for model, scores in test_scores.items():
                proba, _ = crossfit_group_proba(
                    score_frame(scores),
                    test["a"].to_numpy(),
                    n_groups=2,
                    max_leaf_nodes=leaves("R", model),
                    crossfit_folds=crossfit_folds,
                    seed=seeds.seed_sequence(branch, "R", model),
                    group_labels=_GROUP_LABELS,
                    n_threads=n_threads,
                )
                blocks.append(weight_table(proba, weight_source="estimated", control="R", model=model))
    return concat_weight_tables(blocks)


def replicate_intervals(
    test: pd.DataFrame,
    scores: Mapping[str, np.ndarray],
    *,
    oracle_weights: pd.DataFrame,
    estimated: pd.DataFrame | None,
    estimated_models: Sequence[str],
    n_resamples: int,
    seed: np.random.SeedSequence,
    confidence: float = 0.95,
    metrics: Sequence[str] = vocabulary.PIPELINE_METRICS,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
    dataset: str = "",
    replicate: int = 0,
    n_threads: int = 1,
) -> pd.DataFrame:
    """``T_a`` with its percentile interval for every model, control, weight source, group, metric.

    Calls of :func:`disaggregated_eval.evaluation.controlled_evaluation` (scheme ``population``, no
    shared-space metrics), all with the same bootstrap ``seed`` and so on the same resamples:

    * the models of ``scores`` not in ``estimated_models`` with ``oracle_weights`` (controls none
      and every control of the table);
    * the models of ``estimated_models`` with ``estimated`` and, for the same controls, the oracle
      weights (controls none and those of ``estimated``): estimated and oracle ``T_a`` of a fitted
      model come from one call, paired, and share its subgroup metrics.

    Parameters
    ----------
    test : DataFrame of shape (n_test, >= 2)
        Columns ``a`` and ``y``.
    scores : mapping of str to ndarray of shape (n_test,)
        Every evaluated model's scores.
    oracle_weights : DataFrame
        Oracle weight table of the test rows (``population.oracle_weights``) for every model of
        ``scores``.
    estimated : DataFrame or None
        Estimated weight table of the test rows (:func:`estimated_weights`) for
        ``estimated_models``; None if there are none.
    estimated_models : sequence of str
        Models evaluated with estimated weights (a subset of ``scores``).
    n_resamples : int
        Bootstrap resamples.
    seed : numpy.random.SeedSequence
        The replicate's bootstrap branch (:func:`replicate_seed` with ``kind="bootstrap"``).
    confidence, metrics, threshold, preference_threshold
        As in :func:`~disaggregated_eval.evaluation.controlled_evaluation`.
    dataset : str
        Copied into the table.
    replicate : int
        Copied into the table.
    n_threads : int, default 1
        Threads of the bootstrap engine (results do not depend on it).

    Returns
    -------
    DataFrame
        Columns :data:`REPLICATE_COLUMNS`; the rows of comparison ``controlled_difference``.

    Raises
    ------
    ValueError
        If ``estimated_models`` is not a subset of ``scores``, ``estimated`` is missing for them,
        or the inputs fail the checks of ``controlled_evaluation``.
    """
    estimated_models = list(estimated_models)
    missing = [m for m in estimated_models if m not in scores]
    if missing:
        raise ValueError(f"estimated_models {missing} are not in scores {sorted(scores)}")
    if estimated_models and (estimated is None or len(estimated) == 0):
        raise ValueError(f"estimated weights are needed for estimated_models {estimated_models}; got none")
    y = test["y"].to_numpy()
    groups = test["a"].to_numpy()
    common = dict(
        group_labels=_GROUP_LABELS,
        metrics=metrics,
        n_resamples=n_resamples,
        confidence=confidence,
        seed=seed,
        threshold=threshold,
        preference_threshold=preference_threshold,
        shared_space=False,
        resampling="population",
        n_threads=n_threads,
        study="simulation",
        dataset=dataset,
    )
    tables = []
    oracle_only = [m for m in scores if m not in estimated_models]
    if oracle_only:
        keep = oracle_weights["model"].isin(oracle_only + [ANY_MODEL])
        tables.append(
            evaluation.controlled_evaluation(
                y, groups, {m: scores[m] for m in oracle_only}, weights=oracle_weights[keep], **common
            )
        )
    if estimated_models:
        controls = [c for c in vocabulary.WEIGHT_CONTROLS if c in set(estimated["control"].astype(object))]
        keep = oracle_weights["control"].isin(controls) & oracle_weights["model"].isin(estimated_models + [ANY_MODEL])
        tables.append(
            evaluation.controlled_evaluation(
                y,
                groups,
                {m: scores[m] for m in estimated_models},
                weights=concat_weight_tables([estimated, oracle_weights[keep]]),
                controls=["none", *controls],
                **common,
            )
        )
    table = pd.concat(tables, ignore_index=True)
    table = table[table["comparison"] == "controlled_difference"].reset_index(drop=True)
    table.insert(1, "replicate", np.int64(replicate))
    return table[list(REPLICATE_COLUMNS)]


def score_oracles(
    dataset: str, fitted: OutcomeModels | None, models: Sequence[str] = FITTED_MODELS + BAYES_MODELS
) -> dict[str, population.ScoreOracle]:
    """The exact score oracle of each model (:func:`population.score_oracle`), built once per setting.

    Parameters
    ----------
    dataset : str
        A simulation setting.
    fitted : OutcomeModels or None
        The main run's outcome models (needed for the fitted model types of ``models``).
    models : sequence of str
        Fitted model types and Bayes-optimal models.

    Returns
    -------
    dict of str to ScoreOracle
        Model -> its oracle of ``P(A = a | R)``.

    Raises
    ------
    ValueError
        As :func:`population.score_oracle` (unknown model, fitted models missing).
    """
    return {
        m: population.score_oracle(dataset, m, fitted=fitted if m in vocabulary.MODEL_TYPES else None) for m in models
    }


def run_replicate(
    dataset: str,
    replicate: int,
    *,
    fitted: OutcomeModels,
    oracles: Mapping[str, population.ScoreOracle],
    max_leaf_nodes: Mapping[tuple[str, str], int],
    n_test: int,
    n_train: int,
    n_resamples: int,
    crossfit_folds: int,
    estimate_r: bool,
    seed: int,
    models: Sequence[str] = FITTED_MODELS + BAYES_MODELS,
    estimated_models: Sequence[str] = FITTED_MODELS,
    confidence: float = 0.95,
    metrics: Sequence[str] = vocabulary.PIPELINE_METRICS,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
    n_threads: int = 1,
) -> pd.DataFrame:
    """One replicate of the coverage study: draw, score, weight, bootstrap.

    Draws the test set and the weight-training sample (:func:`draw_replicate`), scores the test
    rows with the main run's ``fitted`` models and the Bayes-optimal scores
    (:func:`simulate.bayes_scores`), computes the oracle weights
    (:func:`population.oracle_weights` with the prebuilt ``oracles``) and the estimated weights of
    ``estimated_models`` (:func:`estimated_weights`: X and Y, and R only if ``estimate_r``), and
    returns :func:`replicate_intervals`. Models of ``estimated_models`` get oracle ``T_a`` for the
    controls estimated in this replicate (so oracle ``V = R`` of a fitted model only where
    ``estimate_r``, paired with the estimated one); the other models for none, X, Y and R.

    Parameters
    ----------
    dataset : str
        A main simulation setting.
    replicate : int
        Replicate index (>= 0): the seeds of the module docstring.
    fitted : OutcomeModels
        The main run's outcome models of ``dataset`` (``results/models/{dataset}/models.joblib``).
    oracles : mapping of str to ScoreOracle
        :func:`population.score_oracle` of every model of ``models`` (built once per setting).
    max_leaf_nodes : mapping
        The main run's selected weight-model hyperparameters (:func:`weight_models.selected_max_leaf_nodes`).
    n_test, n_train : int
        Test-set and weight-training-sample sizes.
    n_resamples : int
        Bootstrap resamples.
    crossfit_folds : int
        Outer folds of the cross-fitted ``P(A | R)``.
    estimate_r : bool
        Whether this replicate also refits the estimated ``P(A | R)`` (the costly part).
    seed : int
        Root seed.
    models : sequence of str, default ("x", "xa", "bayes_x", "bayes_xa")
        Evaluated models (oracle weights).
    estimated_models : sequence of str, default ("x", "xa")
        Fitted models of ``models`` also evaluated with estimated weights.
    confidence, metrics, threshold, preference_threshold, n_threads
        As in :func:`replicate_intervals`.

    Returns
    -------
    DataFrame
        Columns :data:`REPLICATE_COLUMNS`.

    Raises
    ------
    ValueError
        If a model name is unknown, an estimated model is not a fitted model type in ``models``,
        or an argument is invalid (see the functions called).
    """
    models_ = [check_choice(m, "models", vocabulary.SIMULATION_MODELS) for m in models]
    estimated_models = [check_choice(m, "estimated_models", vocabulary.MODEL_TYPES) for m in estimated_models]
    outside = [m for m in estimated_models if m not in models_]
    if outside:
        raise ValueError(f"estimated_models {outside} must also be in models {models_}")
    missing = [m for m in models_ if m not in oracles]
    if missing:
        raise ValueError(f"oracles has no score oracle for models {missing}")
    test, train = draw_replicate(dataset, n_test=n_test, n_train=n_train, seed=seed, replicate=replicate)
    fitted_scores = fitted.predict(test)
    bayes = simulate.bayes_scores(dataset, test)
    scores = {
        m: (fitted_scores[m] if m in vocabulary.MODEL_TYPES else bayes[m]).to_numpy(dtype=np.float64) for m in models_
    }
    oracle_weights = population.oracle_weights(dataset, test, test_scores=scores, fitted=fitted, oracles=oracles)
    estimated = None
    if estimated_models:
        estimated = estimated_weights(
            test,
            train,
            {m: scores[m] for m in estimated_models},
            max_leaf_nodes=max_leaf_nodes,
            controls=["X", "Y"] + (["R"] if estimate_r else []),
            crossfit_folds=crossfit_folds,
            seed=seed,
            dataset=dataset,
            replicate=replicate,
            n_threads=n_threads,
        )
    return replicate_intervals(
        test,
        scores,
        oracle_weights=oracle_weights,
        estimated=estimated,
        estimated_models=estimated_models,
        n_resamples=n_resamples,
        seed=replicate_seed(seed, dataset, "bootstrap", replicate),
        confidence=confidence,
        metrics=metrics,
        threshold=threshold,
        preference_threshold=preference_threshold,
        dataset=dataset,
        replicate=replicate,
        n_threads=n_threads,
    )


def run_study(
    dataset: str,
    *,
    fitted: OutcomeModels,
    max_leaf_nodes: Mapping[tuple[str, str], int],
    n_replicates: int,
    n_replicates_r: int,
    n_test: int,
    n_train: int,
    n_resamples: int,
    crossfit_folds: int,
    seed: int,
    models: Sequence[str] = FITTED_MODELS + BAYES_MODELS,
    estimated_models: Sequence[str] = FITTED_MODELS,
    confidence: float = 0.95,
    metrics: Sequence[str] = vocabulary.PIPELINE_METRICS,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
    n_threads: int = 1,
    progress: Callable[[str], object] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The coverage study of one setting: the truth and ``n_replicates`` replicates.

    Builds the score oracles once (:func:`population.score_oracle`), computes
    :func:`population_truth`, then runs :func:`run_replicate` for ``r = 0 .. n_replicates - 1``;
    replicates ``r < n_replicates_r`` also refit the estimated ``P(A | R)`` (``estimate_r``).
    Every replicate depends only on ``(seed, dataset, r)`` and the inputs, not on the others.

    Parameters
    ----------
    dataset : str
        A main simulation setting.
    fitted : OutcomeModels
        The main run's outcome models of ``dataset``.
    max_leaf_nodes : mapping
        The main run's selected weight-model hyperparameters (:func:`weight_models.selected_max_leaf_nodes`).
    n_replicates : int
        Replicates (>= 1).
    n_replicates_r : int
        Replicates with estimated ``P(A | R)``, ``0 <= n_replicates_r <= n_replicates``.
    n_test, n_train, n_resamples, crossfit_folds, seed
        As in :func:`run_replicate`.
    models, estimated_models, confidence, metrics, threshold, preference_threshold, n_threads
        As in :func:`run_replicate`.
    progress : callable, optional
        Called with one line per replicate (``"<dataset>: replicate r (i / n of this job, ...)"``).

    Returns
    -------
    replicates : DataFrame
        Columns :data:`REPLICATE_COLUMNS`, replicates in order.
    truth : DataFrame
        Columns :data:`TRUTH_COLUMNS`.

    Raises
    ------
    ValueError
        If a count is invalid (``n_replicates_r > n_replicates`` among them; checked before any
        work) or the arguments fail the checks of :func:`run_replicate`.
    """
    _check_dataset(dataset)
    n_replicates = check_positive_int(n_replicates, "n_replicates")
    n_replicates_r = check_int(n_replicates_r, "n_replicates_r", minimum=0)
    if n_replicates_r > n_replicates:
        raise ValueError(f"n_replicates_r must not exceed n_replicates ({n_replicates}); got {n_replicates_r}")
    check_positive_int(n_resamples, "n_resamples")
    check_int(crossfit_folds, "crossfit_folds", minimum=2)
    check_seed(seed)
    models_ = [check_choice(m, "models", vocabulary.SIMULATION_MODELS) for m in models]
    for m in estimated_models:
        for key in [("X", ANY_MODEL), ("Y", ANY_MODEL)] + ([("R", m)] if n_replicates_r else []):
            if key not in max_leaf_nodes:
                raise ValueError(f"max_leaf_nodes has no entry {key!r} (keys: {sorted(max_leaf_nodes)!r})")
    oracles = score_oracles(dataset, fitted, models_)
    truth = population_truth(
        dataset, fitted=fitted, oracles=oracles, metrics=metrics, threshold=threshold,
        preference_threshold=preference_threshold,
    )  # fmt: skip
    replicates = run_replicates(
        dataset,
        range(n_replicates),
        fitted=fitted,
        oracles=oracles,
        max_leaf_nodes=max_leaf_nodes,
        n_replicates_r=n_replicates_r,
        n_test=n_test,
        n_train=n_train,
        n_resamples=n_resamples,
        crossfit_folds=crossfit_folds,
        seed=seed,
        models=models_,
        estimated_models=estimated_models,
        confidence=confidence,
        metrics=metrics,
        threshold=threshold,
        preference_threshold=preference_threshold,
        n_threads=n_threads,
        progress=progress,
    )
    return replicates, truth


def replicate_parts(n_replicates: int, n_parts: int) -> list[list[int]]:
    """Split replicates ``0 .. n_replicates - 1`` into ``n_parts`` jobs of nearly equal cost.

    Part ``p`` holds ``p, p + n_parts, p + 2 n_parts, ...`` (round robin), so every part gets its
    share of the costlier first ``n_replicates_r`` replicates. A replicate depends only on
    ``(seed, dataset, r)``, so the results do not depend on ``n_parts``.

    Parameters
    ----------
    n_replicates : int
        Replicates of the setting (>= 1).
    n_parts : int
        Jobs per setting, ``1 <= n_parts <= n_replicates``.

    Returns
    -------
    list of list of int
        ``n_parts`` lists of replicate indices; together every index once.

    Raises
    ------
    ValueError
        If a count is not a positive integer or ``n_parts > n_replicates``.
    """
    n_replicates = check_positive_int(n_replicates, "n_replicates")
    n_parts = check_positive_int(n_parts, "n_parts")
    if n_parts > n_replicates:
        raise ValueError(f"n_parts must not exceed n_replicates ({n_replicates}); got {n_parts}")
    return [list(range(p, n_replicates, n_parts)) for p in range(n_parts)]


def run_replicates(
    dataset: str,
    replicates: Sequence[int],
    *,
    fitted: OutcomeModels,
    max_leaf_nodes: Mapping[tuple[str, str], int],
    n_replicates_r: int,
    n_test: int,
    n_train: int,
    n_resamples: int,
    crossfit_folds: int,
    seed: int,
    oracles: Mapping[str, population.ScoreOracle] | None = None,
    models: Sequence[str] = FITTED_MODELS + BAYES_MODELS,
    estimated_models: Sequence[str] = FITTED_MODELS,
    confidence: float = 0.95,
    metrics: Sequence[str] = vocabulary.PIPELINE_METRICS,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
    n_threads: int = 1,
    progress: Callable[[str], object] | None = None,
) -> pd.DataFrame:
    """:func:`run_replicate` for the given replicate indices (one job of rule ``coverage_replicates``).

    Replicate ``r`` refits the estimated ``P(A | R)`` when ``r < n_replicates_r``. The rows equal
    those of the same replicates in :func:`run_study`.

    Parameters
    ----------
    dataset : str
        A main simulation setting.
    replicates : sequence of int
        Replicate indices (>= 0), e.g. one part of :func:`replicate_parts`.
    oracles : mapping of str to ScoreOracle, optional
        Score oracles of ``models`` (built with :func:`population.score_oracle` when None).
    fitted, max_leaf_nodes, n_replicates_r, n_test, n_train, n_resamples, crossfit_folds, seed
        As in :func:`run_study`.
    models, estimated_models, confidence, metrics, threshold, preference_threshold, n_threads, progress
        As in :func:`run_study`.

    Returns
    -------
    DataFrame
        Columns :data:`REPLICATE_COLUMNS`, replicates in the given order.

    Raises
    ------
    ValueError
        If ``replicates`` is empty or holds a negative index, or the arguments fail the checks of
        :func:`run_replicate`.
    """
    replicates = [check_int(r, "replicates", minimum=0) for r in replicates]
    if not replicates:
        raise ValueError("replicates must hold at least one replicate index; got none")
    n_replicates_r = check_int(n_replicates_r, "n_replicates_r", minimum=0)
    models_ = [check_choice(m, "models", vocabulary.SIMULATION_MODELS) for m in models]
    if oracles is None:
        oracles = score_oracles(dataset, fitted, models_)
    tables = []
    for i, r in enumerate(replicates):
        start = time.perf_counter()
        tables.append(
            run_replicate(
                dataset,
                r,
                fitted=fitted,
                oracles=oracles,
                max_leaf_nodes=max_leaf_nodes,
                n_test=n_test,
                n_train=n_train,
                n_resamples=n_resamples,
                crossfit_folds=crossfit_folds,
                estimate_r=r < n_replicates_r,
                seed=seed,
                models=models_,
                estimated_models=estimated_models,
                confidence=confidence,
                metrics=metrics,
                threshold=threshold,
                preference_threshold=preference_threshold,
                n_threads=n_threads,
            )
        )
        if progress is not None:
            progress(
                f"{dataset}: replicate {r} ({i + 1} / {len(replicates)} of this job, "
                f"{'with' if r < n_replicates_r else 'without'} estimated P(A | R)), "
                f"{time.perf_counter() - start:.1f} s"
            )
    return pd.concat(tables, ignore_index=True)


def study_design(
    dataset: str,
    *,
    max_leaf_nodes: Mapping[tuple[str, str], int],
    n_replicates: int,
    n_replicates_r: int,
    n_test: int,
    n_train: int,
    n_resamples: int,
    crossfit_folds: int,
    confidence: float,
    models: Sequence[str] = FITTED_MODELS + BAYES_MODELS,
    estimated_models: Sequence[str] = FITTED_MODELS,
    jobs_per_setting: int = 1,
) -> dict:
    """The design of one setting's coverage study as a JSON-ready record (``coverage_design.json``).

    Returns
    -------
    dict
        Sizes, counts, the hyperparameters used (``"V/model": max_leaf_nodes``), which models get
        which weights, and the seed paths, in words.
    """
    return {
        "dataset": dataset,
        "n_replicates": int(n_replicates),
        "n_replicates_r": int(n_replicates_r),
        "replicates_with_estimated_r": f"0 .. {int(n_replicates_r) - 1}" if n_replicates_r else "none",
        "n_test": int(n_test),
        "n_train_weight_models": int(n_train),
        "n_resamples": int(n_resamples),
        "confidence": float(confidence),
        "crossfit_folds": int(crossfit_folds),
        "jobs_per_setting": int(jobs_per_setting),
        "models_oracle_weights": list(models),
        "models_estimated_weights": list(estimated_models),
        "max_leaf_nodes": {f"{c}/{m}": int(v) for (c, m), v in sorted(max_leaf_nodes.items())},
        "hyperparameters": (
            "weight models refitted on every replicate with the max_leaf_nodes selected in the main run "
            "(results/weights/{dataset}/weight_model_selection.csv; for cross-fitted P(A | R) the value most "
            "outer folds selected), no new grid search"
        ),
        "weights_x_y": (
            "P(A | X), P(A | Y) fitted on a fresh training-size sample of the population (independent of the "
            "replicate's test rows) and predicting the test rows, as the pipeline does in the main settings"
        ),
        "weights_r": "P(A | R) cross-fitted on the replicate's test rows (crossfit_folds outer folds)",
        "outcome_models": "fixed: those of the main run (results/models/{dataset}/models.joblib)",
        "truth": (
            "population T_a of the model (fitted models: of that fitted model) with the exact oracle weights, by "
            "numerical integration (disaggregated_eval.population.population_controlled_differences)"
        ),
        "covers": f"ci_low - {TRUTH_TOLERANCE:g} <= truth <= ci_high + {TRUTH_TOLERANCE:g}",
        "seeds": {
            "test set": f"('coverage', '{dataset}', 'test', r)",
            "weight-training sample": f"('coverage', '{dataset}', 'train', r)",
            "bootstrap": f"('coverage', '{dataset}', 'bootstrap', r)",
            "weight models": (
                f"('coverage', '{dataset}', 'weights', r) + ('X',) / ('Y',) for the random_state of P(A | X), "
                "P(A | Y); + ('R', model) for the cross-fitting branch of P(A | R)"
            ),
        },
    }


def collect_designs(designs: Sequence[Mapping]) -> dict:
    """One record of the whole study from the per-setting :func:`study_design` records.

    Parameters
    ----------
    designs : sequence of dict
        :func:`study_design` of each setting.

    Returns
    -------
    dict
        ``description`` (the study in words), ``n_resamples`` (per replicate; one value or a list),
        ``n_replicates`` and ``n_replicates_r`` per dataset, and ``datasets``: the records.
    """
    designs = list(designs)
    resamples = sorted({int(d["n_resamples"]) for d in designs})
    return {
        "description": (
            "Coverage of the 95% percentile bootstrap intervals of T_a (docs/method.md, 'Coverage study'): per "
            "main setting, fresh test sets of the pipeline's test size from the DGP; the outcome models stay those "
            "of the main run; oracle weights for every model; estimated weights for the fitted models refitted on "
            "every replicate with the main run's selected max_leaf_nodes (no new grid search); coverage = share of "
            "replicates whose interval contains the population T_a."
        ),
        "n_resamples": resamples[0] if len(resamples) == 1 else resamples,
        "n_replicates": {d["dataset"]: int(d["n_replicates"]) for d in designs},
        "n_replicates_r": {d["dataset"]: int(d["n_replicates_r"]) for d in designs},
        "datasets": designs,
    }


def population_truth(
    dataset: str,
    *,
    fitted: OutcomeModels | None,
    oracles: Mapping[str, population.ScoreOracle],
    metrics: Sequence[str] = vocabulary.PIPELINE_METRICS,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
) -> pd.DataFrame:
    """Population ``T_a`` of every model of ``oracles`` and control, with the exact oracle weights.

    :func:`disaggregated_eval.population.population_controlled_differences` (numerical
    integration; quadrature error about 1e-11) of each model: for a fitted model the population
    ``T_a`` of that fitted model, for a Bayes-optimal score that of the DGP.

    Parameters
    ----------
    dataset : str
        A simulation setting.
    fitted : OutcomeModels or None
        The main run's outcome models (needed for fitted model types).
    oracles : mapping of str to ScoreOracle
        Model -> its :func:`population.score_oracle`; the keys are the models of the result.
    metrics, threshold, preference_threshold
        As in :func:`population.population_controlled_differences`.

    Returns
    -------
    DataFrame
        Columns :data:`TRUTH_COLUMNS` (``truth`` = the population ``controlled_difference``); one
        row per model, control (none, X, Y, R), group and metric.
    """
    tables = [
        population.population_controlled_differences(
            dataset,
            model,
            fitted=fitted,
            oracle=oracle,
            metrics=metrics,
            threshold=threshold,
            preference_threshold=preference_threshold,
            group_labels=_GROUP_LABELS,
        )
        for model, oracle in oracles.items()
    ]
    table = pd.concat(tables, ignore_index=True).rename(columns={"controlled_difference": "truth"})
    return table[list(TRUTH_COLUMNS)]


def nominal_band(
    n: np.ndarray | int, *, confidence: float = 0.95, level: float = 0.95
) -> tuple[np.ndarray, np.ndarray]:
    """Range of the observed coverage of a correct ``confidence`` interval over ``n`` replicates.

    The number of covering replicates of an exact interval is ``Binomial(n, confidence)``; the band
    is ``[q_lo / n, q_hi / n]`` with ``q_lo``, ``q_hi`` its ``(1 - level) / 2`` and
    ``(1 + level) / 2`` quantiles (``scipy.stats.binom.ppf``), so it holds the observed coverage
    with probability at least ``level``. For ``n = 200`` and 0.95: [0.92, 0.98].

    Parameters
    ----------
    n : int or ndarray of int
        Replicates (>= 1).
    confidence : float, default 0.95
        Nominal coverage of the interval.
    level : float, default 0.95
        Probability content of the band.

    Returns
    -------
    low, high : ndarray of float
        Same shape as ``n``.
    """
    n = np.asarray(n, dtype=np.int64)
    if (n < 1).any():
        raise ValueError(f"n must be >= 1; got {n[n < 1][:5].tolist()}")
    confidence = check_open_unit(confidence, "confidence")
    level = check_open_unit(level, "level")
    low = stats.binom.ppf((1.0 - level) / 2.0, n, confidence) / n
    high = stats.binom.ppf((1.0 + level) / 2.0, n, confidence) / n
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def clopper_pearson(k: np.ndarray | int, n: np.ndarray | int, *, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Clopper-Pearson (exact binomial) interval of a proportion ``k / n``.

    ``low = Beta((1 - level)/2; k, n - k + 1)`` (0 if ``k = 0``), ``high = Beta((1 + level)/2; k + 1,
    n - k)`` (1 if ``k = n``); the same as ``scipy.stats.binomtest(k, n).proportion_ci(level,
    method="exact")``.

    Parameters
    ----------
    k, n : int or ndarray of int
        Successes and trials, ``0 <= k <= n``, ``n >= 1``.
    level : float, default 0.95

    Returns
    -------
    low, high : ndarray of float
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if (n < 1).any() or (k < 0).any() or (k > n).any():
        raise ValueError("clopper_pearson needs 0 <= k <= n and n >= 1")
    level = check_open_unit(level, "level")
    alpha = 1.0 - level
    with np.errstate(invalid="ignore", divide="ignore"):
        low = np.where(k > 0, stats.beta.ppf(alpha / 2.0, k, n - k + 1.0), 0.0)
        high = np.where(k < n, stats.beta.ppf(1.0 - alpha / 2.0, k + 1.0, n - k), 1.0)
    return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)


def coverage_table(
    replicates: pd.DataFrame,
    truth: pd.DataFrame,
    *,
    confidence: float = 0.95,
    level: float = 0.95,
    tolerance: float = TRUTH_TOLERANCE,
) -> pd.DataFrame:
    """Coverage of the intervals per cell (dataset, model, control, weight source, group, metric).

    A replicate's interval covers the truth if ``ci_low - tolerance <= truth <= ci_high +
    tolerance``. Replicates whose interval is undefined (NaN: the metric was undefined on every
    resample) are not counted in ``n_replicates`` but in ``n_undefined_replicates``. A cell whose
    truth is undefined (NaN: the population ``T_a`` is, e.g. the precision of a Bayes model that
    predicts no positive in a group) has nothing to cover: it keeps its row, with ``coverage`` and
    its intervals NaN, ``within_band`` false and ``caveat`` :data:`UNDEFINED_TRUTH`, and is left out
    of :func:`coverage_summary` and of the coverage figure.

    Parameters
    ----------
    replicates : DataFrame
        Rows of :data:`REPLICATE_COLUMNS` (several replicates and cells; ``n_undefined`` not used).
    truth : DataFrame
        Columns :data:`TRUTH_COLUMNS`; every cell of ``replicates`` needs its truth row (matched on
        dataset, model, control, group, metric: the truth does not depend on the weight source);
        its ``truth`` may be NaN (undefined).
    confidence : float, default 0.95
        Nominal level of the intervals (for the nominal band).
    level : float, default 0.95
        Level of the Clopper-Pearson interval of the coverage and of the nominal band.
    tolerance : float, default :data:`TRUTH_TOLERANCE`
        Slack of the comparison (the truth's numerical error).

    Returns
    -------
    DataFrame
        Columns :data:`COVERAGE_COLUMNS`, one row per cell, sorted by the cell keys:
        ``n_covered`` / ``n_replicates`` = ``coverage``; ``coverage_ci_low``/``_high``: its
        Clopper-Pearson interval (:func:`clopper_pearson`); ``nominal_band_low``/``_high``:
        :func:`nominal_band` of ``n_replicates``; ``within_band``: the coverage lies in that band;
        ``mean_width``: mean of ``ci_high - ci_low``; ``mean_bias``: mean of ``estimate - truth``;
        ``sd_estimate``: standard deviation of the estimates (ddof 1; NaN for one replicate);
        ``n_resamples``: the bootstrap resamples per replicate; ``caveat``: empty, or why the cell
        has no coverage (:data:`UNDEFINED_TRUTH`). Statistics other than
        ``n_undefined_replicates`` use the replicates with a defined interval; a cell without any
        has ``n_replicates = 0`` and NaN statistics.

    Raises
    ------
    ValueError
        If columns are missing, a cell has several rows for one replicate, a cell has no truth row,
        or the levels are not in (0, 1).
    """
    check_columns(replicates, list(REPLICATE_COLUMNS), "replicates")
    check_columns(truth, list(TRUTH_COLUMNS), "truth")
    confidence = check_open_unit(confidence, "confidence")
    level = check_open_unit(level, "level")
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise ValueError(f"tolerance must be a finite number >= 0; got {tolerance!r}")
    cell = ["dataset", "model", "control", "weight_source", "group", "metric"]
    truth_keys = ["dataset", "model", "control", "group", "metric"]
    repeated = replicates.duplicated(cell + ["replicate"])
    if repeated.any():
        example = replicates.loc[repeated, cell + ["replicate"]].iloc[0].to_dict()
        raise ValueError(f"replicates has several rows for one cell and replicate, e.g. {example}")
    if truth.duplicated(truth_keys).any():
        raise ValueError("truth has several rows for one (dataset, model, control, group, metric)")
    rows = replicates.merge(truth[truth_keys + ["truth"]].assign(_has_truth=True), on=truth_keys, how="left",
                            validate="many_to_one")  # fmt: skip
    no_truth = rows["_has_truth"].isna()
    if no_truth.any():
        example = rows.loc[no_truth, truth_keys].iloc[0].to_dict()
        raise ValueError(f"no truth for the cell {example} ({int(no_truth.sum())} replicate rows without one)")
    low, high = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
    t = rows["truth"].to_numpy(float)
    defined = np.isfinite(low) & np.isfinite(high)
    counted = defined & np.isfinite(t)  # a cell whose truth is undefined has nothing to cover
    rows = rows.assign(
        _defined=defined,
        _covered=counted & (low - tolerance <= t) & (t <= high + tolerance),
        _width=np.where(defined, high - low, np.nan),
        _error=np.where(counted, rows["estimate"].to_numpy(float) - t, np.nan),
        _estimate=np.where(defined, rows["estimate"].to_numpy(float), np.nan),
    )
    grouped = rows.groupby(cell, sort=True, dropna=False)
    out = grouped.agg(
        n_replicates=("_defined", "sum"),
        n_covered=("_covered", "sum"),
        mean_width=("_width", "mean"),
        mean_bias=("_error", "mean"),
        sd_estimate=("_estimate", lambda v: float(np.std(v.dropna(), ddof=1)) if v.notna().sum() > 1 else np.nan),
        truth=("truth", "first"),
        n_rows=("_defined", "size"),
        n_resamples=("n_resamples", "max"),
    ).reset_index()
    n = out["n_replicates"].to_numpy(np.int64)
    k = out["n_covered"].to_numpy(np.int64)
    undefined_truth = ~np.isfinite(out["truth"].to_numpy(float))
    some = (n > 0) & ~undefined_truth
    coverage = np.full(n.shape, np.nan)
    ci_low, ci_high, band_low, band_high = (np.full(n.shape, np.nan) for _ in range(4))
    coverage[some] = k[some] / n[some]
    ci_low[some], ci_high[some] = clopper_pearson(k[some], n[some], level=level)
    band_low[some], band_high[some] = nominal_band(n[some], confidence=confidence, level=level)
    out["coverage"] = coverage
    out["coverage_ci_low"], out["coverage_ci_high"] = ci_low, ci_high
    out["nominal_band_low"], out["nominal_band_high"] = band_low, band_high
    # compare counts, not rounded ratios: k within [ppf_lo, ppf_hi]
    out["within_band"] = some & (k >= np.round(band_low * n)) & (k <= np.round(band_high * n))
    out["n_undefined_replicates"] = out["n_rows"] - out["n_replicates"]
    out["n_replicates"] = out["n_replicates"].astype(np.int64)
    out["n_covered"] = out["n_covered"].astype(np.int64)
    out["n_undefined_replicates"] = out["n_undefined_replicates"].astype(np.int64)
    out["caveat"] = np.where(undefined_truth, UNDEFINED_TRUTH, "")
    return out[list(COVERAGE_COLUMNS)]


def coverage_summary(coverage: pd.DataFrame) -> pd.DataFrame:
    """Headline numbers of a coverage table: per weight source, per control and per model.

    Rows at three levels for each weight source: every control over all models (``model ==
    "all"``), all controls and models (``model == "all"``, ``control == "all"``), and the same two
    per model. Cells without a defined replicate, or whose truth is undefined, are left out.

    Parameters
    ----------
    coverage : DataFrame
        :func:`coverage_table` output (columns ``weight_source``, ``model``, ``control``,
        ``coverage``, ``within_band``, ``nominal_band_low``, ``n_replicates``).

    Returns
    -------
    DataFrame
        Columns :data:`SUMMARY_COLUMNS`: ``n_cells``; ``share_within_band`` and ``share_below_band``
        (cells whose coverage is within / below their nominal band); ``median_coverage``,
        ``min_coverage``, ``mean_coverage``; ``median_n_replicates``. Ordered by weight source
        (none, oracle, estimated), model (``all`` first, then ``vocabulary.SIMULATION_MODELS``
        order) and control (none, X, Y, R, ``all``).
    """
    columns = ["weight_source", "model", "control", "coverage", "within_band", "nominal_band_low", "n_replicates"]
    check_columns(coverage, columns, "coverage")
    cells = coverage[(coverage["n_replicates"] > 0) & coverage["coverage"].notna()].assign(
        _below=lambda d: d["coverage"] < d["nominal_band_low"],
        _within=lambda d: d["within_band"].astype(bool),
    )

    def summarise(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
        out = frame.groupby(keys, sort=False).agg(
            n_cells=("coverage", "size"),
            share_within_band=("_within", "mean"),
            share_below_band=("_below", "mean"),
            median_coverage=("coverage", "median"),
            min_coverage=("coverage", "min"),
            mean_coverage=("coverage", "mean"),
            median_n_replicates=("n_replicates", "median"),
        )
        return out.reset_index()

    parts = [
        summarise(cells, ["weight_source", "control"]).assign(model="all"),
        summarise(cells, ["weight_source"]).assign(model="all", control="all"),
        summarise(cells, ["weight_source", "model", "control"]),
        summarise(cells, ["weight_source", "model"]).assign(control="all"),
    ]
    table = pd.concat(parts, ignore_index=True)
    orders = {
        "weight_source": ("none", "oracle", "estimated"),
        "model": ("all", *vocabulary.SIMULATION_MODELS),
        "control": (*vocabulary.CONTROLS, "all"),
    }
    table = table.sort_values(
        list(orders),
        key=lambda column: column.map({v: i for i, v in enumerate(orders[column.name])}).fillna(
            len(orders[column.name])
        ),
        kind="stable",
    ).reset_index(drop=True)
    return table[list(SUMMARY_COLUMNS)]
