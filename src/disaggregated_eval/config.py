"""Semantic validation of the workflow configuration (``config/config.yaml``).

The JSON schema (``workflow/schemas/config.schema.yaml``) documents every key and fills defaults;
this module adds the checks a schema cannot express well and gives messages that name the key path
and the bad value, e.g. ``simulation.n_train must be a positive integer; got -5``. The Snakefile calls
:func:`validate_config` at parse time, so a bad configuration stops the run before any job starts.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["ConfigError", "validate_config", "known_settings", "known_tasks", "HORIZONS", "STATES"]

#: Survey horizons offered by the Census Bureau (and folktables).
HORIZONS = ("1-Year", "5-Year")
#: State abbreviations with PUMS person files (folktables' ``state_list``).
STATES = (
    "AL AK AZ AR CA CO CT DE FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM "
    "NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY PR"
).split()

_STRUCTURE: dict[str, Any] = {
    "seed": None,
    "simulation": {
        "settings": None,
        "selection_settings": None,
        "n_train": None,
        "n_test": None,
        "oracle": {"n_monte_carlo": None, "n_bins": None},
    },
    "models": {"max_leaf_nodes": None, "cv_folds": None, "crossfit_folds": None},
    "evaluation": {
        "n_resamples": None,
        "confidence": None,
        "threshold": None,
        "preference_threshold": None,
        "batch_size": None,
    },
    "calibration": {"n_bins": None},
    "acs": {
        "data_root": None,
        "year": None,
        "horizon": None,
        "state": None,
        "tasks": None,
        "test_size": None,
        "download": None,
    },
    "resources": {
        "simulation": {"models": {}, "weights": {}, "oracle": {}, "bootstrap": {}},
        "acs": {"extract": {}, "models": {}, "weights": {}, "bootstrap": {}},
    },
}
_JOB_KEYS = ("threads", "mem_mb", "runtime")


class ConfigError(ValueError):
    """A configuration value is invalid; the message lists every problem with its key path."""


def known_settings() -> tuple[str, ...]:
    """Simulation setting ids of :data:`disaggregated_eval.simulate.SETTINGS`."""
    from disaggregated_eval import simulate

    return tuple(simulate.SETTINGS)


def known_tasks() -> tuple[str, ...]:
    """ACS dataset ids of :data:`disaggregated_eval.acs.TASKS`."""
    from disaggregated_eval import acs

    return tuple(acs.TASKS)


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


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


class _Checker:
    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config
        self.errors: list[str] = []

    def get(self, path: str) -> tuple[bool, Any]:
        node: Any = self.config
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return False, None
            node = node[part]
        return True, node

    def error(self, path: str, expected: str, value: Any) -> None:
        hint = ""
        if _looks_numeric(value):
            hint = (
                " (a string: Snakemake passes values nested inside --config as strings; set nested"
                " keys in a YAML file given with --configfile)"
            )
        self.errors.append(f"{path} must be {expected}; got {value!r}{hint}")

    def int_at_least(self, path: str, minimum: int) -> None:
        present, value = self.get(path)
        if present and not (_is_int(value) and value >= minimum):
            what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            self.error(path, what, value)

    def open_unit(self, path: str) -> None:
        present, value = self.get(path)
        if present and not (_is_real(value) and 0 < value < 1):
            self.error(path, "a number strictly between 0 and 1", value)

    def names(self, path: str, known: Iterable[str], *, allow_empty: bool) -> None:
        present, value = self.get(path)
        if not present:
            return
        known = tuple(known)
        if not isinstance(value, list) or (not value and not allow_empty):
            self.error(path, "a non-empty list of names" if not allow_empty else "a list of names", value)
            return
        for item in value:
            if item not in known:
                self.errors.append(f"{path} contains unknown name {item!r}; known: {', '.join(known)}")
        duplicates = sorted({str(v) for v in value if value.count(v) > 1})
        if duplicates:
            self.errors.append(f"{path} lists {', '.join(duplicates)} more than once; got {value!r}")

    def unknown_keys(self, node: Any, structure: Mapping[str, Any], prefix: str) -> None:
        if not isinstance(node, Mapping):
            self.error(prefix or "the configuration", "a mapping", node)
            return
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in structure:
                allowed = ", ".join(structure) if structure else ", ".join(_JOB_KEYS)
                if structure or key not in _JOB_KEYS:
                    self.errors.append(f"{path} is not a known setting (allowed here: {allowed}); got {value!r}")
                continue
            if isinstance(structure[key], Mapping):
                self.unknown_keys(value, structure[key], path)


def validate_config(
    config: Mapping[str, Any],
    *,
    settings: Iterable[str] | None = None,
    tasks: Iterable[str] | None = None,
) -> None:
    """Check the workflow configuration; raise :class:`ConfigError` listing every problem.

    Keys that are absent are skipped (the JSON schema fills their defaults, which are valid).

    Parameters
    ----------
    config : mapping
        The merged Snakemake configuration.
    settings : iterable of str, optional
        Known simulation setting ids; default :func:`known_settings`.
    tasks : iterable of str, optional
        Known ACS dataset ids; default :func:`known_tasks`.

    Raises
    ------
    ConfigError
        If any value is invalid. Each line names the key path (``simulation.n_train``), what was
        expected and the value found.
    """
    check = _Checker(config)
    check.unknown_keys(config, _STRUCTURE, "")

    present, seed = check.get("seed")
    if present and not (_is_int(seed) and seed >= 0):
        check.error("seed", "a non-negative integer", seed)

    known = tuple(settings) if settings is not None else known_settings()
    check.names("simulation.settings", known, allow_empty=False)
    check.names("simulation.selection_settings", known, allow_empty=True)
    for path in ("simulation.n_train", "simulation.n_test", "simulation.oracle.n_monte_carlo"):
        check.int_at_least(path, 1)
    check.int_at_least("simulation.oracle.n_bins", 2)

    present, grid = check.get("models.max_leaf_nodes")
    if present:
        if not isinstance(grid, list) or not grid:
            check.error("models.max_leaf_nodes", "a non-empty list of integers >= 2", grid)
        else:
            bad = [v for v in grid if not (_is_int(v) and v >= 2)]
            if bad:
                check.error("models.max_leaf_nodes", f"a list of integers >= 2 (bad entries {bad!r})", grid)
            elif len(set(grid)) != len(grid):
                check.error("models.max_leaf_nodes", "a list without repeated values", grid)
    check.int_at_least("models.cv_folds", 2)
    check.int_at_least("models.crossfit_folds", 2)

    check.int_at_least("evaluation.n_resamples", 1)
    for path in ("evaluation.confidence", "evaluation.threshold", "evaluation.preference_threshold"):
        check.open_unit(path)
    present, batch = check.get("evaluation.batch_size")
    if present and batch is not None and not (_is_int(batch) and batch >= 1):
        check.error("evaluation.batch_size", "null or a positive integer", batch)
    check.int_at_least("calibration.n_bins", 2)

    check.names("acs.tasks", tuple(tasks) if tasks is not None else known_tasks(), allow_empty=False)
    present, root = check.get("acs.data_root")
    if present and not (isinstance(root, str) and root.strip()):
        check.error("acs.data_root", "a non-empty folder path", root)
    check.int_at_least("acs.year", 2014)
    present, horizon = check.get("acs.horizon")
    if present and horizon not in HORIZONS:
        check.error("acs.horizon", f"one of {', '.join(HORIZONS)}", horizon)
    present, state = check.get("acs.state")
    if present and state not in STATES:
        check.error("acs.state", "a two-letter state abbreviation such as 'CA'", state)
    check.open_unit("acs.test_size")
    present, download = check.get("acs.download")
    if present and not isinstance(download, bool):
        check.error("acs.download", "true or false", download)

    for study, jobs in _STRUCTURE["resources"].items():
        for job in jobs:
            for key in _JOB_KEYS:
                check.int_at_least(f"resources.{study}.{job}.{key}", 1)

    # Cross-key checks: the folds must find rows of every group in every fold.
    n_test, n_train = check.get("simulation.n_test")[1], check.get("simulation.n_train")[1]
    cv, crossfit = check.get("models.cv_folds")[1], check.get("models.crossfit_folds")[1]
    if all(_is_int(v) and v >= 1 for v in (n_test, cv, crossfit)) and cv >= 2 and crossfit >= 2:
        needed = 10 * cv * crossfit
        if n_test < needed:
            check.errors.append(
                f"simulation.n_test must be at least 10 x models.cv_folds x models.crossfit_folds = "
                f"{needed} (the weight models P(A | R) are cross-fitted on the test set); got {n_test}"
            )
    if all(_is_int(v) and v >= 1 for v in (n_train, cv)) and cv >= 2 and n_train < 20 * cv:
        check.errors.append(
            f"simulation.n_train must be at least 20 x models.cv_folds = {20 * cv}; got {n_train}"
        )

    if check.errors:
        lines = "\n".join(f"  - {e}" for e in check.errors)
        raise ConfigError(f"invalid configuration ({len(check.errors)} problem(s)):\n{lines}")
