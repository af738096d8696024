"""Validation of the workflow configuration (``config/config.yaml`` and any ``--configfile``).

One source of truth: the JSON schema ``workflow/schemas/config.schema.yaml`` says which keys exist,
their types, ranges and defaults; the name lists it does not repeat (simulation settings, ACS tasks,
survey horizons, states) come from :mod:`disaggregated_eval.vocabulary` and are added to the schema
when it is loaded. :func:`validate_config` fills every default first, then checks the schema and the
cross-key rules (fold sizes against row counts, settings listed twice, the survey year's columns, the
bootstrap's memory against its job's ``mem_mb``), so no check is skipped because a key was left out. Every message names the key path and the bad value, e.g. ``simulation.n_train must be a positive
integer; got -5``. The ``Snakefile`` calls :func:`check_config_file` and :func:`validate_config` at
parse time, so a bad configuration stops the run before any job starts.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import numbers
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from disaggregated_eval import vocabulary
from disaggregated_eval.io import (
    MAX_CONFIG_BYTES,
    DuplicateKeyError,
    FileReadError,
    read_bounded,
    read_yaml_unique_keys,
)
from disaggregated_eval.validation import brief, check_nesting, repeated

__all__ = [
    "ConfigError",
    "SCHEMA_PATH",
    "load_schema",
    "fill_defaults",
    "check_config_file",
    "check_output_folders",
    "validate_config",
    "PLACEHOLDER",
    "placeholder_warnings",
]

#: The value the shipped SLURM profile gives the settings each site must fill in (``slurm_partition``).
PLACEHOLDER = "CHANGE_ME"

#: The schema of the workflow configuration, in ``workflow/schemas/`` (this package is in ``workflow/lib/``).
SCHEMA_PATH = Path(__file__).resolve().parents[2] / "schemas" / "config.schema.yaml"

# Name lists checked by the schema, added at load time (one home: the vocabulary). Key path ->
# (allowed values, whether the key holds a list of them).
_NAME_LISTS: dict[tuple[str, ...], tuple[tuple[str, ...], bool]] = {
    ("simulation", "settings"): (vocabulary.SETTINGS, True),
    ("simulation", "selection_settings"): (vocabulary.SETTINGS, True),
    ("coverage", "settings"): (vocabulary.MAIN_SETTINGS, True),
    ("selection_study", "settings"): (vocabulary.SELECTION_SETTINGS, True),
    ("acs", "tasks"): (tuple(vocabulary.TASKS), True),
    ("acs", "horizon"): (vocabulary.HORIZONS, False),
    ("acs", "state"): (vocabulary.STATES, False),
}


# Stated maximums of sizes, added to the schema at load time as ``maximum`` (one home: the library's
# constants in disaggregated_eval.memory, which the audit's options use too). Key path -> maximum.
def _maxima() -> dict[tuple[str, ...], int]:
    from disaggregated_eval import memory

    return {
        ("simulation", "n_train"): memory.MAX_SIMULATED_ROWS,
        ("simulation", "n_test"): memory.MAX_SIMULATED_ROWS,
        ("evaluation", "n_resamples"): memory.MAX_RESAMPLES,
        ("evaluation", "batch_size"): memory.MAX_RESAMPLES,
        ("calibration", "n_bins"): memory.MAX_CALIBRATION_BINS,
        ("coverage", "n_replicates"): memory.MAX_REPLICATES,
        ("coverage", "n_replicates_r"): memory.MAX_REPLICATES,
        ("coverage", "n_resamples"): memory.MAX_RESAMPLES,
        ("coverage", "jobs_per_setting"): memory.MAX_REPLICATES,
        ("selection_study", "n_replicates"): memory.MAX_REPLICATES,
        ("selection_study", "n_test"): memory.MAX_SIMULATED_ROWS,
        ("selection_study", "n_resamples"): memory.MAX_RESAMPLES,
        ("selection_study", "jobs_per_setting"): memory.MAX_REPLICATES,
    }


_STRING_HINT = (
    " (a string: Snakemake passes values nested inside --config as strings; set nested keys in a"
    " YAML file given with --configfile)"
)


class ConfigError(ValueError):
    """A configuration value is invalid; the message lists every problem with its key path."""


# ---------------------------------------------------------------------------------------------
# Schema: loading, defaults, descriptions


def load_schema(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Read the configuration schema and add the vocabulary's name lists as ``enum`` constraints.

    Parameters
    ----------
    path : path-like, optional
        The schema file; default :data:`SCHEMA_PATH`.

    Returns
    -------
    dict
        The JSON schema (draft 2020-12).

    Raises
    ------
    FileNotFoundError
        If the schema file does not exist.
    """
    import yaml

    schema_path = Path(path) if path is not None else SCHEMA_PATH
    if not schema_path.is_file():
        raise FileNotFoundError(
            f"configuration schema not found at {schema_path}; pass schema= the path of "
            "workflow/schemas/config.schema.yaml"
        )
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: 10x faster
    schema = yaml.load(schema_path.read_text(encoding="utf-8"), Loader=loader)  # a safe loader
    for key_path, (names, is_list) in _NAME_LISTS.items():
        node = _subschema(schema, key_path)
        if node is None:
            continue
        target = node.setdefault("items", {}) if is_list else node
        target["enum"] = list(names)
    for key_path, maximum in _maxima().items():
        node = _subschema(schema, key_path)
        if node is not None:
            node["maximum"] = maximum
    return schema


