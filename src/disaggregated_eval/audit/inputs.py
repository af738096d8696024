"""The audit's input: the data frame checked against the options it needs (:class:`InputSpec`) and coded.

Everything is checked before any computation. Each error is an :class:`~.errors.AuditInputError` (a
``ValueError``) whose message names the column, shows the offending values (the first few) and says
what was expected, e.g. ``label column 'y' must hold 0/1 values; got values {2, 3} in 14 rows (first at
row 7); give positive_label when the label has two other values such as yes/no``. The options themselves
are checked once before, by :func:`.options.resolve_options`; :meth:`InputSpec.from_options` takes from
them the fields coding reads.

Limits on the work the data may ask for are named constants here, each checked by one function before any
work: :data:`MAX_PAIRWISE_COMPARISONS` (:func:`check_comparison_count`); work that may take hours gives an
:class:`~.errors.AuditWarning` (:data:`PERMUTATION_WORK_WARNING`, checked in :mod:`.core` once the slices
are planned).

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
from collections.abc import Sequence
from dataclasses import dataclass, fields
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from .. import vocabulary
from ..model_fitting import MAX_CATEGORY_CODE
from ..validation import brief, format_values, repeated, rows_text, show_value
from .aggregate import AggregationError, frequency_values
from .errors import AuditInputError
from .loading import required_columns
from .options import ResolvedOptions, check_reference_levels
from .slices import FAMILY_SEPARATOR, Attribute, check_slice_count

__all__ = [
    "AuditInput",
    "InputSpec",
    "prepare_input",
    "MISSING_LEVEL",
    "MAX_PAIRWISE_COMPARISONS",
    "PERMUTATION_WORK_WARNING",
    "check_comparison_count",
    "frequency_counts",
    "as_pandas",
    "expand_input",
    "MAX_EXPANDED_ROWS",
]

#: Name of the level that holds the rows with a missing attribute value (``missing_group="level"``).
MISSING_LEVEL = vocabulary.MISSING_LEVEL
#: How many offending values an error message shows.
_SHOW = 5
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


@dataclass(frozen=True)
class InputSpec:
    """What coding the frame needs from an audit's options: the columns' roles and the coding rules.

    The fields of the options :func:`prepare_input` reads, already checked by
    :func:`.options.resolve_options`; made from the resolved options by :meth:`from_options` (the one
    place), so that the input room receives these fields and not the whole options.

    Attributes
    ----------
    label : str
    scores, groups, features : sequence of str
    sample_weight, frequency_weight : str or None
        The columns' roles (the options of the same names).
    positive_label : str, number or None
    strip_levels : bool
    missing_group : {"level", "drop"}
        How the label and the group columns are coded.
    intersections : int
    pairwise_max_levels : int or None
        For the limit on the pairwise comparisons (:func:`check_comparison_count`).
    reference : sequence of str
        The reference slices, checked against the levels (:func:`.options.check_reference_levels`).
    controls : sequence of str
        The control variables (the features are coded only for X).
    metrics : sequence of str
        The metrics asked for (a model of hard predictions needs one that takes no scores).
    """

    label: str
    scores: Sequence[str]
    groups: Sequence[str]
    features: Sequence[str]
    sample_weight: str | None
    frequency_weight: str | None
    positive_label: Any
    strip_levels: bool
    missing_group: str
    intersections: int
    pairwise_max_levels: int | None
    reference: Sequence[str]
    controls: Sequence[str]
    metrics: Sequence[str]

    @classmethod
    def from_options(cls, options: ResolvedOptions) -> InputSpec:
        """The fields of the resolved ``options`` (:func:`.options.resolve_options`) that coding the frame reads."""
        return cls(**{f.name: getattr(options, f.name) for f in fields(cls)})

    @property
    def columns(self) -> list[str]:
        """The columns the audit reads (:func:`.loading.required_columns`)."""
        return required_columns(label=self.label, scores=self.scores, groups=self.groups, features=self.features,
                                sample_weight=self.sample_weight, frequency_weight=self.frequency_weight)  # fmt: skip


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
# Limits
# ----------------------------------------------------------------------------------------------
def check_comparison_count(
    attributes: Sequence[tuple[str, int]], intersections: int, pairwise_max_levels: int | None = None
) -> None:
    """Refuse, before any work, more than :data:`MAX_PAIRWISE_COMPARISONS` pairwise comparisons.

    Every family of slices (each attribute, each intersection of up to ``intersections``
    attributes, all combinations of levels) of at most ``pairwise_max_levels`` slices compares each
    pair of its slices (:mod:`.comparison_families`), so such an attribute with ``L`` levels gives
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


