"""Options of ``disagg-eval audit``: their definition, how they are read, and their one resolution.

One home for every option rule, used by the Python function, the command line, ``--config`` files and a
workflow's ``audit`` section alike (``docs/audit.md``):

* :class:`AuditOptions`: every option as a field, with its default, its help text and its section of
  ``--help`` (the command line, :mod:`.cli`, builds its flags from these fields);
* reading text and YAML: :func:`options_from_mapping` (a ``--config`` file, a workflow entry) and
  :func:`options_from_flags` (the command line's values) convert each value once to its type and check
  its choices and repeats; :func:`read_config_file` reads a YAML file (refusing a key given twice);
* :func:`resolve_options`: the one validation of an audit's options, ranges and cross-option rules,
  which also parses the options written as text (the ``reference`` slices, the ``thresholds`` grid, the
  ``tolerance``, the ``population_margins`` file and its Gammas) and returns a :class:`ResolvedOptions`
  (frozen). :func:`disaggregated_eval.audit.audit` resolves what it is given once and trusts a
  :class:`ResolvedOptions` as it is: an audit's options are parsed and checked once per call.

List values: a YAML list is taken item by item, verbatim (a column name may hold a comma); a single
text value, in YAML or on the command line, is split at commas, where ``\\,`` stands for a literal
comma (``--group 'income\\, annual'``; Helm's ``--set`` convention).
"""

from __future__ import annotations

import difflib
import functools
import math
import numbers
import os
import re
import types
import typing
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, make_dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import vocabulary
from ..io import (
    MAX_CONFIG_BYTES,
    MAX_TEXT_FILE_BYTES,
    DuplicateKeyError,
    FileReadError,
    check_regular_file,
    read_bounded,
    read_yaml_unique_keys,
)
from ..memory import (
    MAX_CALIBRATION_BINS,
    MAX_GAMMAS,
    MAX_GRID_VALUES,
    MAX_MEMORY_LIMIT_MB,
    MAX_RESAMPLES,
    MIN_MEMORY_LIMIT_MB,
)
from ..registry import check_metric_names
from ..validation import (
    PATH_CHARS,
    brief,
    check_choice,
    check_int,
    check_nesting,
    check_open_unit,
    check_seed,
    repeated,
    row_number,
)
from .aggregate import AUTO_AGGREGATE_ROWS
from .errors import AuditInputError, AuditWarning, UsageError
from .slices import FAMILY_SEPARATOR, shown_slice_name, slice_name

__all__ = [
    "AuditOptions",
    "ResolvedOptions",
    "resolve_options",
    "DEFAULT_SEED",
    "FLAG_NAMES",
    "CLI_KEYS",
    "AGGREGATE_CHOICES",
    "AUTO_AGGREGATE_ROWS",
    "REQUIRED_OPTIONS",
    "option_fields",
    "option_kind",
    "option_default",
    "option_choices",
    "flag_of",
    "split_list",
    "convert_scalar",
    "convert_option",
    "options_from_mapping",
    "options_from_flags",
    "read_config_file",
    "OPTION_SECTIONS",
    "MAX_PERMUTATIONS",
    "MIN_TAIL_REPLICATES",
    "MAX_THRESHOLDS",
    "SHARE_COLUMN",
    "LABEL_RATE_COLUMN",
    "min_resamples",
    "check_resample_count",
    "parse_references",
    "check_reference_levels",
    "parse_thresholds",
    "read_margins",
    "margin_targets",
    "MAX_MARGINS_BYTES",
]

#: Seed used when none is given (printed by the CLI and written to the manifest).
DEFAULT_SEED = 20250101


#: Sections of ``disagg-eval audit --help``, in order; every option names its own (``section`` metadata).
OPTION_SECTIONS = ("columns", "slices", "metrics", "intervals and tests", "analyses",
                   "controlled evaluation", "computation")  # fmt: skip


def _opt(default, help: str, *, section: str, metavar: str | None = None, **kwargs):
    """A field of :class:`AuditOptions`: default, help text, ``--help`` section and usage placeholder."""
    if section not in OPTION_SECTIONS:
        raise ValueError(f"section {section!r} is not one of {OPTION_SECTIONS}")
    kwargs.update(section=section, metavar=metavar)
    if isinstance(default, (list, dict, tuple)):
        value = default
        return field(default_factory=lambda: type(value)(value), metadata={"help": help, **kwargs})
    return field(default=default, metadata={"help": help, **kwargs})