def _subschema(schema: Mapping[str, Any], path: Sequence[str | int]) -> dict[str, Any] | None:
    """The schema of the value at ``path`` (``int`` steps go into an array's ``items``)."""
    node: Any = schema
    for step in path:
        if isinstance(step, int):
            node = node.get("items") if isinstance(node, Mapping) else None
        else:
            node = node.get("properties", {}).get(step) if isinstance(node, Mapping) else None
        if node is None:
            return None
    return node


def fill_defaults(config: dict[str, Any], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Fill the schema's ``default`` of every absent key, recursively, in place.

    A mapping given only in part keeps its values and gets the defaults of its other keys, so a
    ``--configfile`` needs to hold only the keys it changes. Values of the wrong type are left for
    the validation to report.

    Returns
    -------
    dict
        ``config`` itself.
    """
    for key, sub in schema.get("properties", {}).items():
        if key not in config and "default" in sub:
            config[key] = copy.deepcopy(sub["default"])
        if isinstance(config.get(key), dict) and "properties" in sub:
            fill_defaults(config[key], sub)
    return config


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _types(schema: Mapping[str, Any]) -> list[str]:
    kind = schema.get("type", [])
    return [kind] if isinstance(kind, str) else list(kind)


def _describe_integer(schema: Mapping[str, Any], plural: bool = False, *, bounded: bool = False) -> str:
    """In words; with ``bounded`` (a value above the ``maximum``), the maximum too."""
    minimum, maximum = schema.get("minimum"), schema.get("maximum") if bounded else None
    most = "" if maximum is None else f" at most {maximum:,}"
    if minimum == 1:
        return ("positive integers" if plural else "a positive integer") + most
    if minimum == 0:
        return ("non-negative integers" if plural else "a non-negative integer") + most
    if minimum is not None and maximum is not None:
        return f"integers from {minimum} to {maximum:,}" if plural else f"an integer from {minimum} to {maximum:,}"
    if minimum is not None:
        return f"integers >= {minimum}" if plural else f"an integer >= {minimum}"
    return ("integers" if plural else "an integer") + most


def _describe(schema: Mapping[str, Any], *, bounded: bool = False) -> str:
    """What a value of ``schema`` must be, in words (``"a positive integer"``; with ``bounded``, for a
    value above the schema's ``maximum``, ``"a positive integer at most 10,000,000"``)."""
    types = _types(schema)
    nullable = "null" in types
    types = [t for t in types if t != "null"]
    kind = types[0] if types else None
    if "enum" in schema:
        text = "one of " + ", ".join(str(v) for v in schema["enum"])
    elif kind == "integer":
        text = _describe_integer(schema, bounded=bounded)
    elif kind == "number":
        low, high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        text = f"a number strictly between {low} and {high}" if low is not None and high is not None else "a number"
    elif kind == "boolean":
        text = "true or false"
    elif kind == "string":
        text = "a non-empty string" if schema.get("minLength") else "a string"
    elif kind == "array":
        items = schema.get("items", {})
        if "enum" in items or "string" in _types(items):
            what = "names"
        elif "integer" in _types(items):
            what = _describe_integer(items, plural=True)
        else:
            what = "values"
        text = "a non-empty list of " if schema.get("minItems") else "a list of "
        text += ("distinct " if schema.get("uniqueItems") else "") + what
    elif kind == "object":
        text = "a mapping"
    else:
        text = "a valid value"
    return f"null or {text}" if nullable else text


def _key(path: Sequence[str | int]) -> str:
    return ".".join(str(p) for p in path) or "the configuration"


def _looks_numeric(value: Any) -> bool:
    """Whether ``value`` is a string (or a list of strings) that reads as a number."""
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(v, str) for v in items):
        return False
    try:
        for v in items:
            float(v)
    except ValueError:
        return False
    return True


def _schema_errors(config: Mapping[str, Any], schema: Mapping[str, Any]) -> tuple[list[str], set[str]]:
    """Messages for every schema violation, and the key paths they concern."""
    from jsonschema import Draft202012Validator

    messages: dict[str, str] = {}  # key path -> message (one per key)
    bad_entries: dict[str, list[Any]] = {}
    validator = Draft202012Validator(_without_unique_items(schema))  # uniqueItems: checked below, linearly
    for error in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.path))):
        path = list(error.absolute_path)
        if error.validator == "additionalProperties":
            allowed = list(error.schema.get("properties", {}))
            for key in sorted(set(error.instance) - set(allowed)):
                where = _key([*path, key])
                hint = ""
                if not path and "." in str(key) and str(key).split(".")[0] in allowed:
                    hint = (
                        " (--config sets only top-level keys; set nested keys in a YAML file given with --configfile)"
                    )
                messages[where] = (
                    f"{where} is not a known key (allowed here: {', '.join(allowed)}); "
                    f"got {brief(error.instance[key])}{hint}"
                )
            continue
        # Errors inside a list are reported on the list, with the offending entries.
        cut = next((i for i, step in enumerate(path) if isinstance(step, int)), len(path))
        where = _key(path[:cut])
        node_schema = _subschema(schema, path[:cut]) or error.schema
        value = _value_at(config, path[:cut])
        if cut < len(path):
            entries = bad_entries.setdefault(where, [])
            if len(entries) >= 5 or error.instance in entries:
                continue  # the message shows the first five distinct entries: made once, not once per entry
            entries.append(error.instance)
            if error.validator == "enum":
                known = ", ".join(map(str, error.schema["enum"]))
                messages[where] = (
                    f"{where} contains unknown name(s) {', '.join(brief(e) for e in entries[:5])}; known: {known}"
                )
            else:
                messages[where] = (
                    f"{where} must be {_describe(node_schema)}; got {brief(value)} (bad entries: "
                    f"{', '.join(brief(e) for e in entries[:5])})"
                )
        elif where not in messages:
            hint = _STRING_HINT if _looks_numeric(value) else ""
            bounded = error.validator == "maximum"
            messages[where] = f"{where} must be {_describe(node_schema, bounded=bounded)}; got {brief(value)}{hint}"
    for where, value, node_schema in _non_finite_numbers(config, schema):
        messages.setdefault(where, f"{where} must be {_describe(node_schema)}; got {brief(value)}")
    for where, value, twice in _repeated_list_items(config, schema):
        messages.setdefault(
            where, f"{where} lists {', '.join(brief(v) for v in twice[:5])} more than once; got {brief(value)}"
        )
    return list(messages.values()), set(messages)


