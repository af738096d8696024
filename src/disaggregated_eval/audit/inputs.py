"""Checking and coding the input of an audit: the options and the data frame.

Everything is checked before any computation. Each error is an :class:`AuditInputError` (a
``ValueError``) whose message names the option or column, shows the offending values (the first few)
and says what was expected, e.g. ``label column 'y' must hold 0/1 values; got values {2, 3} in 14
rows (first at row 7); give positive_label when the label has two other values such as yes/no``.

Limits on the work an audit may ask for are named constants here, each checked by one function, before
any work: :data:`MAX_PERMUTATIONS`, :data:`MIN_TAIL_REPLICATES` (:func:`check_resample_count`) and
:data:`MAX_PAIRWISE_COMPARISONS` (:func:`check_comparison_count`). Values that work but weaken the
audit give an :class:`AuditWarning`, and so does work that may take hours
(:data:`PERMUTATION_WORK_WARNING`, checked in :mod:`.core` once the slices are planned).

The frame may be a pandas or a polars ``DataFrame`` (converted with ``to_pandas`` at the boundary;
polars is never imported here). Text levels of the group columns are stripped of surrounding spaces
by default (``strip_levels``: spaces, tabs, line breaks; a value of whitespace only is missing), with a note naming the levels that
merge; a column that mixes booleans with the numbers 0/1 (which Python treats as equal keys) is
refused rather than silently merged.

The coded input (:class:`AuditInput`) has its rows in the order of the first model's score (a stable
sort): the slice kernel then reads its bootstrap counts without a gather, and every later stage
(bootstrap, permutation tests, controlled evaluation) sees the same row order, so that resample ``i``
draws the same rows everywhere.
"""

from __future__ import annotations

import math
import numbers
import sys
import unicodedata
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, fields, replace
from itertools import combinations
from typing import Any

import numba
import numpy as np
import pandas as pd

from .. import vocabulary
from .._validation import brief, check_choice, check_int, check_open_unit, check_seed, format_values, show_value
from ..memory import MAX_CALIBRATION_BINS, MAX_RESAMPLES
from ..metrics import check_metric_names
from .options import AuditOptions
from .slices import FAMILY_SEPARATOR, Attribute

__all__ = [
    "AuditInputError",
    "AuditWarning",
    "AuditInput",
    "resolve_options",
    "prepare_input",
    "MISSING_LEVEL",
    "MAX_PERMUTATIONS",
    "MIN_TAIL_REPLICATES",
    "MAX_PAIRWISE_COMPARISONS",
    "PERMUTATION_WORK_WARNING",
    "min_resamples",
    "check_resample_count",
    "check_comparison_count",
    "frequency_counts",
    "as_pandas",
    "expand_input",
    "MAX_EXPANDED_ROWS",
]

#: Name of the level that holds the rows with a missing attribute value (``missing_group="level"``).
MISSING_LEVEL = "missing"
#: Largest integer code of a categorical feature of HistGradientBoosting (``max_bins - 1``).
_MAX_CATEGORY_CODE = 254
#: How many offending values an error message shows.
_SHOW = 5
#: Most permutations per test: p-values down to 1e-6, far below any adjusted significance level.
MAX_PERMUTATIONS = 1_000_000
#: Fewest bootstrap replicates beyond each bound of a percentile interval without a warning: with fewer,
#: the bound is (nearly) an extreme replicate, which says more about the number of resamples than the data
#: (with fewer than one, the interval is refused: :func:`check_resample_count`).
MIN_TAIL_REPLICATES = 5
#: Most pairwise comparisons of slices (per model and metric, over every attribute and intersection):
#: each has a bootstrap interval and a permutation test, so the work grows with the square of the levels.
MAX_PAIRWISE_COMPARISONS = 20_000
#: Rows (or units) the Monte-Carlo permutation tests may walk, at most, before an :class:`AuditWarning`
#: says so: about a quarter of an hour of CPU time at 10 ns per row.
PERMUTATION_WORK_WARNING = 10**11
#: Weights whose largest lies outside [2^-64, 2^64] are rescaled by a power of two (:func:`_scaled_weights`).
_WEIGHT_EXPONENT_RANGE = 64
#: Smallest ratio of a positive weight to the largest: below it its square (about 1e-300) underflows.
_MIN_WEIGHT_RATIO = 1e-150
#: Spellings of true and false for a boolean label's positive_label.
_TRUE_TEXT = ("true", "yes", "1", "1.0")
_FALSE_TEXT = ("false", "no", "0", "0.0")
#: Most folds of a grid search or of the cross-fitting (each fold refits every weight model).
_MAX_FOLDS = 100
#: Largest ``max_leaf_nodes`` of a weight model (HistGradientBoosting grows trees of at most this many
#: leaves; beyond the rows of a file it changes nothing but the time).
_MAX_LEAF_NODES = 100_000
#: Attribute on the per-object record of :func:`resolve_options`: the values it checked.
_CHECKED = "_checked_values"


class AuditInputError(ValueError):
    """Bad input to an audit: an option or a column of the data frame (checked before any work)."""


class AuditWarning(UserWarning):
    """An option or input that works but weakens the audit (e.g. too few resamples for the level)."""