def _where(bad: np.ndarray, positions: np.ndarray | None = None) -> str:
    """Where a mask's rows are (:func:`~disaggregated_eval.validation.rows_text`); ``positions``: the
    frame's position of each row of the mask, when rows were left out before."""
    rows = np.flatnonzero(bad)
    return rows_text(rows.size, int(rows[0] if positions is None else positions[rows[0]]))


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
    wanted = _number(positive_label) if pd.api.types.is_numeric_dtype(series.dtype) else None
    if wanted is not None:  # a numeric label: equal numbers match (1, "1", 1.0 and "1.0" name the class 1.0)
        positive = series.to_numpy(dtype=np.float64) == wanted
    else:
        positive = series.astype(str).to_numpy() == str(positive_label)
    if not positive.any():
        raise AuditInputError(
            f"positive_label {brief(positive_label)} does not occur in {what}; its values are {_show(distinct)}"
        )
    return positive.astype(np.float64)


def _number(value: Any) -> float | None:
    """``value`` as a finite number (a number, or text that reads as one), else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        return None
    return number if np.isfinite(number) else None


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


def frequency_counts(series: pd.Series, column: str) -> np.ndarray:
    """The counts of a ``frequency_weight`` column, checked on every row by the one rule of every input
    (:func:`.aggregate.frequency_values`: whole numbers >= 0, as numbers or as text, summing to at most
    2^53).

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
    try:
        values = frequency_values(series, column)
    except AggregationError as exc:
        raise AuditInputError(str(exc)) from None
    counts = values.astype(np.int64)
    if not (counts > 0).any():
        raise AuditInputError(
            f"frequency_weight column {brief(column)} is 0 in every row; at least one row needs a count of 1 or more"
        )
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
    alike = sorted(repeated(names))  # linear: a column of a million levels is checked at once
    if alike:
        raise AuditInputError(
            f"group column {brief(column)} has different values that print the same: {brief(alike)}; recode the column"
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


def lookalike_key(name: str) -> str:
    """``name`` as a reader sees it: Unicode compatibility form (NFKC: NFC and NFD é alike, fullwidth
    letters as ASCII) without invisible format characters (zero-width space and joiner, bidi marks)."""
    text = unicodedata.normalize("NFKC", name)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def _lookalike_notes(column: str, levels: Sequence[str]) -> list[str]:
    """A note per set of levels that are different text but look the same (module docstring): they stay
    separate slices, printed alike, so the note shows them with their code points (``ascii``)."""
    groups: dict[str, list[str]] = {}
    for level in levels:
        groups.setdefault(lookalike_key(level), []).append(level)
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


def _features(
    frame: pd.DataFrame, columns: list[str], positions: np.ndarray
) -> tuple[pd.DataFrame, tuple[str, ...], list[str]]:
    """Numeric features as float64; others integer-coded categorical (NaN stays missing). ``positions``:
    each row's position in the frame given (for messages)."""
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
                    f"{_show(values[bad])} {_where(bad, positions)}"
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
        if len(levels) > MAX_CATEGORY_CODE + 1:
            keep = set(counts.index[:MAX_CATEGORY_CODE].tolist())  # most frequent first
            position = {lv: i for i, lv in enumerate(lv for lv in levels if lv in keep)}
            remap = np.array([position.get(lv, MAX_CATEGORY_CODE) for lv in levels], dtype=np.float64)
            mapped = remap[mapped.astype(np.int64)]
            notes.append(
                f"feature {brief(column)} has {len(levels)} levels; the {MAX_CATEGORY_CODE} most frequent keep "
                f"their own code for the weight models, the other {len(levels) - MAX_CATEGORY_CODE} share one"
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


def prepare_input(data: Any, spec: InputSpec) -> AuditInput:
    """Check the frame against the options' columns and rules and code it (module docstring).

    Parameters
    ----------
    data : pandas.DataFrame or polars.DataFrame of shape (n_rows, n_columns)
    spec : InputSpec
        The fields of the resolved options that coding reads (:meth:`InputSpec.from_options`).

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
    roles: list[tuple[str, str]] = [("label", spec.label)]
    roles += [("scores", c) for c in spec.scores] + [("groups", c) for c in spec.groups]
    roles += [("features", c) for c in spec.features]
    if spec.sample_weight is not None:
        roles.append(("sample_weight", spec.sample_weight))
    if spec.frequency_weight is not None:
        roles.append(("frequency_weight", spec.frequency_weight))
    seen: dict[str, str] = {}
    for role, column in roles:
        if column in seen:
            raise AuditInputError(
                f"column {brief(column)} is given both as {seen[column]} and as {role}; each column has one role"
            )
        seen[column] = role
    columns = list(map(str, data.columns))
    present = set(columns)
    missing_columns = [c for _, c in roles if c not in present]
    if missing_columns:
        shown = columns[:30] + (["..."] if len(columns) > 30 else [])
        raise AuditInputError(
            f"data has no column(s) {brief(missing_columns, 200)}; its columns are {brief(shown, 300)}"
        )
    twice = set(repeated(columns))  # linear: one hash table
    duplicated = sorted({c for _, c in roles if c in twice})
    if duplicated:
        raise AuditInputError(f"data has several columns named {brief(duplicated)}; column names must be unique")
    if len(data) == 0:
        raise AuditInputError("data has no rows")
    frame = data.reset_index(drop=True)
    frame.columns = columns
    notes: list[str] = []
    count = (
        None if spec.frequency_weight is None else frequency_counts(frame[spec.frequency_weight], spec.frequency_weight)
    )
    for c in spec.groups:
        _check_bool_and_numbers(frame[c], c)
        if spec.strip_levels:
            frame[c], strip_notes = _strip_levels(frame[c], c, count)
            notes += strip_notes

    # Rows with a missing attribute value, and rows that stand for no row (a count of 0).
    missing = {c: frame[c].isna().to_numpy() for c in spec.groups}
    keep = np.ones(len(frame), dtype=bool) if count is None else count > 0
    if count is not None and not keep.all():
        notes.append(
            f"frequency_weight column {brief(spec.frequency_weight)}: {int((~keep).sum()):,} row(s) with a count of 0 "
            f"stand for no row and were dropped"
        )
    if spec.missing_group == "drop":
        for c in spec.groups:
            keep &= ~missing[c]
        if not keep.any():
            raise AuditInputError(
                f"every row has a missing value in a group column {brief(spec.groups)}; nothing is left to audit"
            )
        dropped = np.zeros(len(frame), dtype=bool)
        for c in spec.groups:
            dropped |= missing[c]
        if count is not None:
            dropped &= count > 0
        if dropped.any():
            detail = ", ".join(f"{c} {_rows_of(missing[c], count)}" for c in spec.groups if missing[c].any())
            notes.append(f"{_rows_of(dropped, count)} rows with a missing group value were dropped ({detail})")
    else:
        for c in spec.groups:
            if missing[c].any():
                notes.append(
                    f"{c}: {_rows_of(missing[c], count)} rows with a missing value form the level {MISSING_LEVEL!r}"
                )

    # Check every used column on every row given (the messages' row numbers refer to the frame).
    y = _labels(frame[spec.label], spec.label, spec.positive_label)
    scores = {c: _scores(frame[c], c) for c in spec.scores}
    weight = _weights(frame[spec.sample_weight], spec.sample_weight) if spec.sample_weight is not None else None
    if weight is not None:
        weight, weight_notes = _scaled_weights(weight, spec.sample_weight)
        notes += weight_notes

    row = np.flatnonzero(keep)
    if count is not None:
        count = count[row]
    y = y[row]
    scores = {c: v[row] for c, v in scores.items()}
    if weight is not None:
        weight = weight[row]
        if not (weight > 0).any():
            raise AuditInputError(f"sample_weight column {brief(spec.sample_weight)} is 0 in every row audited")
    sub = frame.iloc[row].reset_index(drop=True)
    attributes = tuple(_attribute(sub[c], c, missing[c][row], spec.missing_group == "level") for c in spec.groups)
    for a in attributes:
        notes += _lookalike_notes(a.name, a.levels)
    sizes = [(a.name, len(a.levels)) for a in attributes]
    try:  # counted without enumerating: bounds the families the next check walks
        check_slice_count(sizes, spec.intersections)
    except ValueError as error:
        raise AuditInputError(str(error)) from None
    check_comparison_count(sizes, spec.intersections, spec.pairwise_max_levels)
    check_reference_levels(spec.reference, attributes)
    features, categorical = None, ()
    if "X" in spec.controls:
        features, categorical, feature_notes = _features(sub, spec.features, row)
        notes += feature_notes
    elif spec.features:
        notes.append(f"features {spec.features!r} are used only by the control X, which was not requested")

    hard = {c: bool(np.all((v == 0.0) | (v == 1.0))) for c, v in scores.items()}
    left_out = [m for m in vocabulary.SCORE_METRICS if m in spec.metrics]
    for c, is_hard in hard.items():
        if is_hard and len(left_out) == len(spec.metrics):
            raise AuditInputError(
                f"score column {c!r} holds only 0 and 1 (hard predictions), and every metric asked for "
                f"({', '.join(spec.metrics)}) needs scores, so nothing could be computed for it; add a metric of "
                f"hard predictions (e.g. --metrics false_positive_rate accuracy) or give scores in [0, 1]"
            )
        if is_hard and left_out:
            notes.append(
                f"score column {c!r} holds only 0 and 1 (hard predictions): {', '.join(left_out)} need scores "
                f"and are left out for it"
            )

    # Rows in the order of the first model's score (stable).
    order = np.argsort(scores[spec.scores[0]], kind="stable")
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