@dataclass
class AuditOptions:
    """Every option of an audit, with its default (see ``docs/audit.md``)."""

    label: str = _opt(
        "",
        "column holding the binary label (0/1, or two values such as yes/no given with --positive-label)",
        section="columns",
        metavar="COL",
    )
    scores: list[str] = _opt(
        [],
        "column(s) holding each model's score in [0, 1] (or hard 0/1 predictions); several columns are several models, compared with the first",
        section="columns",
        metavar="COL",
    )
    groups: list[str] = _opt(
        [],
        "protected attribute column(s); every level and every intersection becomes a slice",
        section="columns",
        metavar="COL",
    )
    positive_label: str | None = _opt(
        None, "value of the label column that means 1, when the label is not 0/1", section="columns", metavar="VALUE"
    )
    intersections: int | None = _opt(
        None,
        "largest number of attributes crossed in an intersection (default: all of them; 1 = no intersections)",
        section="slices",
        metavar="K",
    )
    min_group_size: int = _opt(
        30, "a slice with fewer rows gets no point estimate, only its interval", section="slices", metavar="N"
    )
    min_denominator: int = _opt(
        vocabulary.MIN_DENOMINATOR,
        "a metric whose own denominator (positives, negatives, predicted positives, or the smaller class for AUC) is smaller gets no point estimate",
        section="slices",
        metavar="N",
    )
    threshold: float = _opt(
        0.5, "decision threshold: predicted positive when score >= threshold", section="metrics", metavar="T"
    )
    preference_threshold: float | None = _opt(
        None,
        "preference threshold t of the net benefit (odds t / (1 - t) weigh false positives against true positives; "
        "default: the decision threshold, as in decision-curve analysis)",
        section="metrics",
        metavar="T",
    )
    metrics: list[str] = _opt(list(vocabulary.AUDIT_METRICS), "metrics to compute", section="metrics", metavar="METRIC")
    n_resamples: int = _opt(
        10_000,
        "bootstrap resamples (paired: every slice, metric, model and comparison on the same resamples)",
        section="intervals and tests",
        metavar="B",
    )
    resampling: str = _opt(
        "population",
        "bootstrap scheme: population (whole file, slice sizes vary) or within_group (within each intersection cell, sizes fixed)",
        choices=vocabulary.RESAMPLING_SCHEMES,
        section="intervals and tests",
        metavar="SCHEME",
    )
    confidence: float = _opt(
        0.95,
        "level of the percentile intervals and of the simultaneous bands",
        section="intervals and tests",
        metavar="LEVEL",
    )
    seed: int = _opt(
        DEFAULT_SEED,
        "root seed of every random draw (bootstrap, permutations, cross-fitting)",
        section="intervals and tests",
        metavar="S",
    )
    adjust: str = _opt(
        "holm",
        "multiple-comparison adjustment of the p-values within each family (by default one model, kind of comparison "
        "and metric; see adjust_scope): holm controls the family-wise error, bh the false discovery rate",
        choices=("holm", "bh", "none"),
        section="intervals and tests",
        metavar="METHOD",
    )
    adjust_scope: str = _opt(
        "metric",
        "family of the adjustment: metric (one model, kind and metric), model (one model and kind, all metrics "
        "together) or audit (one family of every test of the audit: every model, metric and kind, so that the "
        "family-wise error of all the audit's flags is at most 1 - confidence)",
        choices=vocabulary.ADJUST_SCOPES,
        section="intervals and tests",
        metavar="SCOPE",
    )
    n_permutations: int = _opt(
        10_000,
        "most permutations per Monte-Carlo test, stopped early once a p-value is clearly large (0: no p-values; "
        "unweighted proportions get exact p-values without permutations)",
        section="intervals and tests",
        metavar="P",
    )
    test_method: str = _opt(
        "auto",
        "test of the comparisons without an exact one: auto (permutations, or the large-sample z-test with the "
        "paired bootstrap's standard error where a permutation test would walk more than 1e8 rows and each side "
        "has at least 200 rows in each outcome category), permutation (always), bootstrap (always the large-sample "
        "test)",
        choices=vocabulary.TEST_METHODS,
        section="intervals and tests",
        metavar="METHOD",
    )
    pairwise_max_levels: int | None = _opt(
        12,
        "pairwise comparisons within families of at most this many slices (all: every family)",
        section="intervals and tests",
        metavar="K",
    )
    reference: list[str] = _opt(
        [],
        "reference slice of a family for the disparity ratios of the fairness summary, by its slice name "
        "(race=Caucasian; race=Caucasian & sex=Male for an intersection), at most one per family "
        "(default: each family's largest slice)",
        section="analyses",
        metavar="SLICE",
    )
    tolerance: list[str] = _opt(
        ["0.05", "0.8:1.25"],
        "tolerance of the verdicts: a largest acceptable difference in the metric's units (0.05) and/or a range of "
        "acceptable ratios low:high (0.8:1.25, the four-fifths rule); a comparison or fairness statistic is "
        "'within tolerance' when the data show any difference is inside it",
        section="intervals and tests",
        metavar="TOL",
    )
    thresholds: list[str] = _opt(
        [],
        "decision thresholds of the threshold analysis (selection rate, TPR and FPR per slice at each): values "
        "(0.1,0.2,0.3) and/or grids start:stop:step (0.05:0.95:0.05, both ends included); none: no threshold analysis",
        section="analyses",
        metavar="T",
    )
    calibration_bins: int = _opt(
        10,
        "bins of each model's score (over the whole file) of the calibration table and of the ECE: one per value "
        "for a score with at most B values, else quantile bins",
        section="analyses",
        metavar="B",
    )
    detect_gap: float | None = _opt(
        None,
        "a difference from overall in the metric's units (e.g. 0.05): the detectability table gives the rows each "
        "slice would need to detect it",
        section="analyses",
        metavar="GAP",
    )
    power: float = _opt(
        0.8,
        "power of the minimum detectable differences (and of the rows needed for detect_gap)",
        section="analyses",
        metavar="POWER",
    )
    population_margins: str | None = _opt(
        None,
        "CSV of the target population's shares: one column per modelled group column, 'share' (summing to 1) and "
        "optionally 'label_rate' (prevalence by group); the rows are weighted to it (post-stratification, with "
        f"the weights re-estimated in every resample) in the table 'selection' (a file of at most "
        f"{MAX_TEXT_FILE_BYTES // 2**20} MiB)",
        section="analyses",
        metavar="FILE",
    )
    selection_sensitivity: list[float] = _opt(
        [],
        "values of Gamma >= 1 (e.g. 1.5,2,3): bounds of every metric and difference from overall when the true "
        "selection weights may differ from the (margin) weights by up to a factor Gamma (marginal sensitivity "
        "model), and the Gamma at which each flagged difference is explained away (table 'selection'); at most "
        f"{MAX_GAMMAS} values",
        section="analyses",
        metavar="GAMMA",
        max_items=MAX_GAMMAS,
    )
    controls: list[str] = _opt(
        ["none"],
        "control variables V of the controlled evaluation, among none, X, Y, R (X needs --features)",
        section="controlled evaluation",
        metavar="V",
    )
    features: list[str] = _opt(
        [], "feature columns for the control variable X", section="controlled evaluation", metavar="COL"
    )
    sample_weight: str | None = _opt(
        None, "column of non-negative row weights (every metric is weighted)", section="columns", metavar="COL"
    )
    frequency_weight: str | None = _opt(
        None,
        "column of row counts: each row stands for that many identical rows (non-negative integers; rows of 0 are "
        "dropped), e.g. a table aggregated by disagg-eval's Parquet, Dask or SQL path; sample_weight applies on top",
        section="columns",
        metavar="COL",
    )
    strip_levels: bool = _opt(
        True,
        "remove leading and trailing whitespace from text levels of the group columns (levels that differ "
        "only by it are merged, with a note; a value of whitespace only is missing)",
        section="slices",
    )
    missing_group: str = _opt(
        "level",
        "rows with a missing attribute value: level (a level of its own, named 'missing') or drop (reported)",
        choices=("level", "drop"),
        section="slices",
        metavar="POLICY",
    )
    max_leaf_nodes: list[int] = _opt(
        [10, 25, 50],
        "grid of max_leaf_nodes of the HistGradientBoosting weight models P(A | V) (paper Supplementary A.3); at "
        f"most {MAX_GRID_VALUES} values",
        section="controlled evaluation",
        metavar="N",
        max_items=MAX_GRID_VALUES,
    )
    cv_folds: int = _opt(
        5, "folds of the grid search of each weight model", section="controlled evaluation", metavar="K"
    )
    crossfit_folds: int = _opt(
        5, "outer folds of the cross-fitting of P(A | V) on the file", section="controlled evaluation", metavar="K"
    )
    n_threads: int = _opt(
        1, "threads of the bootstrap and of the weight-model fits", section="computation", metavar="N"
    )
    memory_limit_mb: float | None = _opt(
        None,
        "largest memory the audit may use, in MB: an audit whose estimated peak (of the process: libraries and data "
        "included) is larger is refused before any work, with advice (at least "
        f"{MIN_MEMORY_LIMIT_MB:g}, at most 2^43; default: 80% of the machine's memory, or what an address-space limit (ulimit -v) leaves)",
        section="computation",
        metavar="MB",
    )