def _without_unique_items(schema: Any) -> Any:
    """A copy of ``schema`` without its ``uniqueItems`` keywords: jsonschema checks them pair by pair (a
    list of 4,000 items of mixed types took 24 s, one of 50,000 hours); :func:`_repeated_list_items` checks
    the same rule in linear time."""
    if isinstance(schema, Mapping):
        return {k: _without_unique_items(v) for k, v in schema.items() if k != "uniqueItems"}
    if isinstance(schema, list):
        return [_without_unique_items(v) for v in schema]
    return schema


def _repeated_list_items(
    config: Mapping[str, Any], schema: Mapping[str, Any], path: tuple[str, ...] = ()
) -> list[tuple[str, list, list]]:
    """Lists of the configuration whose schema says ``uniqueItems`` and that give an item twice: (key path,
    list, items given twice), each found in one pass (:func:`_repeated_items`)."""
    found = []
    for key, sub in schema.get("properties", {}).items():
        value = config.get(key) if isinstance(config, Mapping) else None
        if isinstance(value, dict) and "properties" in sub:
            found += _repeated_list_items(value, sub, (*path, key))
        elif isinstance(value, list) and sub.get("uniqueItems"):
            twice = _repeated_items(value)
            if twice:
                found.append((_key([*path, key]), value, twice))
    return found


