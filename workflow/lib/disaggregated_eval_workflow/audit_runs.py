"""The ``audit`` section of a workflow configuration: one audit job per listed file and model.

``snakemake --cores N audit --configfile audit.yaml`` reads a section like::

    audit:
      out_dir: results/audit            # outputs under <out_dir>/<run>/<model>/
      defaults:                         # options shared by every run (names as in docs/audit.md)
        n_resamples: 10000
      resources: {threads: 1, mem_mb: 4000, runtime: 60}
      runs:
        compas:                         # a run: one input file, its columns and options
          file: examples/data/compas.csv
          label: two_year_recid
          scores: [compas_score]
          groups: [race, sex]
          controls: [none, Y, R]
        adult:
          config: examples/adult.yaml   # or the options of a ``disagg-eval audit --config`` file

Each run becomes one job per score column (model), so audits of many files and models run in
parallel, locally or through a cluster profile; with ``compare_models: true`` a run stays one job
with all its models, compared with the first (``vs_model`` rows), in ``<out_dir>/<run>/all_models``.
Options are merged as ``defaults`` < the run's ``config`` file < the run's own keys, and checked by
the same code as the command line and :func:`disaggregated_eval.audit.audit`: their types by
:func:`disaggregated_eval.audit.options.options_from_mapping`, their ranges and cross-option rules by
:func:`disaggregated_eval.audit.options.resolve_options` (one home for the option rules), and the
file's header for every column named (:func:`disaggregated_eval.audit.loading.check_file_columns`,
which reads the header only). So a bad value stops the workflow before any job starts, naming the
run and the key, and no earlier result is deleted by a job that would fail on its options. The
structure (keys of the section, resources) is checked by ``workflow/schemas/audit.schema.yaml``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from disaggregated_eval.audit.errors import UsageError
from disaggregated_eval.audit.options import option_fields, options_from_mapping, read_config_file

from . import code_files

__all__ = [
    "RUN_KEYS",
    "FILE_OPTIONS",
    "ALL_MODELS",
    "DEFAULT_OUT_DIR",
    "AUDIT_SCRIPT",
    "audit_runs",
    "audit_code_files",
    "job_param",
    "audit_targets",
    "output_pattern",
]

#: Keys of a run besides the audit options.
RUN_KEYS: tuple[str, ...] = ("file", "config", "compare_models")
#: Audit options that name a file the audit reads (``population_margins``): inputs of the job, so an edit
#: of the file reruns it. Read from the options' own table (their placeholder ``FILE``), not listed twice.
FILE_OPTIONS: tuple[str, ...] = tuple(f.name for f in option_fields() if f.metadata.get("metavar") == "FILE")
#: The ``model`` path segment of a run with ``compare_models: true``.
ALL_MODELS = "all_models"
DEFAULT_OUT_DIR = "results/audit"
#: The script of rule ``run_audit``, relative to the workflow's folder.
AUDIT_SCRIPT = "workflow/scripts/run_audit.py"
_SEGMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _segment(value: str, what: str) -> str:
    if not _SEGMENT.match(value) or (value == ALL_MODELS and what.startswith("score")):
        raise UsageError(
            f"{what} {value!r} is used as a folder name: use letters, digits, '_', '-' and '.' only "
            "(rename the column, or set compare_models: true)"
        )
    return value


def audit_runs(section: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The jobs of an ``audit`` configuration section, by ``"<run>/<model>"``.

    Parameters
    ----------
    section : mapping or None
        ``config["audit"]`` after schema validation (``None`` or empty: no jobs).

    Returns
    -------
    dict
        ``"<run>/<model>"`` -> ``{"run", "model", "file", "option_files", "out", "options"}`` where
        ``options`` are the checked keyword arguments of :func:`disaggregated_eval.audit.audit`
        (``scores`` is the one model, or all of them with ``compare_models``) and ``option_files`` the
        files its :data:`FILE_OPTIONS` name (inputs of the job besides ``file``).

    Raises
    ------
    UsageError
        Naming the run and key: an unknown option, a value of the wrong type or out of range (the
        rules of ``audit()``), a missing file, a column the file's header lacks, a missing label,
        score or group, a run or score name that cannot be a folder name.
    """
    section = dict(section or {})
    out_dir = str(section.get("out_dir", DEFAULT_OUT_DIR))
    defaults = options_from_mapping(section.get("defaults") or {}, source="audit.defaults", allow=())
    jobs: dict[str, dict[str, Any]] = {}
    for run, spec in (section.get("runs") or {}).items():
        where = f"audit.runs.{run}"
        _segment(str(run), "run name")
        if not isinstance(spec, Mapping):
            raise UsageError(f"{where} must be a mapping of options; got {spec!r}")
        spec = dict(spec)
        compare = spec.pop("compare_models", False)
        if not isinstance(compare, bool):
            raise UsageError(f"{where}.compare_models must be true or false; got {compare!r}")
        from_file = read_config_file(spec.pop("config"), what=f"{where}.config") if "config" in spec else {}
        own = options_from_mapping(spec, source=where, allow=("file",))
        merged = {**defaults, **from_file, **own}
        merged.pop("out", None)  # the workflow chooses the folder
        file = merged.pop("file", None)
        if not file:
            raise UsageError(f"{where}: missing 'file' (the table to audit)")
        missing = [k for k in ("label", "scores", "groups") if not merged.get(k)]
        if missing:
            raise UsageError(f"{where}: missing {', '.join(missing)}")
        models = [ALL_MODELS] if compare else [_segment(s, f"score column of {where}") for s in merged["scores"]]
        _check_run(where, str(file), merged)
        option_files = [str(merged[k]) for k in FILE_OPTIONS if merged.get(k) is not None]
        for model in models:
            options = dict(merged)
            if not compare:
                options["scores"] = [model]
            jobs[f"{run}/{model}"] = {
                "run": str(run),
                "model": model,
                "file": str(file),
                "option_files": option_files,
                "out": f"{out_dir}/{run}/{model}",
                "options": options,
            }
    return jobs