# ----------------------------------------------------------------------------------------------
# How options are spelled and read
# ----------------------------------------------------------------------------------------------
#: Field -> flag name where the flag is singular (given once per value).
FLAG_NAMES: dict[str, str] = {"scores": "score", "groups": "group", "controls": "control"}
#: Keys a ``--config`` file may hold besides the option fields.
CLI_KEYS: tuple[str, ...] = ("file", "out")
#: Values of the command line's ``--aggregate`` (how a Parquet input is read: :func:`.loading.load_input`).
AGGREGATE_CHOICES: tuple[str, ...] = ("auto", "yes", "no")
#: Options without which no audit can run (their empty defaults mean "required").
REQUIRED_OPTIONS: tuple[str, ...] = ("label", "scores", "groups")
#: Choices of list options (the scalar ones carry ``choices`` in their field metadata).
_LIST_CHOICES: dict[str, tuple[str, ...]] = {"metrics": vocabulary.METRICS, "controls": vocabulary.CONTROLS}
_HINTS = typing.get_type_hints(AuditOptions)
#: A comma not preceded by a backslash: the separator of a list written as one text value.
_COMMA = re.compile(r"(?<!\\),")


def option_fields() -> list:
    """The dataclass fields of :class:`AuditOptions`, in declaration order."""
    return list(fields(AuditOptions))


def flag_of(name: str) -> str:
    """The command-line flag of option ``name`` (``min_group_size`` -> ``--min-group-size``)."""
    return "--" + FLAG_NAMES.get(name, name).replace("_", "-")


def option_kind(name: str) -> tuple[str, type, bool]:
    """(``"scalar"`` or ``"list"``, element type, whether ``None`` is allowed) of option ``name``."""
    hint = _HINTS[name]
    optional = False
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        hint = args[0]
        origin = typing.get_origin(hint)
    if origin in (list, tuple, Sequence):
        (element,) = typing.get_args(hint)[:1] or (str,)
        return "list", element, optional
    return "scalar", hint, optional


def option_default(field_) -> Any:
    """The default value of an :class:`AuditOptions` field (a fresh list for list fields)."""
    if field_.default is not MISSING:
        return field_.default
    return field_.default_factory()  # type: ignore[misc]


def option_choices(field_) -> tuple | None:
    """The allowed values of an option (or of each item of a list option); ``None`` if any value goes."""
    choices = field_.metadata.get("choices")
    if choices is None:
        choices = _LIST_CHOICES.get(field_.name)
    return tuple(choices) if choices is not None else None


def split_list(text: str) -> list[str]:
    """Items of a list written as one text value: split at commas, ``\\,`` is a literal comma.

    Items of a list of several are stripped of surrounding spaces; empty items are dropped (``"a,,b"``
    -> ``["a", "b"]``). A single item (no comma) is taken as it is, so that a column whose name starts
    or ends with a space can be named (``--group ' sex'``); only one of spaces alone is dropped.
    """
    pieces = _COMMA.split(text)
    if len(pieces) == 1:
        item = text.replace("\\,", ",")
        return [item] if item.strip() else []
    parts = (part.replace("\\,", ",").strip() for part in pieces)
    return [part for part in parts if part]