def _non_finite_numbers(
    config: Mapping[str, Any], schema: Mapping[str, Any], path: tuple[str, ...] = ()
) -> list[tuple[str, float, Mapping[str, Any]]]:
    """Keys of type number holding NaN or an infinity: JSON schema's range keywords let NaN through
    (every comparison with NaN is false), so ``evaluation.confidence: .nan`` would pass the schema."""
    found = []
    for key, sub in schema.get("properties", {}).items():
        if key not in config:
            continue
        value = config[key]
        if isinstance(value, dict) and "properties" in sub:
            found += _non_finite_numbers(value, sub, (*path, key))
        elif isinstance(value, float) and not math.isfinite(value) and "number" in _types(sub):
            found.append((_key([*path, key]), value, sub))
    return found


def _value_at(config: Mapping[str, Any], path: Sequence[str | int]) -> Any:
    node: Any = config
    for step in path:
        node = node[step]
    return node


# ---------------------------------------------------------------------------------------------
# Cross-key checks (run on the filled configuration, on keys the schema found valid)


def _min_rows_checks(config: Mapping[str, Any]) -> list[str]:
    """The simulated splits must leave rows of every group in every fold of the model stage."""
    sim, models = config["simulation"], config["models"]
    cv, crossfit = models["cv_folds"], models["crossfit_folds"]
    errors = []
    needed = 10 * cv * crossfit
    if sim["n_test"] < needed:
        errors.append(
            f"simulation.n_test must be at least 10 x models.cv_folds x models.crossfit_folds = {needed} "
            f"(the weight models P(A | R) are cross-fitted on the test set); got {sim['n_test']}"
        )
    if sim["n_train"] < 20 * cv:
        errors.append(f"simulation.n_train must be at least 20 x models.cv_folds = {20 * cv}; got {sim['n_train']}")
    return errors


def _repeated_items(values: Sequence[Any]) -> list[Any]:
    """The items of a configuration list given more than once, each once (linear: one hash table of their
    JSON text, which also holds lists and mappings)."""
    keys = [json.dumps(v, sort_keys=True, default=str) for v in values]
    first = dict(zip(reversed(keys), reversed(values)))  # each key's first value
    return [first[k] for k in repeated(keys)]


def _duplicate_setting_checks(config: Mapping[str, Any]) -> list[str]:
    """A setting listed as both a main and a selection setting would be collected twice."""
    sim = config["simulation"]
    selection = set(sim["selection_settings"])
    both = [s for s in sim["settings"] if s in selection]
    if not both:
        return []
    return [
        f"simulation.settings and simulation.selection_settings both list {', '.join(map(repr, both))}; "
        f"a setting belongs to one list only (its rows would otherwise appear twice in every table); "
        f"got settings={sim['settings']!r}, selection_settings={sim['selection_settings']!r}"
    ]


def _survey_year_checks(config: Mapping[str, Any]) -> list[str]:
    """Columns a task needs that the PUMS files of the configured year no longer have."""
    year, tasks = config["acs"]["year"], config["acs"]["tasks"]
    renamed = {old: new for old, (new, since) in vocabulary.PUMS_RENAMED_COLUMNS.items() if year >= since}
    if not renamed:
        return []
    from disaggregated_eval import acs  # folktables' task definitions; imported only for years with renamed columns

    errors = []
    for task in tasks:
        for old, new in renamed.items():
            if old in acs.required_columns(task):
                since = vocabulary.PUMS_RENAMED_COLUMNS[old][1]
                errors.append(
                    f"acs.year must be at most {since - 1} for the task {task} (folktables "
                    f"{vocabulary.TASKS[task]} needs the column {old}, which PUMS person files call {new} "
                    f"from {since} on); got {year}"
                )
    return errors