def _check_run(where: str, file: str, options: Mapping[str, Any]) -> None:
    """Every option of a run in range (the rules of ``audit()``) and every column it names in the file's
    header, before any job starts.

    ``n_threads`` is checked as a positive integer only: its upper bound is the CPUs of the machine
    that runs the job, which a cluster's login node does not know.
    """
    from disaggregated_eval.audit.errors import AuditInputError
    from disaggregated_eval.audit.inputs import InputSpec
    from disaggregated_eval.audit.loading import InputFileError, check_file_columns
    from disaggregated_eval.audit.options import resolve_options  # numba: only when runs exist

    checked = dict(options)
    threads = checked.pop("n_threads", None)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
        raise UsageError(f"{where}: n_threads must be a positive integer; got {threads!r}")
    try:
        resolved = resolve_options(None, checked)
    except AuditInputError as exc:
        raise UsageError(f"{where}: {exc}") from None
    try:
        check_file_columns(file, InputSpec.from_options(resolved).columns)
    except InputFileError as exc:
        raise UsageError(f"{where}: {exc}") from None


def audit_code_files(root: str | os.PathLike[str] = ".") -> list[str]:
    """Source files an audit job runs: what its script imports, and what those import in turn.

    Found by the import walk of the other rules' code inputs
    (:func:`disaggregated_eval_workflow.code_files.script_files`) from the imports of
    :data:`AUDIT_SCRIPT`, so an edit of any library module the audit imports (directly or not, lazily
    or not) reruns the audit jobs, and no hand-written list can miss one.

    Parameters
    ----------
    root : path-like, default "."
        The workflow's folder (holding ``src/disaggregated_eval`` and ``workflow/scripts``).

    Returns
    -------
    list of str
        Paths relative to ``root`` (``src/disaggregated_eval/audit/core.py``, ...), sorted.
    """
    return code_files.script_files(Path(root) / AUDIT_SCRIPT, root=root)


def job_param(jobs: Mapping[str, Mapping[str, Any]], key: str):
    """Input / params function of the rule ``run_audit``: value ``key`` of the job of the wildcards."""

    def get(wildcards) -> Any:
        return jobs[f"{wildcards.run}/{wildcards.model}"][key]

    return get


def audit_targets(jobs: Mapping[str, Mapping[str, Any]]):
    """Input function of the target ``audit``: every job's output folder.

    Raises (when Snakemake evaluates it, i.e. only if ``audit`` is requested) a ``ValueError`` naming
    the missing section if the configuration has no runs.
    """

    def get(wildcards) -> list[str]:
        if not jobs:
            raise ValueError(
                "no audits configured: add an `audit: runs:` section to the configuration "
                "(see examples/audit_compas.yaml and docs/audit.md)"
            )
        return [job["out"] for job in jobs.values()]

    return get


def output_pattern(section: Mapping[str, Any] | None) -> str:
    """The output folder of rule ``run_audit``: ``<out_dir>/{run}/{model}``."""
    out_dir = str((section or {}).get("out_dir", DEFAULT_OUT_DIR)).rstrip("/")
    return f"{out_dir}/{{run}}/{{model}}"
