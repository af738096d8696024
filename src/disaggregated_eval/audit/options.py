"""Options of ``disagg-eval audit`` and how they are read: one home for the Python function, the CLI
and YAML files.

Every option is a field of :class:`AuditOptions` with its default and its help text; the command
line (:mod:`disaggregated_eval.audit.cli`) builds its ``--help`` from these fields, a YAML file given
with ``--config`` carries the same names, and :func:`disaggregated_eval.audit.audit` takes them as
keyword arguments. See ``docs/audit.md``.

This module also reads option values written as text or YAML (the command line, a ``--config`` file,
a workflow's ``audit`` section): :func:`options_from_mapping` converts and checks the types, the
choices and repeats of a mapping, :func:`read_config_file` reads a YAML file (refusing a key given
twice). Ranges and cross-option rules are checked once, by
:func:`disaggregated_eval.audit.inputs.resolve_options`.

List values: a YAML list is taken item by item, verbatim (a column name may hold a comma); a single
text value, in YAML or on the command line, is split at commas, where ``\\,`` stands for a literal
comma (``--group 'income\\, annual'``; Helm's ``--set`` convention).
"""

from __future__ import annotations

import difflib
import os
import re
import types
import typing
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from .. import vocabulary
from .._validation import brief, check_nesting

__all__ = [
    "AuditOptions",
    "DEFAULT_SEED",
    "option_help",
    "UsageError",
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
    "read_config_file",
    "OPTION_SECTIONS",
]

#: Seed used when none is given (printed by the CLI and written to the manifest).
DEFAULT_SEED = 20250101


#: Sections of ``disagg-eval audit --help``, in order; every option names its own (``section`` metadata).
OPTION_SECTIONS = ("columns", "slices", "metrics", "intervals and tests", "summary analyses",
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
        10,
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
        "multiple-comparison adjustment of the p-values within each family (one model, kind of comparison and metric; "
        "see adjust_scope): holm controls the family-wise error, bh the false discovery rate",
        choices=("holm", "bh", "none"),
        section="intervals and tests",
        metavar="METHOD",
    )
    adjust_scope: str = _opt(
        "metric",
        "family of the adjustment: metric (one model, kind and metric) or model (one model and kind, all metrics together)",
        choices=("metric", "model"),
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
        section="summary analyses",
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
        section="summary analyses",
        metavar="T",
    )
    calibration_bins: int = _opt(
        10,
        "bins of each model's score (over the whole file) of the calibration table and of the ECE: one per value "
        "for a score with at most B values, else quantile bins",
        section="summary analyses",
        metavar="B",
    )
    detect_gap: float | None = _opt(
        None,
        "a difference from overall in the metric's units (e.g. 0.05): the detectability table gives the rows each "
        "slice would need to detect it",
        section="summary analyses",
        metavar="GAP",
    )
    power: float = _opt(
        0.8,
        "power of the minimum detectable differences (and of the rows needed for detect_gap)",
        section="summary analyses",
        metavar="POWER",
    )
    population_margins: str | None = _opt(
        None,
        "CSV of the target population's shares: one column per modelled group column, 'share' (summing to 1) and "
        "optionally 'label_rate' (prevalence by group); the rows are weighted to it (post-stratification, with "
        "the weights re-estimated in every resample) in the table 'selection'",
        section="summary analyses",
        metavar="FILE",
    )
    selection_sensitivity: list[float] = _opt(
        [],
        "values of Gamma >= 1 (e.g. 1.5,2,3): bounds of every metric and difference from overall when the true "
        "selection weights may differ from the (margin) weights by up to a factor Gamma (marginal sensitivity "
        "model), and the Gamma at which each flagged difference is explained away (table 'selection')",
        section="summary analyses",
        metavar="GAMMA",
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
        "grid of max_leaf_nodes of the HistGradientBoosting weight models P(A | V) (paper Supplementary A.3)",
        section="controlled evaluation",
        metavar="N",
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
        "largest memory the audit may use, in MB: an audit whose estimated peak is larger is refused before any "
        "work, with advice (default: 80% of the machine's memory)",
        section="computation",
        metavar="MB",
    )


def option_help() -> dict[str, str]:
    """Help text of every option, by name (the CLI's ``--help``)."""
    return {f.name: f.metadata["help"] for f in fields(AuditOptions)}


# ----------------------------------------------------------------------------------------------
# How options are spelled and read
# ----------------------------------------------------------------------------------------------
#: Field -> flag name where the flag is singular (given once per value).
FLAG_NAMES: dict[str, str] = {"scores": "score", "groups": "group", "controls": "control"}
#: Keys a ``--config`` file may hold besides the option fields.
CLI_KEYS: tuple[str, ...] = ("file", "out")
#: Values of the command line's ``--aggregate`` (how a Parquet input is read: :func:`.loading.load_input`).
AGGREGATE_CHOICES: tuple[str, ...] = ("auto", "yes", "no")
#: ``--aggregate auto`` aggregates a Parquet file of more rows than this (and always a folder of files).
AUTO_AGGREGATE_ROWS = 10**7
#: Options without which no audit can run (their empty defaults mean "required").
REQUIRED_OPTIONS: tuple[str, ...] = ("label", "scores", "groups")
#: Choices of list options (the scalar ones carry ``choices`` in their field metadata).
_LIST_CHOICES: dict[str, tuple[str, ...]] = {"metrics": vocabulary.METRICS, "controls": vocabulary.CONTROLS}
_HINTS = typing.get_type_hints(AuditOptions)
#: A comma not preceded by a backslash: the separator of a list written as one text value.
_COMMA = re.compile(r"(?<!\\),")


class UsageError(ValueError):
    """Bad command line, ``--config`` file or workflow entry: printed as one line, exit status 2."""


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
        counts = Counter(items)  # linear: a list of 20,000 items is checked at once
        repeated = sorted(brief(str(v), plain=True) for v, k in counts.items() if k > 1)
        if repeated:
            more = f" and {len(repeated) - 5} more" if len(repeated) > 5 else ""
            raise UsageError(f"{where} lists {', '.join(repeated[:5])}{more} more than once")
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


class _DuplicateKey(Exception):
    def __init__(self, key: Any, first: int, second: int) -> None:
        super().__init__(key, first, second)
        self.key, self.first, self.second = key, first, second


def _unique_key_loader():
    """A ``yaml.SafeLoader`` that refuses a mapping key given twice (PyYAML keeps the last silently)."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def construct_mapping(loader, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # '<<' merges may be overridden
                continue
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: PyYAML reports it itself
                continue
            if first is not None:
                raise _DuplicateKey(key, first, line)
            seen[key] = line
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return Loader


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Options from a YAML ``--config`` file (checked by :func:`options_from_mapping`).

    Raises
    ------
    UsageError
        If the file is missing, is not valid YAML, gives a key twice (naming the key and both lines),
        is not a mapping, or has an unknown key or bad value.
    """
    import yaml

    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--config {source}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--config {source}: cannot be read ({exc})") from None
    try:
        data = yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader subclass
    except _DuplicateKey as dup:
        raise UsageError(
            f"--config {source}: key {brief(dup.key)} is given twice (lines {dup.first} and {dup.second}); keep one"
        ) from None
    except RecursionError:  # PyYAML composes nested lists recursively
        raise UsageError(f"--config {source}: nested too deeply to read; give a flat list or mapping") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(
            f"--config {source}: not valid YAML{where} ({brief(str(getattr(exc, 'problem', exc)))})"
        ) from None
    if data is None:
        return {}
    return options_from_mapping(data, source=f"--config {source}")