def _bootstrap_memory_checks(config: Mapping[str, Any]) -> list[str]:
    """The bootstrap's replicate arrays must fit in the memory its job requests (``mem_mb``)."""
    from disaggregated_eval.memory import check_replicate_memory  # the replicates' bytes (numpy only, no numba)

    studies = {
        # study: (models, groups, weight sources); the controls with weights are X, Y and R.
        "simulation": (vocabulary.SIMULATION_MODELS, vocabulary.SIMULATION_GROUP_LABELS, vocabulary.WEIGHT_SOURCES),
        "acs": (vocabulary.MODEL_TYPES, vocabulary.ACS_GROUP_LABELS, ("estimated",)),
    }
    errors = []
    for study, (models, groups, sources) in studies.items():
        try:
            check_replicate_memory(
                n_models=len(models),
                n_groups=len(groups),
                n_controls=len(vocabulary.WEIGHT_CONTROLS),
                n_weight_sources=len(sources),
                n_metrics=len(vocabulary.PIPELINE_METRICS),
                n_resamples=config["evaluation"]["n_resamples"],
                mem_mb=config["resources"][study]["bootstrap"]["mem_mb"],
                what="evaluation.n_resamples",
                limit=f"resources.{study}.bootstrap.mem_mb",
            )
        except ValueError as exc:
            errors.append(str(exc))
    return errors


def _coverage_memory_checks(config: Mapping[str, Any]) -> list[str]:
    """The bootstrap of a coverage replicate (the simulation's models, controls and weight sources) must
    fit in the memory its job requests."""
    from disaggregated_eval.memory import check_replicate_memory

    try:
        check_replicate_memory(
            n_models=len(vocabulary.SIMULATION_MODELS),
            n_groups=len(vocabulary.SIMULATION_GROUP_LABELS),
            n_controls=len(vocabulary.WEIGHT_CONTROLS),
            n_weight_sources=len(vocabulary.WEIGHT_SOURCES),
            n_metrics=len(vocabulary.PIPELINE_METRICS),
            n_resamples=config["coverage"]["n_resamples"],
            mem_mb=config["resources"]["simulation"]["coverage"]["mem_mb"],
            what="coverage.n_resamples",
            limit="resources.simulation.coverage.mem_mb",
        )
    except ValueError as exc:
        return [str(exc)]
    return []


def _coverage_checks(config: Mapping[str, Any]) -> list[str]:
    """The coverage study needs the main run of its settings and at most all replicates with R."""
    cov, settings = config["coverage"], config["simulation"]["settings"]
    errors = []
    known = set(settings)
    missing = [s for s in cov["settings"] or () if s not in known]
    if missing:
        errors.append(
            f"coverage.settings must be among simulation.settings (the study uses their models and weight "
            f"models; null means all of them); not there: {', '.join(map(repr, missing))}; got "
            f"coverage.settings={cov['settings']!r}, simulation.settings={settings!r}"
        )
    if cov["n_replicates_r"] > cov["n_replicates"]:
        errors.append(
            f"coverage.n_replicates_r must be at most coverage.n_replicates ({cov['n_replicates']}); "
            f"got {cov['n_replicates_r']}"
        )
    if cov["jobs_per_setting"] > cov["n_replicates"]:
        errors.append(
            f"coverage.jobs_per_setting must be at most coverage.n_replicates ({cov['n_replicates']}); "
            f"got {cov['jobs_per_setting']}"
        )
    return errors


#: Largest ``n_test * n_resamples`` of a selection-study replicate (its resample-by-row arrays: ~400 MB each).
SELECTION_STUDY_MAX_CELLS = 50_000_000