@dataclass(frozen=True)
class AuditInput:
    """The checked and coded input of an audit, rows sorted by the first model's score.

    Attributes
    ----------
    y : ndarray (n,), float64
        Labels 0/1.
    scores : dict of str to ndarray (n,), float64
        Each model's scores in [0, 1], in the order of ``options.scores``.
    hard : dict of str to bool
        Whether the model's column holds only 0 and 1 (hard predictions).
    weight : ndarray (n,) or None
        Sample weights (``options.sample_weight``).
    count : ndarray (n,), int64, or None
        How many identical rows each row stands for (``options.frequency_weight``; every count >= 1, rows of
        0 are dropped); None: one each. Every stage counts a row ``count`` times (``docs/method.md``,
        "Frequency weights").
    attributes : tuple of Attribute
        The protected attributes (levels coded ``0..L-1``).
    features : pandas.DataFrame or None
        Features for the control variable X (numeric; categorical columns integer-coded), index 0..n-1.
    categorical : tuple of str
        The integer-coded categorical features.
    row : ndarray (n,), int64
        Position of each row in the frame given (after rows dropped for a missing attribute).
    notes : tuple of str
    """

    y: np.ndarray
    scores: dict[str, np.ndarray]
    hard: dict[str, bool]
    weight: np.ndarray | None
    attributes: tuple[Attribute, ...]
    features: pd.DataFrame | None
    categorical: tuple[str, ...]
    row: np.ndarray
    notes: tuple[str, ...]
    count: np.ndarray | None = None

    @property
    def n(self) -> int:
        """Rows of the coded arrays (each standing for ``count`` rows when counts are given)."""
        return int(self.y.shape[0])

    @property
    def n_rows(self) -> int:
        """Rows audited: the sum of the counts (the rows of the frame the counts stand for)."""
        return self.n if self.count is None else int(self.count.sum())


# ----------------------------------------------------------------------------------------------
# Options
# ----------------------------------------------------------------------------------------------


def _as_list(value: Any, name: str) -> list:
    """A list of option values; a single string (or number) is a list of one."""
    if isinstance(value, (str, numbers.Number)):
        return [value]
    if value is None:
        raise AuditInputError(f"{name} must be a list; got None")
    try:
        return list(value)
    except TypeError:
        raise AuditInputError(f"{name} must be a list; got {brief(value)}") from None


def _names(value: Any, name: str, *, allow_empty: bool = True) -> list[str]:
    values = _as_list(value, name)
    bad = [v for v in values if not isinstance(v, str) or not v]
    if bad:
        raise AuditInputError(f"{name} must be column names (non-empty strings); got {brief(bad)}")
    counts = Counter(values)
    repeated = sorted(v for v, k in counts.items() if k > 1)
    if repeated:
        raise AuditInputError(f"{name} must be distinct; {brief(repeated)} appear more than once")
    if not values and not allow_empty:
        raise AuditInputError(f"{name} must name at least one column")
    return values


def _wrap(check, *args, **kwargs):
    try:
        return check(*args, **kwargs)
    except (TypeError, ValueError) as error:
        raise AuditInputError(str(error)) from None