def convert_scalar(value: Any, element: type, where: str, *, optional: bool) -> Any:
    """One option value of type ``element`` (bool, int, float or str) from text or YAML.

    Raises
    ------
    UsageError
        Naming ``where`` and the value, if it cannot be read as ``element``.
    """
    if value is None:
        if optional:
            return None
        raise UsageError(f"{where} must not be empty")
    if element is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("yes", "true", "1", "no", "false", "0"):
            return value.lower() in ("yes", "true", "1")
        raise UsageError(f"{where} must be true or false; got {brief(value)}")
    if element is int:
        if isinstance(value, bool):
            raise UsageError(f"{where} must be an integer; got {brief(value)}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            text = value.strip().replace("_", "").replace(",", "")
            if optional and text.lower() in ("all", "null"):
                return None
            if optional and text.lower() == "none":  # "no limit" or "nothing"? It read both ways
                raise UsageError(
                    f"{where} must be an integer or all; got 'none', which could mean no limit or nothing: give all "
                    f"for no limit, or a number"
                )
            try:
                return int(text)
            except ValueError:
                pass
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise UsageError(f"{where} must be an integer; got {brief(value)}")
    if element is float:
        if isinstance(value, bool):
            raise UsageError(f"{where} must be a number; got {brief(value)}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise UsageError(f"{where} must be a number; got {brief(value)}")
    # strings (column names, labels, scheme names)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UsageError(f"{where} must be a text value; got {brief(value)}")
    return str(value)


def _items(values: Any) -> list:
    """A list option's items: a list verbatim, one text value split (:func:`split_list`)."""
    if isinstance(values, (list, tuple)):
        return list(values)
    if isinstance(values, str):
        return split_list(values)
    return [values]


def _fmt(values: Sequence[Any]) -> str:
    shown = ", ".join(brief(v) for v in values[:5])
    return "{" + shown + (", ..." if len(values) > 5 else "") + "}"


def convert_option(field_, value: Any, where: str) -> Any:
    """The value of option ``field_`` from text or YAML: type, choices and (for lists) repeats checked.

    Raises
    ------
    UsageError
        Naming ``where`` and the value.
    """
    kind, element, optional = option_kind(field_.name)
    choices = option_choices(field_)
    if kind == "list":
        if value is None:
            if optional:
                return None
            raise UsageError(f"{where} must list at least one value; got nothing")
        items = [convert_scalar(v, element, where, optional=False) for v in _items(value)]
        if choices is not None:  # a choice never has surrounding spaces (a column name may)
            items = [v.strip() if isinstance(v, str) else v for v in items]
            bad = [v for v in items if v not in choices]
            if bad:
                raise UsageError(f"{where} has unknown value(s) {_fmt(bad)}; expected some of {', '.join(choices)}")
        twice = sorted(brief(str(v), plain=True) for v in repeated(items))  # linear (one hash table)
        if twice:
            more = f" and {len(twice) - 5} more" if len(twice) > 5 else ""
            raise UsageError(f"{where} lists {', '.join(twice[:5])}{more} more than once")
        return items
    converted = convert_scalar(value, element, where, optional=optional)
    if choices is not None and isinstance(converted, str):
        converted = converted.strip()
    if choices is not None and converted not in choices:
        raise UsageError(f"{where} must be one of {', '.join(choices)}; got {brief(converted)}")
    return converted


def options_from_mapping(mapping: Mapping[str, Any], *, source: str, allow: Sequence[str] = CLI_KEYS) -> dict[str, Any]:
    """Check and convert a mapping of option names to values (a ``--config`` file, a workflow entry).

    Parameters
    ----------
    mapping : mapping
        Keys are :class:`AuditOptions` field names (and ``allow``); values as YAML gives them.
        A list option also takes a single value or comma-separated text (module docstring).
    source : str
        Where the mapping comes from, for messages (``audit.yaml``).
    allow : sequence of str
        Extra keys accepted as they are (default ``file`` and ``out``).

    Returns
    -------
    dict
        Converted values (lists as lists, numbers as int/float), only the keys present.

    Raises
    ------
    UsageError
        Naming the key and the value: an unknown key (close names suggested), a value of the wrong
        type, an unknown choice.
    """
    if not isinstance(mapping, Mapping):
        raise UsageError(f"{source}: expected a mapping of option names to values; got {type(mapping).__name__}")
    try:  # before anything walks or prints a value: YAML aliases may make it enormous
        check_nesting(mapping, source)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    known = {f.name: f for f in option_fields()}
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if key in allow:
            if not isinstance(value, (str, os.PathLike)) or not str(value):
                raise UsageError(f"{source}: {key} must be a path; got {brief(value)}")
            out[key] = str(value)
            continue
        if key not in known:
            spelled = {FLAG_NAMES.get(n, n): n for n in known}
            candidates = list(known) + list(allow) + list(spelled)
            close = difflib.get_close_matches(str(key).replace("-", "_"), candidates, n=1)
            hint = f" (did you mean {spelled.get(close[0], close[0])!r}?)" if close else ""
            raise UsageError(
                f"{source}: unknown option {brief(key)}{hint}; known options: {', '.join(list(known) + list(allow))}"
            )
        out[key] = convert_option(known[key], value, f"{source}: {key}")
    return out


def read_config_file(path: str | os.PathLike[str], *, what: str = "--config") -> dict[str, Any]:
    """Options from a YAML ``--config`` file (checked by :func:`options_from_mapping`).

    Parameters
    ----------
    path : path-like
    what : str, default "--config"
        How messages name the file, before its path (a workflow run's ``audit.runs.<run>.config``).

    Raises
    ------
    UsageError
        If the file is missing, not a regular file (a FIFO, a device), larger than
        :data:`disaggregated_eval.io.MAX_CONFIG_BYTES`, not UTF-8, not valid YAML, gives a key twice
        (naming the key and both lines), is not a mapping, or has an unknown key or bad value.
    """
    import yaml

    source = f"{what} {path}"
    try:
        text = read_bounded(path, MAX_CONFIG_BYTES, what=source).decode("utf-8-sig")
    except FileReadError as exc:
        raise UsageError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{source}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = read_yaml_unique_keys(text)
    except DuplicateKeyError as dup:
        raise UsageError(
            f"{source}: key {brief(dup.key)} is given twice (lines {dup.first} and {dup.second}); keep one"
        ) from None
    except RecursionError:  # PyYAML composes nested lists recursively
        raise UsageError(f"{source}: nested too deeply to read; give a flat list or mapping") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{source}: not valid YAML{where} ({brief(str(getattr(exc, 'problem', exc)))})") from None
    if data is None:
        return {}
    return options_from_mapping(data, source=f"{source}")


def options_from_flags(values: Mapping[str, Any]) -> dict[str, Any]:
    """Convert the command line's option values (as :mod:`.cli`'s parser collects them).

    Parameters
    ----------
    values : mapping
        Keys are :class:`AuditOptions` field names; values as the parser gives them: text for a scalar
        option, a boolean for a yes/no flag, a list of text items for a list option (each value already
        split at its commas, :func:`split_list`).

    Returns
    -------
    dict
        Converted values, only the keys present.

    Raises
    ------
    UsageError
        Naming the flag (``--n-resamples must be an integer; got 'many'``) and the value.
    """
    known = {f.name: f for f in option_fields()}
    return {key: convert_option(known[key], value, flag_of(key)) for key, value in values.items()}


# ----------------------------------------------------------------------------------------------
# Limits on the work an audit may ask for (each checked by one function, before any work)
# ----------------------------------------------------------------------------------------------
#: Most permutations per test: p-values down to 1e-6, far below any adjusted significance level.
MAX_PERMUTATIONS = 1_000_000
#: Fewest bootstrap replicates beyond each bound of a percentile interval without a warning: with fewer,
#: the bound is (nearly) an extreme replicate, which says more about the number of resamples than the data
#: (with fewer than one, the interval is refused: :func:`check_resample_count`).
MIN_TAIL_REPLICATES = 5
#: Most thresholds of one threshold analysis (each adds a row per model, slice and rate).
MAX_THRESHOLDS = 200
#: Most folds of a grid search or of the cross-fitting (each fold refits every weight model).
_MAX_FOLDS = 100
#: Largest ``max_leaf_nodes`` of a weight model (HistGradientBoosting grows trees of at most this many
#: leaves; beyond the rows of a file it changes nothing but the time).
_MAX_LEAF_NODES = 100_000


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
        f"n_resamples {n_resamples:,} is too few for {float(confidence)!r} intervals: {beyond:.3g} resamples lie beyond "
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


# ----------------------------------------------------------------------------------------------
# Options written as text: reference slices, thresholds, the margins file
# ----------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _splitter(names: tuple[str, ...]) -> tuple[re.Pattern[str], frozenset[str]]:
    """The pattern splitting a slice name at `` & `` where an attribute of ``names`` and ``=`` follow (built
    once per set of attributes, not once per name: a list of references is read in linear time)."""
    alternation = "|".join(re.escape(g) for g in sorted(names, key=len, reverse=True))
    return re.compile(r"\s*&\s*(?=(?:" + alternation + r")\s*=)"), frozenset(names)


def _terms(item: str, names: Sequence[str]) -> list[tuple[str, str]]:
    """``attribute=level`` terms of a slice name (attributes among ``names``), split at `` & `` only
    where an attribute name and ``=`` follow (a level may hold ``&``)."""
    split, known = _splitter(tuple(names))
    out = []
    for part in split.split(item.strip()):
        attribute, sep, level = part.partition("=")
        attribute = attribute.strip()
        if not sep or attribute not in known:
            raise ValueError(
                f"reference {item!r}: {part.strip()!r} is not <attribute>=<level> with an attribute among the "
                f"group columns {list(names)}"
            )
        out.append((attribute, level.strip()))
    return out


def parse_references(items: Sequence[str], *, groups: Sequence[str], intersections: int) -> list[str]:
    """Check the option ``reference`` and write each item as the audit names the slice.

    Parameters
    ----------
    items : sequence of str
        Slice names, ``attribute=level`` or ``a=x & b=y`` (attributes in any order; spaces around
        ``=`` and ``&`` are ignored, the level is taken without surrounding spaces).
    groups : sequence of str
        The attribute columns, in the order given (the order of the parts of a slice name).
    intersections : int
        Largest number of attributes crossed.

    Returns
    -------
    list of str
        The slice names (``race=Caucasian & sex=Male``, :func:`.slices.slice_name`), in the order given.

    Raises
    ------
    ValueError
        For an item that is not ``attribute=level`` terms, names an attribute that is not a group
        column or names one twice, crosses more attributes than ``intersections``, or gives a second
        reference for a family (the message names the item and what was expected).
    """
    names = [str(g) for g in groups]
    out: list[str] = []
    seen: dict[tuple[str, ...], str] = {}
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"reference must name slices such as {names[0]}=<level>; got {item!r}")
        terms: dict[str, str] = {}
        for attribute, level in _terms(item, names):
            if attribute in terms:
                raise ValueError(f"reference {item!r} names the attribute {attribute!r} twice")
            terms[attribute] = level
        if len(terms) > intersections:
            raise ValueError(
                f"reference {item!r} crosses {len(terms)} attributes, but intersections is {intersections}: "
                f"there is no such family of slices"
            )
        family = tuple(g for g in names if g in terms)
        name = slice_name(family, [terms[g] for g in family])
        if family in seen:
            raise ValueError(
                f"reference gives two slices of the family {FAMILY_SEPARATOR.join(family)!r} ({seen[family]!r} and "
                f"{name!r}); give at most one per family"
            )
        seen[family] = name
        out.append(name)
    return out


def check_reference_levels(references: Sequence[str], attributes: Sequence[Any]) -> None:
    """Check, before any work, that every level a reference names is a level of its attribute.

    Parameters
    ----------
    references : sequence of str
        From :func:`parse_references`.
    attributes : sequence of Attribute
        The audit's coded attributes (name and level names).

    Raises
    ------
    AuditInputError
        Naming the reference, the level and the attribute's levels.
    """
    levels = {a.name: [str(v) for v in a.levels] for a in attributes}
    known = {name: set(values) for name, values in levels.items()}
    for name in references:
        for attribute, level in _terms(name, list(levels)):
            if level not in known[attribute]:
                shown = levels[attribute][:12] + (["..."] if len(levels[attribute]) > 12 else [])
                raise AuditInputError(
                    f"reference {name!r}: {level!r} is not a level of {attribute!r}; its levels are {shown}"
                )


def _threshold(text: str, item: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(
            f"thresholds item {item!r}: {text.strip()!r} is not a number; give values such as 0.1,0.2,0.3 or a grid "
            f"start:stop:step such as 0.05:0.95:0.05"
        ) from None


def parse_thresholds(items: Sequence[str | float]) -> np.ndarray:
    """The thresholds of the option ``thresholds``: values and grids, sorted, without repeats.

    Parameters
    ----------
    items : sequence of str or float
        Each a value (``0.3``) or a grid ``start:stop:step`` (``0.05:0.95:0.05``: start, start + step,
        ... up to stop included, within 1e-9 steps; values rounded to 12 decimals so that the grid
        gives 0.15, not 0.15000000000000002).

    Returns
    -------
    ndarray of shape (n_thresholds,), float64
        Increasing, each in (0, 1); empty for no items.

    Raises
    ------
    ValueError
        For an item that is not a number or a grid, a grid whose start or stop is not in (0, 1) (NaN
        and infinities included), whose step is not a finite positive number or whose stop is below
        its start, a threshold outside (0, 1), or more than :data:`MAX_THRESHOLDS` thresholds (the
        message names the option and the item).
    """
    values: list[float] = []
    texts = []
    for item in items:
        if isinstance(item, bool):
            raise ValueError(f"thresholds must be numbers or grids start:stop:step; got {item!r}")
        texts += [part for part in str(item).split(",") if part.strip()]  # "0.1,0.2" given as one text
    for text in texts:
        text = text.strip()
        if ":" in text:
            parts = text.split(":")
            if len(parts) != 3:
                raise ValueError(f"thresholds item {text!r}: a grid is start:stop:step (e.g. 0.05:0.95:0.05)")
            start, stop, step = (_threshold(p, text) for p in parts)
            outside = [f"{name} {v:g}" for name, v in (("start", start), ("stop", stop)) if not 0.0 < v < 1.0]
            if outside:  # NaN and infinities included
                raise ValueError(
                    f"thresholds item {text!r}: a grid's start and stop must lie in (0, 1) (score >= threshold is "
                    f"predicted positive); got {', '.join(outside)}"
                )
            if not (step > 0 and np.isfinite(step)) or stop < start:
                raise ValueError(
                    f"thresholds item {text!r}: a grid start:stop:step needs a finite step > 0 and stop >= start; "
                    f"got step {step:g}, start {start:g}, stop {stop:g}"
                )
            count = np.floor((stop - start) / step + 1e-9) + 1  # a float: it may be astronomically large
            if count > MAX_THRESHOLDS:
                raise ValueError(
                    f"thresholds item {text!r} has {count:.3g} values, more than {MAX_THRESHOLDS}; give a larger step "
                    f"(at least {(stop - start) / (MAX_THRESHOLDS - 1):.3g})"
                )
            values.extend(np.round(start + step * np.arange(int(count)), 12).tolist())
        else:
            values.append(_threshold(text, text))
    out = np.unique(np.asarray(values, dtype=np.float64))
    bad = out[~((out > 0.0) & (out < 1.0))]
    if bad.size:
        raise ValueError(
            f"thresholds must lie in (0, 1) (score >= threshold is predicted positive); got {bad.tolist()}"
        )
    if out.size > MAX_THRESHOLDS:
        raise ValueError(f"thresholds gives {out.size} thresholds, more than {MAX_THRESHOLDS}")
    return out


#: Column of the margins file holding each group's share of the target population.
SHARE_COLUMN = "share"
#: Optional column of the margins file holding each group's label rate (prevalence) in the target.
LABEL_RATE_COLUMN = "label_rate"


#: Largest margins file (bytes): checked before the file is read (about two million rows of shares).
MAX_MARGINS_BYTES = MAX_TEXT_FILE_BYTES


def _check_margins_columns(columns: list[str], groups: list[str], source: str) -> list[str]:
    """The margins file's attribute columns, checked: a ``share`` column, the rest group columns of the audit or
    ``label_rate``, at least one group column (linear in the columns)."""
    if SHARE_COLUMN not in columns:
        raise AuditInputError(f"{source} has no column {SHARE_COLUMN!r}; its columns are {brief(columns)}")
    attributes = [c for c in columns if c not in (SHARE_COLUMN, LABEL_RATE_COLUMN)]
    known = set(groups)
    unknown = [c for c in attributes if c not in known]
    if unknown:
        raise AuditInputError(
            f"{source}: column(s) {brief(unknown)} are not group columns of the audit {brief(groups)}; a margins "
            f"file holds group columns, {SHARE_COLUMN!r} and optionally {LABEL_RATE_COLUMN!r}"
        )
    if not attributes:
        raise AuditInputError(f"{source} names no group column; give at least one of {brief(groups)}")
    return attributes


def read_margins(path: str | Path, groups: list[str], *, strip_levels: bool = True) -> pd.DataFrame:
    """Read and check the option ``population_margins``'s file (not yet against the data).

    The file is read as the audit's own CSV input is (:func:`.loading.load_table`: a regular file,
    UTF-8, one header line naming each column once, every line with as many fields; at most
    :data:`MAX_MARGINS_BYTES`, checked before it is read), every field as text. Its levels are
    stripped of surrounding whitespace as the data's are (``strip_levels``), and every check is
    linear in the file's rows.

    Parameters
    ----------
    path : path
        A CSV with one column per modelled attribute (a subset of the audit's group columns), the
        column ``share`` (the target's share of each combination of their levels) and optionally
        ``label_rate`` (its label rate in the target).
    groups : list of str
        The audit's group columns.
    strip_levels : bool, default True
        The audit's option of that name: levels without surrounding whitespace, as the data's.

    Returns
    -------
    pandas.DataFrame
        The attribute columns as text, ``share`` and (if given) ``label_rate`` as floats.

    Raises
    ------
    AuditInputError
        Naming the file and the bad value: unreadable (missing, not a regular file, larger than
        :data:`MAX_MARGINS_BYTES`, not a CSV, a column named twice), no ``share``, an unknown column, an
        empty level, a combination given twice (after stripping: both spellings named), a share that is
        not a number, is below :data:`disaggregated_eval.selection.MIN_SHARE` (0 included) or do not
        sum to 1, a label rate outside (0, 1).
    """
    from ..selection import MIN_SHARE, SHARE_TOLERANCE
    from .loading import InputFileError, load_table, read_header

    source = f"population_margins {brief(str(path), PATH_CHARS)}"
    try:
        check_regular_file(path, what=source, max_bytes=MAX_MARGINS_BYTES)
        # the columns are checked from the header before the rows are read (a header of millions of names would
        # otherwise be parsed into a frame of as many columns first: gigabytes)
        header = read_header(path, default_format="csv", max_columns=len(groups) + 2)  # groups, share, label_rate
        _check_margins_columns([str(c) for c in header], groups, source)
        frame = load_table(path, as_text=True, default_format="csv", max_read_chars=MAX_MARGINS_BYTES)
    except FileReadError as error:
        raise AuditInputError(str(error)) from None
    except InputFileError as error:  # its message starts with the path: named here as the option's file
        text = str(error).removeprefix(f"{Path(path)}: ")
        raise AuditInputError(f"{source}: {text}") from None
    columns = [str(c) for c in frame.columns]
    attributes = _check_margins_columns(columns, groups, source)
    frame.columns = columns
    written = frame[attributes].copy()
    if strip_levels:
        for c in attributes:
            frame[c] = frame[c].str.strip()
    empty = frame[attributes].eq("").to_numpy()
    if empty.any():
        row, col = (int(i[0]) for i in np.nonzero(empty))
        raise AuditInputError(
            f"{source}: row {row_number(row)} gives {attributes[col]!r} an empty level ({brief(written.iat[row, col])}); "
            f"name every level (the data's missing values form the level {vocabulary.MISSING_LEVEL!r})"
        )
    rows = list(zip(*(frame[c].tolist() for c in attributes), strict=True))
    names = [slice_name(attributes, row) for row in rows]
    twice = repeated(names)  # linear: one hash table
    if twice:
        lines = [i for i, n in enumerate(names) if n == twice[0]][:3]
        spellings = dict.fromkeys(shown_slice_name(attributes, written.iloc[i].tolist()) for i in lines)
        raise AuditInputError(
            f"{source} gives {shown_slice_name(attributes, rows[lines[0]])} more than once (rows "
            f"{', '.join(str(row_number(i)) for i in lines)}{': ' + ' and '.join(spellings) if len(spellings) > 1 else ''}); "
            f"give each combination once"
        )

    def shown(i: int) -> str:
        return shown_slice_name(attributes, rows[i])

    for column in [SHARE_COLUMN] + ([LABEL_RATE_COLUMN] if LABEL_RATE_COLUMN in columns else []):
        values = pd.to_numeric(frame[column].str.strip(), errors="coerce").to_numpy(dtype=np.float64)
        bad = ~np.isfinite(values)
        if column == SHARE_COLUMN:
            bad_range = ~bad & (values < MIN_SHARE)
        else:
            bad_range = ~bad & ~((values > 0) & (values < 1))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise AuditInputError(
                f"{source}: {column} of {shown(i)} must be a number; got {brief(frame[column].iat[i])}"
            )
        if bad_range.any():
            i = int(np.flatnonzero(bad_range)[0])
            if column == SHARE_COLUMN:
                raise AuditInputError(
                    f"{source}: the share of {shown(i)} is {values[i]:g}; every share must be at least "
                    f"{MIN_SHARE:g} (a group of the data with no share cannot be weighted, and one the target lacks "
                    f"should not be audited as part of it; below {MIN_SHARE:g} a share stands for less than one "
                    f"person in 10^12, a 0 by another name)"
                )
            raise AuditInputError(
                f"{source}: the label rate of {shown(i)} is {values[i]:g}; it must lie strictly between 0 and 1"
            )
        frame[column] = values
    total = float(frame[SHARE_COLUMN].sum())
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise AuditInputError(
            f"{source}: the shares sum to {total:.6g}; they must sum to 1 (within {SHARE_TOLERANCE:g})"
        )
    # the shares the rows are weighted to (divided by their sum; with label rates, per group and label) obey
    # the same bound as the file's: a label rate of 1e-300 or a sum of 1.0009 took one below it, and the
    # audit failed with a traceback once its work was done
    target = margin_targets(frame)
    low = target < MIN_SHARE
    if low.any():
        k = int(np.flatnonzero(low)[0])
        detail = f"divided by the shares' sum {_shown_apart(total, 1.0)}"
        if LABEL_RATE_COLUMN in frame.columns:
            k, label = divmod(k, 2)
            rate = float(frame[LABEL_RATE_COLUMN].iat[k])
            detail = f"its share times {'' if label else '1 - '}label_rate {rate!r}, {detail}"
            who = f"{shown(k)} with label {label}"
        else:
            who = shown(k)
        raise AuditInputError(
            f"{source}: the share of {who} is {_shown_apart(target[low][0], MIN_SHARE)} ({detail}); every share the "
            f"rows are weighted to "
            f"must be at least {MIN_SHARE:g} (below it a share stands for less than one person in 10^12, a 0 by "
            f"another name)"
        )
    return frame


def _shown_apart(value: float, other: float) -> str:
    """``value`` with 6 significant digits, or as many more as it takes to differ from ``other`` in print (a share
    of 9.99999999999e-13 is not shown as 1e-12 beside a bound of 1e-12)."""
    for digits in range(6, 18):
        text = f"{value:.{digits}g}"
        if value == other or float(text) != other:
            return text
    return repr(value)


def margin_targets(frame: pd.DataFrame) -> np.ndarray:
    """The target shares the rows are weighted to, from a margins frame that :func:`read_margins` read.

    The shares divided by their sum, one per row of the file; with ``label_rate``, two per row (label 0,
    then label 1: ``share * (1 - label_rate)`` and ``share * label_rate``).

    Parameters
    ----------
    frame : pandas.DataFrame
        ``share`` and optionally ``label_rate`` as floats.

    Returns
    -------
    ndarray of float64
        Of length ``len(frame)``, or ``2 * len(frame)`` with label rates (row ``i``'s cells at ``2 i`` and
        ``2 i + 1``); summing to 1.

    Examples
    --------
    >>> frame = pd.DataFrame({"share": [0.6, 0.4], "label_rate": [0.5, 0.25]})
    >>> margin_targets(frame).tolist()
    [0.3, 0.3, 0.30000000000000004, 0.1]
    """
    share = frame[SHARE_COLUMN].to_numpy(dtype=np.float64)
    share = share / share.sum()
    if LABEL_RATE_COLUMN not in frame.columns:
        return share
    rate = frame[LABEL_RATE_COLUMN].to_numpy(dtype=np.float64)
    return np.column_stack([share * (1 - rate), share * rate]).ravel()


def _selection_options(population_margins: Any, selection_sensitivity: Any, *, groups: list[str],
                       strip_levels: bool = True):  # fmt: skip
    """The options of the evaluation under selection alone (before the data are read): the margins file
    read and checked (:func:`read_margins`), the Gammas increasing (1 is implied)."""
    from .. import selection

    margins = None
    if population_margins is not None:
        if not isinstance(population_margins, (str, Path)) or not str(population_margins):
            raise AuditInputError(f"population_margins must be a path to a CSV file; got {brief(population_margins)}")
        margins = read_margins(population_margins, groups, strip_levels=strip_levels)
    values = list(selection_sensitivity or [])
    if not values:
        return margins, []
    try:
        gammas = selection.check_gammas(values, "selection_sensitivity")
    except ValueError as error:
        raise AuditInputError(str(error)) from None
    if gammas[-1] > selection.GAMMA_MAX:
        raise AuditInputError(
            f"selection_sensitivity values must be at most {selection.GAMMA_MAX:g}; got {gammas[-1]:g}"
        )
    return margins, [float(g) for g in gammas]


# ----------------------------------------------------------------------------------------------
# The resolved options: checked once, frozen
# ----------------------------------------------------------------------------------------------
def _record(self) -> dict[str, Any]:
    """The options as the audit ran with them, by name, in the order of :class:`AuditOptions` (the
    text forms of ``thresholds`` and ``tolerance``; the manifest's and the report's ``options``)."""
    return {f.name: getattr(self, f.name) for f in option_fields()}


def _preference_odds(self) -> float:
    """``t / (1 - t)`` of the preference threshold ``t``: the weight of a false positive in the net benefit."""
    return self.preference_threshold / (1.0 - self.preference_threshold)


_RESOLVED_DOC = """Every option of an audit, checked and converted once by :func:`resolve_options` (frozen).

The fields of :class:`AuditOptions`, each with its checked value (lists as lists, ``intersections`` the
number of attributes crossed, ``preference_threshold`` a number, ``controls`` in the order of
``vocabulary.CONTROLS``, ``reference`` the slice names, ``tolerance`` its text form): :meth:`record` gives
them by name. Besides them, the values parsed from options written as text, so that no later step parses
them again:

Attributes
----------
parsed_tolerance : Tolerance
    The option ``tolerance`` (:func:`disaggregated_eval.verdicts.parse_tolerance`).
threshold_values : tuple of float
    The thresholds of the option ``thresholds`` (:func:`parse_thresholds`), increasing; empty without it.
margins : pandas.DataFrame or None
    The option ``population_margins``'s file, read and checked (:func:`read_margins`).
preference_odds : float
    ``preference_threshold / (1 - preference_threshold)`` (a property).

Code that changes a value after the resolution (the audit raises ``n_permutations``; an input counted
by DuckDB names its count column as ``frequency_weight``) makes new options with
:func:`dataclasses.replace`, which checks nothing: it is for values already checked.
"""

#: The options of an audit after :func:`resolve_options` (class docstring above). Built from the fields of
#: :class:`AuditOptions`, so that an option is declared once.
ResolvedOptions = make_dataclass(
    "ResolvedOptions",
    [(f.name, typing.get_type_hints(AuditOptions)[f.name]) for f in fields(AuditOptions)]
    + [
        ("parsed_tolerance", Any, field(compare=False)),
        ("threshold_values", tuple, field(compare=False)),
        ("margins", Any, field(compare=False, repr=False)),
    ],
    frozen=True,
    namespace={"__doc__": _RESOLVED_DOC, "record": _record, "preference_odds": property(_preference_odds)},
)
ResolvedOptions.__module__ = __name__  # make_dataclass's ``module`` argument is Python 3.12+


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
    twice = sorted(repeated(values))
    if twice:
        raise AuditInputError(f"{name} must be distinct; {brief(twice)} appear more than once")
    if not values and not allow_empty:
        raise AuditInputError(f"{name} must name at least one column")
    return values


def _wrap(check, *args, **kwargs):
    try:
        return check(*args, **kwargs)
    except (TypeError, ValueError) as error:
        raise AuditInputError(str(error)) from None


def resolve_options(options: AuditOptions | ResolvedOptions | None, overrides: Mapping[str, Any]) -> ResolvedOptions:
    """Merge ``overrides`` into ``options`` (or the defaults), check every option and parse the text ones.

    The one validation of an audit's options (module docstring), for the Python function, the command
    line and a workflow's ``audit`` section alike.

    Parameters
    ----------
    options : AuditOptions, ResolvedOptions or None
        The options (None: the defaults). A :class:`ResolvedOptions` without ``overrides`` is returned as
        it is (it was checked when it was made).
    overrides : mapping of str to value
        Options by name (the fields of :class:`AuditOptions`); they win over ``options``.

    Returns
    -------
    ResolvedOptions

    Raises
    ------
    AuditInputError
        Unknown option names or any invalid value (the message names the option and the value).

    Warns
    -----
    AuditWarning
        Too few resamples for the intervals' level (:func:`check_resample_count`).
    """
    if isinstance(options, ResolvedOptions):
        if not overrides:
            return options
        options = AuditOptions(**options.record())
    elif options is None:
        options = AuditOptions()
    elif not isinstance(options, AuditOptions):
        raise AuditInputError(f"options must be an AuditOptions; got {type(options).__name__}")
    known = {f.name for f in fields(AuditOptions)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise AuditInputError(f"unknown option(s) {unknown}; the options are {sorted(known)}")
    o = AuditOptions(**{**{f.name: getattr(options, f.name) for f in fields(AuditOptions)}, **dict(overrides)})
    for f in fields(AuditOptions):  # stated maxima of list sizes, before any work on the items
        limit = f.metadata.get("max_items")
        value = getattr(o, f.name)
        if limit is not None and isinstance(value, (list, tuple)) and len(value) > limit:
            raise AuditInputError(f"{f.name} gives {len(value):,} values, more than the limit of {limit}; give fewer")

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
    adjust_scope = _wrap(check_choice, o.adjust_scope, "adjust_scope", vocabulary.ADJUST_SCOPES)
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
    n_threads = _wrap(check_int, o.n_threads, "n_threads", minimum=1, maximum=_max_threads())
    memory_limit_mb = o.memory_limit_mb
    if memory_limit_mb is not None:
        if isinstance(memory_limit_mb, bool) or not isinstance(memory_limit_mb, numbers.Real):
            raise AuditInputError(f"memory_limit_mb must be a number of MB or None; got {brief(memory_limit_mb)}")
        if not (math.isfinite(memory_limit_mb) and memory_limit_mb > 0):
            raise AuditInputError(f"memory_limit_mb must be a positive number of MB; got {brief(memory_limit_mb)}")
        if memory_limit_mb < MIN_MEMORY_LIMIT_MB:
            raise AuditInputError(
                f"memory_limit_mb must be at least {MIN_MEMORY_LIMIT_MB:g} MB (no audit fits in less); got "
                f"{memory_limit_mb:g}"
            )
        if memory_limit_mb > MAX_MEMORY_LIMIT_MB:
            raise AuditInputError(
                f"memory_limit_mb must be at most {MAX_MEMORY_LIMIT_MB:,.0f} MB (2^63 bytes); got {memory_limit_mb:g}"
            )
        memory_limit_mb = float(memory_limit_mb)
    analyses = _analysis_options(
        reference=o.reference, thresholds=o.thresholds, calibration_bins=o.calibration_bins, detect_gap=o.detect_gap,
        power=o.power, tolerance=o.tolerance, population_margins=o.population_margins,
        selection_sensitivity=o.selection_sensitivity, groups=groups, intersections=intersections,
        strip_levels=bool(o.strip_levels),
    )  # fmt: skip
    record = dict(
        {f.name: getattr(o, f.name) for f in fields(AuditOptions)},
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
        **analyses.pop("record"),
    )
    return ResolvedOptions(**record, **analyses)


def _max_threads() -> int:
    """The most threads numba may run (``NUMBA_NUM_THREADS``: the CPUs, or the environment's setting)."""
    import numba

    return int(numba.config.NUMBA_NUM_THREADS)


def _analysis_options(
    *,
    reference: Any,
    thresholds: Any,
    calibration_bins: Any,
    detect_gap: Any,
    power: Any,
    tolerance: Any,
    population_margins: Any,
    selection_sensitivity: Any,
    groups: list[str],
    intersections: int,
    strip_levels: bool = True,
) -> dict[str, Any]:
    """The checked options of the analyses after the core tables (fairness reference, thresholds,
    calibration bins, detectability, tolerance, evaluation under selection), parsed once: the options of
    the same names as given, and the checked ``groups`` and ``intersections``."""
    from ..verdicts import parse_tolerance

    reference = _wrap(parse_references, _as_list(reference, "reference"), groups=groups, intersections=intersections)
    thresholds = [str(t) if not isinstance(t, str) else t for t in _as_list(thresholds, "thresholds")]
    threshold_values = _wrap(parse_thresholds, thresholds)
    calibration_bins = _wrap(check_int, calibration_bins, "calibration_bins", minimum=1, maximum=MAX_CALIBRATION_BINS)
    detect_gap = None if detect_gap is None else _wrap(check_open_unit, detect_gap, "detect_gap")
    power = _wrap(check_open_unit, power, "power")
    tolerance = _wrap(parse_tolerance, _as_list(tolerance, "tolerance"))
    margins, selection_sensitivity = _selection_options(
        population_margins,
        _as_list(selection_sensitivity, "selection_sensitivity"),
        groups=groups,
        strip_levels=strip_levels,
    )
    population_margins = None if population_margins is None else str(population_margins)
    record = dict(reference=reference, thresholds=thresholds, calibration_bins=calibration_bins, detect_gap=detect_gap,
                  power=power, tolerance=tolerance.items(), selection_sensitivity=selection_sensitivity,
                  population_margins=population_margins)  # fmt: skip
    return dict(record=record, parsed_tolerance=tolerance, threshold_values=tuple(threshold_values.tolist()),
                margins=margins)  # fmt: skip