def _selection_study_checks(config: Mapping[str, Any]) -> list[str]:
    """The selection study's Gammas increase and its jobs are at most its replicates."""
    study = config["selection_study"]
    errors = []
    gammas = list(study["gammas"])
    if any(b <= a for a, b in itertools.pairwise(gammas)):
        errors.append(f"selection_study.gammas must be increasing; got {gammas!r}")
    if study["n_test"] * study["n_resamples"] > SELECTION_STUDY_MAX_CELLS:
        errors.append(
            f"selection_study.n_test * selection_study.n_resamples must be at most {SELECTION_STUDY_MAX_CELLS:,} "
            f"(a replicate holds a few float arrays of that size, 8 bytes a value); got "
            f"{study['n_test']} * {study['n_resamples']}"
        )
    if study["jobs_per_setting"] > study["n_replicates"]:
        errors.append(
            f"selection_study.jobs_per_setting must be at most selection_study.n_replicates "
            f"({study['n_replicates']}); got {study['jobs_per_setting']}"
        )
    return errors


# Cross-key checks and the keys each one reads (skipped if the schema rejected one of them).
_CROSS_CHECKS = (
    (_min_rows_checks, ("simulation.n_test", "simulation.n_train", "models.cv_folds", "models.crossfit_folds")),
    (_duplicate_setting_checks, ("simulation.settings", "simulation.selection_settings")),
    (_survey_year_checks, ("acs.year", "acs.tasks")),
    (
        _coverage_checks,
        (
            "coverage.settings",
            "coverage.n_replicates",
            "coverage.n_replicates_r",
            "coverage.jobs_per_setting",
            "simulation.settings",
        ),
    ),
    (
        _bootstrap_memory_checks,
        ("evaluation.n_resamples", "resources.simulation.bootstrap.mem_mb", "resources.acs.bootstrap.mem_mb"),
    ),
    (_coverage_memory_checks, ("coverage.n_resamples", "resources.simulation.coverage.mem_mb")),
    (
        _selection_study_checks,
        (
            "selection_study.gammas",
            "selection_study.n_replicates",
            "selection_study.n_test",
            "selection_study.n_resamples",
            "selection_study.jobs_per_setting",
        ),
    ),
)


def _rejected(key: str, bad: set[str]) -> bool:
    """Whether the schema rejected ``key``, one of its parents or one of its children."""
    return (
        any(key == b or key.startswith(b + ".") or b.startswith(key + ".") for b in bad) or "the configuration" in bad
    )


# ---------------------------------------------------------------------------------------------
# Public API