def resolve_options(options: AuditOptions | None, overrides: Mapping[str, Any]) -> AuditOptions:
    """Merge ``overrides`` into ``options`` (or the defaults) and check every option.

    Returns
    -------
    AuditOptions
        Normalised options: lists are lists, ``intersections`` is the integer used.

    Raises
    ------
    AuditInputError
        Unknown option names or any invalid value (the message names the option).
    """
    if options is None:
        options = AuditOptions()
    elif not isinstance(options, AuditOptions):
        raise AuditInputError(f"options must be an AuditOptions; got {type(options).__name__}")
    if not overrides and getattr(options, _CHECKED, None) == astuple(options):
        return options  # resolved by this function and unchanged since: validated once per call
    known = {f.name for f in fields(AuditOptions)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise AuditInputError(f"unknown option(s) {unknown}; the options are {sorted(known)}")
    o = replace(options, **dict(overrides))

    if not isinstance(o.label, str) or not o.label:
        raise AuditInputError(f"label must name the label column; got {brief(o.label)}")
    scores = _names(o.scores, "scores", allow_empty=False)
    groups = _names(o.groups, "groups", allow_empty=False)
    features = _names(o.features, "features")
    for group in groups:
        for mark in ("=", FAMILY_SEPARATOR):
            if mark in group:
                raise AuditInputError(
                    f"group column names must not contain {mark!r} (it separates the parts of slice names); "
                    f"got {brief(group)}; rename the column"
                )
    if vocabulary.OVERALL in groups:
        raise AuditInputError(
            f"a group column must not be called {vocabulary.OVERALL!r} (it names the whole population)"
        )
    if o.positive_label is not None and not isinstance(o.positive_label, (str, numbers.Number)):
        raise AuditInputError(f"positive_label must be a value of the label column; got {brief(o.positive_label)}")
    intersections = o.intersections
    if intersections is None:
        intersections = len(groups)
    else:
        intersections = _wrap(check_int, intersections, "intersections", minimum=1, maximum=len(groups))
    min_group_size = _wrap(check_int, o.min_group_size, "min_group_size", minimum=0)
    min_denominator = _wrap(check_int, o.min_denominator, "min_denominator", minimum=0)
    threshold = _wrap(check_open_unit, o.threshold, "threshold")
    preference_threshold = (
        threshold
        if o.preference_threshold is None
        else _wrap(check_open_unit, o.preference_threshold, "preference_threshold")
    )
    confidence = _wrap(check_open_unit, o.confidence, "confidence")
    metrics = list(_wrap(check_metric_names, _as_list(o.metrics, "metrics"), "metrics"))
    n_resamples = _wrap(check_int, o.n_resamples, "n_resamples", minimum=1, maximum=MAX_RESAMPLES)
    resampling = _wrap(check_choice, o.resampling, "resampling", vocabulary.RESAMPLING_SCHEMES)
    seed = _wrap(check_seed, o.seed, "seed")
    adjust = _wrap(check_choice, o.adjust, "adjust", ("holm", "bh", "none"))
    adjust_scope = _wrap(check_choice, o.adjust_scope, "adjust_scope", ("metric", "model"))
    pairwise_max_levels = o.pairwise_max_levels
    if pairwise_max_levels is not None:
        pairwise_max_levels = _wrap(check_int, pairwise_max_levels, "pairwise_max_levels", minimum=0)
    check_resample_count(n_resamples, confidence)
    n_permutations = _wrap(check_int, o.n_permutations, "n_permutations", minimum=0)
    if n_permutations > MAX_PERMUTATIONS:
        raise AuditInputError(
            f"n_permutations {n_permutations:,} is more than the limit of {MAX_PERMUTATIONS:,} permutations per "
            f"test (p-values down to {1 / (1 + MAX_PERMUTATIONS):.0e}); give fewer (--n-permutations)"
        )
    test_method = _wrap(check_choice, o.test_method, "test_method", vocabulary.TEST_METHODS)
    controls = _as_list(o.controls, "controls")
    bad = [c for c in controls if c not in vocabulary.CONTROLS]
    if bad:
        raise AuditInputError(f"controls must be among {list(vocabulary.CONTROLS)}; got {brief(bad)}")
    if len(set(controls)) != len(controls):
        raise AuditInputError(f"controls must be distinct; got {brief(controls)}")
    controls = [c for c in vocabulary.CONTROLS if c in controls]
    if "X" in controls and not features:
        raise AuditInputError("control X needs feature columns: give features (--features col1 col2 ...)")
    if o.sample_weight is not None and (not isinstance(o.sample_weight, str) or not o.sample_weight):
        raise AuditInputError(f"sample_weight must name a column or be None; got {brief(o.sample_weight)}")
    if o.frequency_weight is not None and (not isinstance(o.frequency_weight, str) or not o.frequency_weight):
        raise AuditInputError(f"frequency_weight must name a column or be None; got {brief(o.frequency_weight)}")
    missing_group = _wrap(check_choice, o.missing_group, "missing_group", ("level", "drop"))
    if not isinstance(o.strip_levels, (bool, np.bool_)):
        raise AuditInputError(f"strip_levels must be True or False; got {brief(o.strip_levels)}")
    grid = _as_list(o.max_leaf_nodes, "max_leaf_nodes")
    grid = [_wrap(check_int, v, "max_leaf_nodes entries", minimum=2, maximum=_MAX_LEAF_NODES) for v in grid]
    if not grid or len(set(grid)) != len(grid):
        raise AuditInputError(f"max_leaf_nodes must be a non-empty list of distinct integers >= 2; got {brief(grid)}")
    cv_folds = _wrap(check_int, o.cv_folds, "cv_folds", minimum=2, maximum=_MAX_FOLDS)
    crossfit_folds = _wrap(check_int, o.crossfit_folds, "crossfit_folds", minimum=2, maximum=_MAX_FOLDS)
    n_threads = _wrap(check_int, o.n_threads, "n_threads", minimum=1, maximum=numba.config.NUMBA_NUM_THREADS)
    memory_limit_mb = o.memory_limit_mb
    if memory_limit_mb is not None:
        if isinstance(memory_limit_mb, bool) or not isinstance(memory_limit_mb, numbers.Real):
            raise AuditInputError(f"memory_limit_mb must be a number of MB or None; got {brief(memory_limit_mb)}")
        if not (math.isfinite(memory_limit_mb) and memory_limit_mb > 0):
            raise AuditInputError(f"memory_limit_mb must be a positive number of MB; got {brief(memory_limit_mb)}")
        memory_limit_mb = float(memory_limit_mb)
    summary_options = _summary_options(o, groups=groups, intersections=intersections)
    resolved = replace(
        o,
        strip_levels=bool(o.strip_levels),
        scores=scores,
        groups=groups,
        features=features,
        intersections=intersections,
        min_group_size=min_group_size,
        min_denominator=min_denominator,
        threshold=threshold,
        preference_threshold=preference_threshold,
        confidence=confidence,
        metrics=metrics,
        n_resamples=n_resamples,
        resampling=resampling,
        seed=seed,
        adjust=adjust,
        adjust_scope=adjust_scope,
        pairwise_max_levels=pairwise_max_levels,
        n_permutations=n_permutations,
        test_method=test_method,
        controls=controls,
        missing_group=missing_group,
        max_leaf_nodes=grid,
        cv_folds=cv_folds,
        crossfit_folds=crossfit_folds,
        n_threads=n_threads,
        memory_limit_mb=memory_limit_mb,
        **summary_options,
    )
    object.__setattr__(resolved, _CHECKED, astuple(resolved))
    return resolved


def _check_reference_levels(references: list[str], attributes: tuple[Attribute, ...]) -> None:
    """Every level the option ``reference`` names is a level of the data (before any work)."""
    from .fairness import check_reference_levels

    _wrap(check_reference_levels, references, attributes)


def _summary_options(o: AuditOptions, *, groups: list[str], intersections: int) -> dict[str, Any]:
    """The checked options of the summary analyses (fairness reference, thresholds, calibration bins,
    detectability); the checks themselves live with each analysis."""
    from ..verdicts import parse_tolerance
    from .fairness import parse_references
    from .thresholds import parse_thresholds

    reference = _wrap(parse_references, _as_list(o.reference, "reference"), groups=groups, intersections=intersections)
    thresholds = [str(t) if not isinstance(t, str) else t for t in _as_list(o.thresholds, "thresholds")]
    _wrap(parse_thresholds, thresholds)
    calibration_bins = _wrap(check_int, o.calibration_bins, "calibration_bins", minimum=1, maximum=MAX_CALIBRATION_BINS)
    detect_gap = None if o.detect_gap is None else _wrap(check_open_unit, o.detect_gap, "detect_gap")
    power = _wrap(check_open_unit, o.power, "power")
    tolerance = _wrap(parse_tolerance, _as_list(o.tolerance, "tolerance")).items()
    from .selection_table import check_selection_options  # the margins file read and checked, the Gammas

    selection_sensitivity = check_selection_options(
        o.population_margins, _as_list(o.selection_sensitivity, "selection_sensitivity"), groups=groups
    )
    population_margins = None if o.population_margins is None else str(o.population_margins)
    return dict(reference=reference, thresholds=thresholds, calibration_bins=calibration_bins, detect_gap=detect_gap,
                power=power, tolerance=tolerance, selection_sensitivity=selection_sensitivity,
                population_margins=population_margins)  # fmt: skip


def min_resamples(confidence: float) -> int:
    """Fewest bootstrap resamples whose percentile interval at ``confidence`` has
    :data:`MIN_TAIL_REPLICATES` replicates beyond each bound (200 at 0.95, 1,000 at 0.99)."""
    tail = (1.0 - confidence) / 2.0
    return max(1, math.ceil(MIN_TAIL_REPLICATES / tail - 1e-9))


def check_resample_count(n_resamples: int, confidence: float) -> None:
    """Refuse, or warn about, a number of resamples too small for the interval's level.

    The bounds of a percentile interval are the ``(1 - confidence) / 2`` and ``(1 + confidence) / 2``
    quantiles of the replicates; with ``B`` resamples ``B (1 - confidence) / 2`` replicates lie
    beyond each bound. With fewer than one the bounds are the smallest and largest replicate (with
    one resample a "95% interval" is a single point): refused. With fewer than
    :data:`MIN_TAIL_REPLICATES` the bounds rest on a few extreme replicates and move from seed to seed:
    an :class:`AuditWarning`.

    Raises
    ------
    AuditInputError
        Giving the smallest sufficient ``n_resamples`` (:func:`min_resamples`).

    Warns
    -----
    AuditWarning
        Giving the same value.
    """
    need = min_resamples(confidence)
    if n_resamples >= need:
        return
    beyond = n_resamples * (1.0 - confidence) / 2.0
    text = (
        f"n_resamples {n_resamples:,} is too few for {confidence:g} intervals: {beyond:.3g} resamples lie beyond "
        f"each bound of a percentile interval"
    )
    advice = f"give n_resamples >= {need:,} (--n-resamples {need}) or a lower confidence"
    if beyond < 1.0 - 1e-9:
        raise AuditInputError(f"{text}, so its bounds would be the extreme replicates; {advice}")
    warnings.warn(
        f"{text} (fewer than {MIN_TAIL_REPLICATES}), so its bounds rest on a few extreme replicates; {advice}",
        AuditWarning,
        stacklevel=3,
    )


def check_comparison_count(
    attributes: Sequence[tuple[str, int]], intersections: int, pairwise_max_levels: int | None = None
) -> None:
    """Refuse, before any work, more than :data:`MAX_PAIRWISE_COMPARISONS` pairwise comparisons.

    Every family of slices (each attribute, each intersection of up to ``intersections``
    attributes, all combinations of levels) of at most ``pairwise_max_levels`` slices compares each
    pair of its slices (:mod:`.comparisons`), so such an attribute with ``L`` levels gives
    ``L (L - 1) / 2`` comparisons per model and metric.

    Parameters
    ----------
    attributes : sequence of (name, number of levels)
        The group columns in the order given.
    intersections : int
        Largest number of attributes crossed.
    pairwise_max_levels : int or None
        Families with more slices get no pairwise comparisons (None: every family gets them).

    Raises
    ------
    AuditInputError
        Naming the family with the most pairs and the option to change (``groups`` or
        ``intersections``).
    """
    pairs: dict[tuple[int, ...], int] = {}
    for k in range(1, intersections + 1):
        for combo in combinations(range(len(attributes)), k):
            n = math.prod(attributes[a][1] for a in combo)
            pairs[combo] = n * (n - 1) // 2 if pairwise_max_levels is None or n <= pairwise_max_levels else 0
    total = sum(pairs.values())
    if total <= MAX_PAIRWISE_COMPARISONS:
        return
    alone = {combo: n for combo, n in pairs.items() if len(combo) == 1}
    if sum(alone.values()) > MAX_PAIRWISE_COMPARISONS:  # the attributes themselves have too many levels
        worst = max(alone, key=alone.get)
        name, levels = attributes[worst[0]]
        what = f"group column {name!r} has {levels:,} levels ({pairs[worst]:,} pairs)"
        advice = (
            "recode it into fewer levels, leave it out of groups (--group), or compare pairs only within "
            "smaller families (--pairwise-max-levels)"
        )
    else:  # the intersections: the largest intersections that stays within the limit
        fits = max(k for k in range(1, intersections) if sum(n for c, n in pairs.items() if len(c) <= k)
                   <= MAX_PAIRWISE_COMPARISONS)  # fmt: skip
        worst = max(pairs, key=pairs.get)
        names = FAMILY_SEPARATOR.join(attributes[a][0] for a in worst)
        slices = math.prod(attributes[a][1] for a in worst)
        what = f"the intersection {names} has {slices:,} slices ({pairs[worst]:,} pairs)"
        advice = f"give a smaller intersections (--intersections {fits}), or recode the columns into fewer levels"
    raise AuditInputError(
        f"the audit would make {total:,} pairwise comparisons of slices per model and metric (each with an "
        f"interval and a permutation test), more than the limit of {MAX_PAIRWISE_COMPARISONS:,}: {what}; {advice}"
    )


# ----------------------------------------------------------------------------------------------
# The data frame
# ----------------------------------------------------------------------------------------------


def _show(values: np.ndarray) -> str:
    return format_values(values, limit=_SHOW)


def _where(bad: np.ndarray) -> str:
    rows = np.flatnonzero(bad)
    return f"in {rows.size} row{'s' if rows.size != 1 else ''} (first at row {int(rows[0])})"


def _numeric(series: pd.Series, what: str, expected: str) -> np.ndarray:
    """float64 values of a numeric column (bool included); else an error naming the non-numbers."""
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    converted = pd.to_numeric(series, errors="coerce")
    bad = converted.isna().to_numpy() & series.notna().to_numpy()
    if bad.any():
        raise AuditInputError(
            f"{what} must be {expected}; got non-numeric values {_show(series.to_numpy()[bad])} {_where(bad)}"
        )
    return converted.to_numpy(dtype=np.float64, na_value=np.nan)


def _labels(series: pd.Series, column: str, positive_label: Any) -> np.ndarray:
    what = f"label column {brief(column)}"
    raw = series.to_numpy()
    missing = series.isna().to_numpy()
    if positive_label is None:
        if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
            values = series.to_numpy(dtype=np.float64, na_value=np.nan)
        else:
            values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        ok = (values == 0.0) | (values == 1.0)
        if not ok.all():
            bad = ~ok
            raise AuditInputError(
                f"{what} must hold 0/1 values; got values {_show(raw[bad])} {_where(bad)}; give "
                f"positive_label when the label has two other values (e.g. yes/no)"
            )
        return values
    if missing.any():
        raise AuditInputError(f"{what} must not have missing values; got {_show(raw[missing])} {_where(missing)}")
    distinct = pd.unique(series)
    if len(distinct) > 2:
        raise AuditInputError(f"{what} must be binary (two values); got {len(distinct)} values {_show(distinct)}")
    if pd.api.types.is_bool_dtype(series.dtype) or all(_is_bool(v) for v in distinct):
        # a boolean label: positive_label true/false in any spelling (the command line gives text)
        spelled = str(positive_label).strip().lower()
        if spelled not in _TRUE_TEXT + _FALSE_TEXT:
            raise AuditInputError(
                f"{what} is boolean (True/False); give positive_label true or false; got {brief(positive_label)}"
            )
        wanted = spelled in _TRUE_TEXT
        positive = np.array([bool(v) == wanted for v in raw], dtype=bool)
        if not positive.any():
            raise AuditInputError(
                f"positive_label {brief(positive_label)} does not occur in {what}: it is never {wanted}"
            )
        return positive.astype(np.float64)
    text = series.astype(str).to_numpy()
    positive = text == str(positive_label)
    if not positive.any():
        raise AuditInputError(
            f"positive_label {brief(positive_label)} does not occur in {what}; its values are {_show(distinct)}"
        )
    return positive.astype(np.float64)


def _scores(series: pd.Series, column: str) -> np.ndarray:
    what = f"score column {brief(column)}"
    values = _numeric(series, what, "numbers in [0, 1] (probabilities of the positive class, or 0/1 predictions)")
    bad = ~(np.isfinite(values) & (values >= 0.0) & (values <= 1.0))
    if bad.any():
        raise AuditInputError(
            f"{what} must hold finite numbers in [0, 1] (probabilities of the positive class, or 0/1 "
            f"predictions); got values {_show(series.to_numpy()[bad])} {_where(bad)}"
        )
    return values


def _weights(series: pd.Series, column: str) -> np.ndarray:
    what = f"sample_weight column {brief(column)}"
    values = _numeric(series, what, "finite numbers >= 0")
    bad = ~(np.isfinite(values) & (values >= 0.0))
    if bad.any():
        raise AuditInputError(
            f"{what} must hold finite numbers >= 0; got values {_show(series.to_numpy()[bad])} {_where(bad)}"
        )
    if not (values > 0).any():
        raise AuditInputError(f"{what} is 0 in every row; at least one row needs a positive weight")
    return values


def _scaled_weights(values: np.ndarray, column: str) -> tuple[np.ndarray, list[str]]:
    """Weights rescaled by a power of two when their largest is far from 1, and refused when a positive
    weight is so much smaller than the largest that its square underflows; with a note on a rescale.

    Every metric, interval and test of the audit depends on the weights only through their ratios, and
    a power of two changes no ratio (nor any sum, but by that power): the results are those of the
    weights as given. Without the rescale, weights of 1e-200 underflow when squared (effective sizes)
    and weights of 1e200 overflow in the sums.
    """
    what = f"sample_weight column {brief(column)}"
    positive = values[values > 0]
    largest, smallest = float(positive.max()), float(positive.min())
    if smallest < largest * _MIN_WEIGHT_RATIO:
        bad = (values > 0) & (values < largest * _MIN_WEIGHT_RATIO)
        raise AuditInputError(
            f"{what} has positive weights below {_MIN_WEIGHT_RATIO:.0e} of the largest ({largest:.3g}): "
            f"{_show(values[bad])} {_where(bad)}; their squares underflow to 0 in the effective sizes: set such "
            f"weights to 0 (no weight) or give less extreme ones"
        )
    exponent = math.frexp(largest)[1]  # largest = m 2^e with 0.5 <= m < 1
    if abs(exponent) <= _WEIGHT_EXPONENT_RANGE:
        return values, []
    return np.ldexp(values, -exponent), [
        f"{what}: weights rescaled by 2^{-exponent} (largest {largest:.3g}) so that their sums neither overflow "
        f"nor underflow; every metric depends only on the weights' ratios, which a power of two does not change"
    ]


#: Largest count of one row: the counts' sum must stay exact in int64 and in float64 sums (2^53).
MAX_FREQUENCY = 2**53


def frequency_counts(series: pd.Series, column: str) -> np.ndarray:
    """The counts of a ``frequency_weight`` column: non-negative integers, checked on every row.

    Parameters
    ----------
    series : pandas.Series of shape (n_rows,)
    column : str
        Its name, for messages.

    Returns
    -------
    ndarray of shape (n_rows,), int64
        0 for a row that stands for no row (dropped by the caller, with a note).

    Raises
    ------
    AuditInputError
        Naming the column, the offending values and the first row: a value that is not a number, missing,
        negative, not a whole number, or so large that the counts' sum would not be exact; every count 0.
    """
    what = f"frequency_weight column {brief(column)}"
    expected = "whole numbers >= 0 (how many identical rows each row stands for)"
    values = _numeric(series, what, expected)
    bad = ~(np.isfinite(values) & (values >= 0.0) & (values == np.floor(values)))
    if bad.any():
        raise AuditInputError(f"{what} must hold {expected}; got values {_show(series.to_numpy()[bad])} {_where(bad)}")
    too_big = values > MAX_FREQUENCY
    if too_big.any() or float(values.sum()) > MAX_FREQUENCY:
        where = _where(too_big) if too_big.any() else f"in all (their sum is {float(values.sum()):.3g})"
        raise AuditInputError(
            f"{what} must sum to at most 2^53 rows (counts beyond it are not exact in float64 sums); got "
            f"{_show(values[too_big]) if too_big.any() else 'counts'} {where}"
        )
    counts = values.astype(np.int64)
    if not (counts > 0).any():
        raise AuditInputError(f"{what} is 0 in every row; at least one row needs a count of 1 or more")
    return counts


#: Most rows a table of counts may stand for when the controlled evaluation needs its rows (its weight
#: models are cross-fitted over the expanded rows): about 4 GB of coded columns and weight-model work.
MAX_EXPANDED_ROWS = 5 * 10**7


def expand_input(prepared: AuditInput, *, reason: str) -> AuditInput:
    """The coded input with every row repeated ``count`` times: the input of the expanded frame.

    The rows stay in the order of the first model's score (a row's copies next to each other), which is
    the order :func:`prepare_input` gives the expanded frame, so that every later stage, its seeds
    included, sees what it sees on that frame.

    Raises
    ------
    AuditInputError
        When the counts stand for more than :data:`MAX_EXPANDED_ROWS` rows (before any work).
    """
    if prepared.count is None:
        return prepared
    total = prepared.n_rows
    if total > MAX_EXPANDED_ROWS:
        raise AuditInputError(
            f"{reason} needs the {total:,} rows the frequency_weight counts stand for, more than the limit of "
            f"{MAX_EXPANDED_ROWS:,}; audit without it (controls none) or on a sample of the rows"
        )
    take = np.repeat(np.arange(prepared.n), prepared.count)
    features = None if prepared.features is None else prepared.features.iloc[take].reset_index(drop=True)
    return AuditInput(
        y=prepared.y[take],
        scores={c: v[take] for c, v in prepared.scores.items()},
        hard=prepared.hard,
        weight=None if prepared.weight is None else prepared.weight[take],
        attributes=tuple(Attribute(a.name, a.levels, a.codes[take]) for a in prepared.attributes),
        features=features,
        categorical=prepared.categorical,
        row=prepared.row[take],
        notes=prepared.notes
        + (f"{reason}: the {prepared.n:,} rows of counts were expanded to the {total:,} rows they stand for",),
    )


def _rows_of(mask: np.ndarray, count: np.ndarray | None) -> str:
    """The rows a mask selects, counted with the frequency weights when given."""
    return str(int(mask.sum()) if count is None else int(count[mask].sum()))


def _level_name(value: Any) -> str:
    value = show_value(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _sorted_levels(values: np.ndarray) -> list:
    try:
        return sorted(values.tolist())
    except TypeError:  # mixed types: sort by text
        return sorted(values.tolist(), key=lambda v: (type(v).__name__, str(v)))


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _check_bool_and_numbers(series: pd.Series, column: str) -> None:
    """Refuse a column holding both booleans and the numbers 0/1: as keys they are equal, so pandas
    (and Python) would silently make ``True`` and ``1`` one level."""
    if series.dtype != object:
        return
    values = series.to_numpy()
    is_bool = np.fromiter((_is_bool(v) for v in values), dtype=bool, count=values.size)
    if not is_bool.any() or is_bool.all():
        return
    clash = [v for v in values[~is_bool] if isinstance(v, numbers.Number) and not _is_bool(v) and v in (0, 1)]
    if clash:
        raise AuditInputError(
            f"group column {brief(column)} holds both booleans (True/False) and the numbers 0/1 "
            f"({format_values(clash, limit=2)}), which Python treats as the same key: True and 1 would form one "
            f"level; recode the column (e.g. as text with .astype(str))"
        )


def _strip_levels(series: pd.Series, column: str, count: np.ndarray | None = None) -> tuple[pd.Series, list[str]]:
    """Text levels without surrounding whitespace (``str.strip``); a value of whitespace only becomes
    missing (with notes naming the levels)."""
    if not (series.dtype == object or pd.api.types.is_string_dtype(series.dtype)
            or isinstance(series.dtype, pd.CategoricalDtype)):  # fmt: skip
        return series, []
    values = series.astype(object) if isinstance(series.dtype, pd.CategoricalDtype) else series
    present = values[values.notna()]
    texts = [v for v in pd.unique(present) if isinstance(v, str)]
    mapping = {v: v.strip() for v in texts if v.strip() != v}
    if not mapping:
        return series, []
    notes = []
    blank = sorted(v for v, stripped in mapping.items() if not stripped)
    if blank:
        blanks = present.isin(blank).to_numpy()
        rows = int(blanks.sum()) if count is None else int(count[values.notna().to_numpy()][blanks].sum())
        notes.append(
            f"group column {brief(column)}: {rows} row{'s' if rows != 1 else ''} whose value is only whitespace "
            f"({', '.join(map(repr, blank[:_SHOW]))}) are treated as missing"
        )
    groups: dict[str, list[str]] = {}
    for v in texts:
        stripped = mapping.get(v, v)
        if stripped:
            groups.setdefault(stripped, []).append(v)
    changed = {k: sorted(vs, key=repr) for k, vs in groups.items() if any(v in mapping for v in vs)}
    if changed:
        shown = "; ".join(f"{' and '.join(map(repr, vs))} -> {k!r}" for k, vs in sorted(changed.items())[:_SHOW])
        more = f"; and {len(changed) - _SHOW} more" if len(changed) > _SHOW else ""
        merged = any(len(vs) > 1 for vs in changed.values())
        notes.append(
            f"group column {brief(column)}: surrounding whitespace removed from levels{' (levels that differ only by it are merged)' if merged else ''}: "
            f"{shown}{more} (strip_levels=False, --no-strip-levels, keeps them)"
        )
    mapping = {v: (stripped if stripped else np.nan) for v, stripped in mapping.items()}
    out = values.map(lambda v: mapping.get(v, v) if isinstance(v, str) else v)
    return out, notes


def _attribute(series: pd.Series, column: str, missing: np.ndarray, missing_as_level: bool) -> Attribute:
    present = ~missing
    if isinstance(series.dtype, pd.CategoricalDtype):
        levels = list(series.cat.categories)
    else:  # one pass of a hash table gives the levels and each row's code among them
        found, values = pd.factorize(series[present] if missing.any() else series)
        levels = _sorted_levels(values)
    names = [_level_name(v) for v in levels]
    if missing_as_level and missing.any():
        if MISSING_LEVEL in names:
            raise AuditInputError(
                f"group column {brief(column)} has a level called {MISSING_LEVEL!r} and missing values, which "
                f"would form a level of the same name; rename the level or give missing_group='drop'"
            )
        names.append(MISSING_LEVEL)
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise AuditInputError(
            f"group column {brief(column)} has different values that print the same: {brief(repeated)}; recode the column"
        )
    clash = [n for n in names if FAMILY_SEPARATOR in n]
    if clash:
        raise AuditInputError(
            f"levels of group column {brief(column)} must not contain {FAMILY_SEPARATOR!r} (it separates the "
            f"attributes of an intersection's name); got {brief(clash[:_SHOW])}"
        )
    codes = np.full(series.shape[0], len(levels), dtype=np.int64)  # the missing level, if any
    if isinstance(series.dtype, pd.CategoricalDtype):
        codes[present] = pd.Categorical(series[present], categories=levels).codes.astype(np.int64)
    else:  # the hash table's codes, renumbered in the levels' order
        position = {level: i for i, level in enumerate(levels)}
        renumbered = np.array([position[v] for v in values], dtype=np.int64)[found]
        if missing.any():
            codes[present] = renumbered
        else:
            codes = renumbered
    observed = np.unique(codes)
    if observed.size < 2:
        only = names[int(observed[0])] if observed.size else "none"
        raise AuditInputError(
            f"group column {brief(column)} has a single level ({brief(only)}) in the rows audited; a disaggregated "
            f"evaluation needs at least two levels"
        )
    return Attribute(column, tuple(names), codes)


def _lookalike_key(name: str) -> str:
    """``name`` as a reader sees it: Unicode compatibility form (NFKC: NFC and NFD é alike, fullwidth
    letters as ASCII) without invisible format characters (zero-width space and joiner, bidi marks)."""
    text = unicodedata.normalize("NFKC", name)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def _lookalike_notes(column: str, levels: Sequence[str]) -> list[str]:
    """A note per set of levels that are different text but look the same (module docstring): they stay
    separate slices, printed alike, so the note shows them with their code points (``ascii``)."""
    groups: dict[str, list[str]] = {}
    for level in levels:
        groups.setdefault(_lookalike_key(level), []).append(level)
    alike = [names for names in groups.values() if len(names) > 1]
    if not alike:
        return []
    shown = "; ".join(" and ".join(ascii(n) for n in names[:_SHOW]) for names in alike[:_SHOW])
    more = f"; and {len(alike) - _SHOW} more" if len(alike) > _SHOW else ""
    return [
        f"group column {brief(column)}: levels that look the same but are different text (invisible characters, "
        f"or another Unicode form of the same letters) are separate slices: {shown}{more}; recode the column if "
        f"they are one level"
    ]


def _all_missing_feature(column: str) -> str:
    return (
        f"feature column {brief(column)} is missing in every row audited: the weight models of the control X cannot "
        f"use it; leave it out of features (--features)"
    )


def _features(frame: pd.DataFrame, columns: list[str]) -> tuple[pd.DataFrame, tuple[str, ...], list[str]]:
    """Numeric features as float64; others integer-coded categorical (NaN stays missing)."""
    out: dict[str, np.ndarray] = {}
    categorical: list[str] = []
    notes: list[str] = []
    for column in columns:
        series = frame[column]
        if (pd.api.types.is_numeric_dtype(series.dtype) or pd.api.types.is_bool_dtype(series.dtype)) and not isinstance(
            series.dtype, pd.CategoricalDtype
        ):
            values = series.to_numpy(dtype=np.float64, na_value=np.nan)
            if np.isnan(values).all():
                raise AuditInputError(_all_missing_feature(column))
            bad = np.isinf(values)
            if bad.any():
                raise AuditInputError(
                    f"feature column {brief(column)} must hold finite numbers (NaN for missing); got "
                    f"{_show(values[bad])} {_where(bad)}"
                )
            out[column] = values
            continue
        present = series.notna().to_numpy()
        if not present.any():
            raise AuditInputError(_all_missing_feature(column))
        counts = series[present].astype(str).value_counts()
        levels = sorted(counts.index.tolist())
        codes = np.full(series.shape[0], np.nan)
        mapped = pd.Categorical(series[present].astype(str), categories=levels).codes.astype(np.float64)
        if len(levels) > _MAX_CATEGORY_CODE + 1:
            keep = set(counts.index[:_MAX_CATEGORY_CODE].tolist())  # most frequent first
            kept = [lv for lv in levels if lv in keep]
            remap = np.array([kept.index(lv) if lv in keep else _MAX_CATEGORY_CODE for lv in levels], dtype=np.float64)
            mapped = remap[mapped.astype(np.int64)]
            notes.append(
                f"feature {brief(column)} has {len(levels)} levels; the {_MAX_CATEGORY_CODE} most frequent keep "
                f"their own code for the weight models, the other {len(levels) - _MAX_CATEGORY_CODE} share one"
            )
        codes[present] = mapped
        out[column] = codes
        categorical.append(column)
    return pd.DataFrame(out), tuple(categorical), notes


def as_pandas(data: Any) -> pd.DataFrame:
    """A pandas DataFrame as it is; a polars DataFrame converted (``to_pandas``); anything else refused."""
    if isinstance(data, pd.DataFrame):
        return data
    polars = sys.modules.get("polars")  # a polars frame exists only if polars was imported
    if polars is not None:
        if isinstance(data, polars.LazyFrame):
            raise AuditInputError("data is a polars LazyFrame; collect it first (data.collect())")
        if isinstance(data, polars.DataFrame):
            return data.to_pandas()
    raise AuditInputError(f"data must be a pandas DataFrame (or a polars one); got {type(data).__name__}")


def prepare_input(data: Any, options: AuditOptions) -> AuditInput:
    """Check the frame against the (resolved) options and code it (module docstring).

    Parameters
    ----------
    data : pandas.DataFrame or polars.DataFrame of shape (n_rows, n_columns)
    options : AuditOptions
        As returned by :func:`resolve_options`.

    Raises
    ------
    AuditInputError
        If ``data`` is not a non-empty DataFrame, a column is missing, duplicated or used in two
        roles, the label is not binary, a score is outside [0, 1] or NaN, a weight is negative or
        NaN, a group column has a single level or mixes booleans with 0/1, a model of hard 0/1
        predictions is asked only for metrics that need scores, a feature of the control X is missing
        in every row, or the levels make more pairwise comparisons than
        :data:`MAX_PAIRWISE_COMPARISONS` (messages name the column, the offending values and what was
        expected).
    """
    data = as_pandas(data)
    o = options
    roles: list[tuple[str, str]] = [("label", o.label)]
    roles += [("scores", c) for c in o.scores] + [("groups", c) for c in o.groups]
    roles += [("features", c) for c in o.features]
    if o.sample_weight is not None:
        roles.append(("sample_weight", o.sample_weight))
    if o.frequency_weight is not None:
        roles.append(("frequency_weight", o.frequency_weight))
    seen: dict[str, str] = {}
    for role, column in roles:
        if column in seen:
            raise AuditInputError(
                f"column {brief(column)} is given both as {seen[column]} and as {role}; each column has one role"
            )
        seen[column] = role
    columns = list(map(str, data.columns))
    missing_columns = [c for _, c in roles if c not in columns]
    if missing_columns:
        shown = columns[:30] + (["..."] if len(columns) > 30 else [])
        raise AuditInputError(
            f"data has no column(s) {brief(missing_columns, 200)}; its columns are {brief(shown, 300)}"
        )
    duplicated = sorted({c for _, c in roles if columns.count(c) > 1})
    if duplicated:
        raise AuditInputError(f"data has several columns named {brief(duplicated)}; column names must be unique")
    if len(data) == 0:
        raise AuditInputError("data has no rows")
    frame = data.reset_index(drop=True)
    frame.columns = columns
    notes: list[str] = []
    count = None if o.frequency_weight is None else frequency_counts(frame[o.frequency_weight], o.frequency_weight)
    for c in o.groups:
        _check_bool_and_numbers(frame[c], c)
        if o.strip_levels:
            frame[c], strip_notes = _strip_levels(frame[c], c, count)
            notes += strip_notes

    # Rows with a missing attribute value, and rows that stand for no row (a count of 0).
    missing = {c: frame[c].isna().to_numpy() for c in o.groups}
    keep = np.ones(len(frame), dtype=bool) if count is None else count > 0
    if count is not None and not keep.all():
        notes.append(
            f"frequency_weight column {brief(o.frequency_weight)}: {int((~keep).sum()):,} row(s) with a count of 0 "
            f"stand for no row and were dropped"
        )
    if o.missing_group == "drop":
        for c in o.groups:
            keep &= ~missing[c]
        if not keep.any():
            raise AuditInputError(
                f"every row has a missing value in a group column {brief(o.groups)}; nothing is left to audit"
            )
        dropped = np.zeros(len(frame), dtype=bool)
        for c in o.groups:
            dropped |= missing[c]
        if count is not None:
            dropped &= count > 0
        if dropped.any():
            detail = ", ".join(f"{c} {_rows_of(missing[c], count)}" for c in o.groups if missing[c].any())
            notes.append(f"{_rows_of(dropped, count)} rows with a missing group value were dropped ({detail})")
    else:
        for c in o.groups:
            if missing[c].any():
                notes.append(
                    f"{c}: {_rows_of(missing[c], count)} rows with a missing value form the level {MISSING_LEVEL!r}"
                )

    # Check every used column on every row given (the messages' row numbers refer to the frame).
    y = _labels(frame[o.label], o.label, o.positive_label)
    scores = {c: _scores(frame[c], c) for c in o.scores}
    weight = _weights(frame[o.sample_weight], o.sample_weight) if o.sample_weight is not None else None
    if weight is not None:
        weight, weight_notes = _scaled_weights(weight, o.sample_weight)
        notes += weight_notes

    row = np.flatnonzero(keep)
    if count is not None:
        count = count[row]
    y = y[row]
    scores = {c: v[row] for c, v in scores.items()}
    if weight is not None:
        weight = weight[row]
        if not (weight > 0).any():
            raise AuditInputError(f"sample_weight column {brief(o.sample_weight)} is 0 in every row audited")
    sub = frame.iloc[row].reset_index(drop=True)
    attributes = tuple(_attribute(sub[c], c, missing[c][row], o.missing_group == "level") for c in o.groups)
    for a in attributes:
        notes += _lookalike_notes(a.name, a.levels)
    check_comparison_count([(a.name, len(a.levels)) for a in attributes], o.intersections, o.pairwise_max_levels)
    _check_reference_levels(o.reference, attributes)
    features, categorical = None, ()
    if "X" in o.controls:
        features, categorical, feature_notes = _features(sub, o.features)
        notes += feature_notes
    elif o.features:
        notes.append(f"features {o.features!r} are used only by the control X, which was not requested")

    hard = {c: bool(np.all((v == 0.0) | (v == 1.0))) for c, v in scores.items()}
    left_out = [m for m in vocabulary.SCORE_METRICS if m in o.metrics]
    for c, is_hard in hard.items():
        if is_hard and len(left_out) == len(o.metrics):
            raise AuditInputError(
                f"score column {c!r} holds only 0 and 1 (hard predictions), and every metric asked for "
                f"({', '.join(o.metrics)}) needs scores, so nothing could be computed for it; add a metric of "
                f"hard predictions (e.g. --metrics false_positive_rate accuracy) or give scores in [0, 1]"
            )
        if is_hard and left_out:
            notes.append(
                f"score column {c!r} holds only 0 and 1 (hard predictions): {', '.join(left_out)} need scores "
                f"and are left out for it"
            )

    # Rows in the order of the first model's score (stable).
    order = np.argsort(scores[o.scores[0]], kind="stable")
    y = np.ascontiguousarray(y[order])
    scores = {c: np.ascontiguousarray(v[order]) for c, v in scores.items()}
    if weight is not None:
        weight = np.ascontiguousarray(weight[order])
    if count is not None:
        count = np.ascontiguousarray(count[order])
    attributes = tuple(Attribute(a.name, a.levels, np.ascontiguousarray(a.codes[order])) for a in attributes)
    if features is not None:
        features = features.iloc[order].reset_index(drop=True)
    return AuditInput(
        y=y,
        scores=scores,
        hard=hard,
        weight=weight,
        attributes=attributes,
        features=features,
        categorical=categorical,
        row=row[order].astype(np.int64),
        notes=tuple(notes),
        count=count,
    )