def _read_yaml(path: Path) -> Any:
    """The YAML (or JSON) content of ``path``; a key given twice in one mapping is an error."""
    import yaml

    if not path.exists():
        raise FileNotFoundError(f"configuration file {path}: no such file")
    try:  # bounded: a FIFO or a device is refused, a file larger than the limit is not read
        text = read_bounded(path, MAX_CONFIG_BYTES, what=f"configuration file {path}").decode("utf-8-sig")
    except FileReadError as exc:
        raise ConfigError(str(exc)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"configuration file {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return read_yaml_unique_keys(text)
    except RecursionError:  # PyYAML composes nested lists recursively
        raise ConfigError(
            f"configuration file {path} is nested too deeply to read; give a flat list or mapping"
        ) from None
    except DuplicateKeyError as exc:
        key, first, second = exc.key, exc.first, exc.second
        raise ConfigError(
            f"configuration file {path} gives the key {key!r} twice (lines {first} and {second}); "
            "YAML would silently keep the last value: keep one"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"configuration file {path} is not valid YAML{where}: {exc}") from None


def check_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a YAML configuration file; it must hold a mapping of configuration keys, each key once.

    Snakemake's own loader rejects an empty file, or one that is not a mapping, with a message that
    does not name the file, and keeps the last value of a key given twice; the ``Snakefile`` calls
    this on ``config/config.yaml`` before its ``configfile:`` directive and on every ``--configfile``.

    Parameters
    ----------
    path : path-like
        A YAML (or JSON) file.

    Returns
    -------
    dict
        The file's content.

    Raises
    ------
    ConfigError
        If the file is not a regular file (a FIFO, a device), larger than
        :data:`disaggregated_eval.io.MAX_CONFIG_BYTES`, not UTF-8, empty, not valid YAML (the message
        gives the line), not a mapping, or gives a key twice in one mapping (the message gives the key
        and both lines).
    FileNotFoundError
        If the file does not exist.
    """
    p = Path(path)
    content = _read_yaml(p)
    if content is None:
        raise ConfigError(
            f"configuration file {p} is empty: it must map configuration keys to values "
            "(see config/README.md), e.g. 'evaluation: {n_resamples: 1000}'"
        )
    if not isinstance(content, dict):
        raise ConfigError(
            f"configuration file {p} must map configuration keys to values (see config/README.md); "
            f"got a {type(content).__name__}: {brief(content)}"
        )
    return content


def check_output_folders(folders: Sequence[str | os.PathLike[str]]) -> None:
    """Every folder the workflow writes into must be a folder, or not exist yet.

    Snakemake would otherwise fail in its first job with a long traceback (``NotADirectoryError``)
    when, say, a file named ``results`` sits in the working directory.

    Parameters
    ----------
    folders : sequence of path-like
        Output folders relative to the working directory (``results``, ``figures``, ...); each of
        their parents is checked too.

    Raises
    ------
    ConfigError
        Naming the path that exists and is not a folder.
    """
    for folder in folders:
        path = Path(folder)
        for prefix in [*reversed(path.parents[:-1]), path]:
            if prefix.exists() and not prefix.is_dir():
                raise ConfigError(
                    f"{prefix} exists and is not a folder: the workflow writes its outputs under {path}/; "
                    f"rename or move the file {prefix}, or run the workflow in another folder (--directory)"
                )


def validate_config(
    config: dict[str, Any],
    *,
    schema: str | os.PathLike[str] | Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Fill the defaults of the configuration and check it; raise :class:`ConfigError` listing every problem.

    Parameters
    ----------
    config : dict
        The merged Snakemake configuration; absent keys get their schema default (in place).
    schema : path-like or mapping, optional
        The schema (a file, or one returned by :func:`load_schema`); default :data:`SCHEMA_PATH`.

    Returns
    -------
    dict
        ``config``, with every default filled in.

    Raises
    ------
    ConfigError
        If any value is invalid. Each line names the key path (``simulation.n_train``), what was
        expected and the value found.
    """
    if not isinstance(config, dict):
        raise ConfigError(f"the configuration must be a mapping of keys to values; got {brief(config)}")
    for key, value in config.items():  # before anything walks, copies or prints a value (YAML aliases)
        try:
            check_nesting(value, f"the configuration key {brief(key, plain=True)}")
        except ValueError as exc:
            raise ConfigError(f"invalid configuration (1 problem(s)):\n  - {exc}") from None
    schema = dict(schema) if isinstance(schema, Mapping) else load_schema(schema)
    fill_defaults(config, schema)
    errors, bad = _schema_errors(config, schema)
    for check, keys in _CROSS_CHECKS:
        if not any(_rejected(k, bad) for k in keys):
            errors.extend(check(config))
    if errors:
        lines = "\n".join(f"  - {e}" for e in errors)
        raise ConfigError(f"invalid configuration ({len(errors)} problem(s)):\n{lines}")
    return config


def placeholder_warnings(default_resources: Sequence[str] | None) -> list[str]:
    """Warnings for default resources still set to :data:`PLACEHOLDER` (the shipped SLURM profile's
    partition), so that a dry run says so before any job is submitted to a partition that does not exist.

    Parameters
    ----------
    default_resources : sequence of str or None
        ``name=value`` items, as Snakemake holds them (``workflow.resource_settings.default_resources.args``).

    Returns
    -------
    list of str
        One line per such resource (empty when none is left).
    """
    found = []
    for item in default_resources or ():
        name, _, value = str(item).partition("=")
        if value.strip().strip("'\"") == PLACEHOLDER:
            found.append(name.strip())
    return [
        f"warning: default resource {name} is still {PLACEHOLDER!r} (the placeholder of profiles/slurm/profile.yaml): "
        f"every sbatch call would fail; set your site's value there, or give --default-resources {name}=<value>"
        for name in found
    ]
