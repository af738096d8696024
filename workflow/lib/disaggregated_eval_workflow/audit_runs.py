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
which reads the header only; of a folder of Parquet files, as the command line reads it, every file's
footer). So a bad value stops the workflow before any job starts, naming the
run and the key. The structure (keys of the section, resources) is checked by
``workflow/schemas/audit.schema.yaml``.

Outputs are kept as the command line keeps them (``docs/design.md``, "The workflow's audit jobs"). A
job writes ``<out_dir>/<run>/<model>/`` through the command line's own path
(:func:`disaggregated_eval.audit.cli.run_audit`: the folder is checked first, then replaced atomically
only when the new output is complete), and the rule declares as its output only the job's *record*,
``<out_dir>/<run>/<model>.manifest.json``, a copy of the folder's ``manifest.json`` written after the
swap. Snakemake deletes a job's declared outputs before the job runs and when it fails; it never sees
the folder, so an error found in the data, a forced or edited rerun, an interrupted or killed job and
a folder holding the user's own files (refused, as by the command line) leave the earlier output
byte for byte as it was. A record whose folder is gone, or holds another audit's manifest, no longer
describes it: :func:`remove_stale_records` deletes it when the workflow is parsed, so the job runs
again; before that, :func:`check_job_outputs` refuses a run whose record or report copy path holds a
file the workflow did not write (Snakemake would delete it). ``out_dir`` is a relative path inside the workflow's working directory (no ``..``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from disaggregated_eval.audit.errors import UsageError
from disaggregated_eval.audit.options import option_fields, options_from_mapping, read_config_file
from disaggregated_eval.audit.outputs import MAX_MANIFEST_BYTES, TOOL, file_sha256
from disaggregated_eval.audit.text import terminal_text
from disaggregated_eval.validation import brief

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
    "RECORD_SUFFIX",
    "REPORT_SUFFIX",
    "audit_targets",
    "output_pattern",
    "report_pattern",
    "folder_pattern",
    "check_job_outputs",
    "remove_stale_records",
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
#: The job's record next to its folder: ``<out_dir>/<run>/<model>`` + this suffix (the rule's declared output).
RECORD_SUFFIX = ".manifest.json"
#: The copy of the folder's ``report.html`` next to it, ``<out_dir>/<run>/<model>`` + this suffix: the rule's
#: second declared output, which ``snakemake --report`` shows (``report()``, caption workflow/report/audit.rst).
REPORT_SUFFIX = ".report.html"
#: Run and model names (folder names): also the wildcard constraints of rule ``run_audit``.
SEGMENT_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_SEGMENT = re.compile(SEGMENT_PATTERN)  # whole names only (fullmatch: "$" would take a trailing newline)


def _segment(value: str, what: str) -> str:
    if not _SEGMENT.fullmatch(value) or (value == ALL_MODELS and what.startswith("score")):
        raise UsageError(
            f"{what} {value!r} is used as a folder name: use letters, digits, '_', '-' and '.' only "
            "(rename the column, or set compare_models: true)"
        )
    for suffix, kind in ((RECORD_SUFFIX, "records"), (REPORT_SUFFIX, "report copies")):
        if value.endswith(suffix):
            raise UsageError(
                f"{what} {brief(value)} is used as a folder name and ends in {suffix!r}, the ending of the audit jobs' "
                f"{kind}: rename it"
            )
    return value


def _out_dir(section: Mapping[str, Any]) -> str:
    """``out_dir`` of the section: a relative path inside the working directory, without a trailing ``/``."""
    value = str(section.get("out_dir", DEFAULT_OUT_DIR))
    path = PurePosixPath(value)
    if not value.strip() or path.is_absolute() or ".." in path.parts:
        raise UsageError(
            f"audit.out_dir {brief(value)}: give a folder inside the workflow's working directory, as a relative path "
            "without '..' (e.g. results/audit); to write elsewhere, run the workflow there (--directory) or make "
            "out_dir a symbolic link"
        )
    if "{" in value or "}" in value:
        raise UsageError(
            f"audit.out_dir {brief(value)}: '{{' and '}}' would be read by Snakemake as a wildcard; rename it"
        )
    return value.rstrip("/")


def audit_runs(section: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The jobs of an ``audit`` configuration section, by ``"<run>/<model>"``.

    Parameters
    ----------
    section : mapping or None
        ``config["audit"]`` after schema validation (``None`` or empty: no jobs).

    Returns
    -------
    dict
        ``"<run>/<model>"`` -> ``{"run", "model", "file", "option_files", "data_files", "out", "record",
        "report", "options"}``
        where ``out`` is the output folder, ``record`` the job's record and ``report`` its copy of the
        folder's report (the rule's declared outputs, module docstring), ``options`` the checked keyword arguments of :func:`disaggregated_eval.audit.audit`
        (``scores`` is the one model, or all of them with ``compare_models``) and ``option_files`` the
        files its :data:`FILE_OPTIONS` name (inputs of the job besides ``file``); ``data_files`` the
        Parquet files of a folder ``file`` (inputs too: Snakemake dates a folder by its own time, which
        an edit of a file inside does not change), empty for a file.

    Raises
    ------
    UsageError
        Naming the run and key: an unknown option, a value of the wrong type or out of range (the
        rules of ``audit()``), a missing file, a column the file's header lacks, a missing label,
        score or group, a run or score name that cannot be a folder name, an ``out_dir`` outside the
        working directory.
    """
    section = dict(section or {})
    out_dir = _out_dir(section)
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
        option_files = [str(merged[k]) for k in FILE_OPTIONS if merged.get(k) is not None]
        for key, path in [
            ("file", str(file)),
            *((k, str(merged[k])) for k in FILE_OPTIONS if merged.get(k) is not None),
        ]:
            _printable_path(f"{where}.{key}", path)
        _check_run(where, str(file), merged)
        data_files = _data_files(where, str(file))
        for model in models:
            options = dict(merged)
            if not compare:
                options["scores"] = [model]
            jobs[f"{run}/{model}"] = {
                "run": str(run),
                "model": model,
                "file": str(file),
                "option_files": option_files,
                "data_files": data_files,
                "out": f"{out_dir}/{run}/{model}",
                "record": f"{out_dir}/{run}/{model}{RECORD_SUFFIX}",
                "report": f"{out_dir}/{run}/{model}{REPORT_SUFFIX}",
                "options": options,
            }
    return jobs


def _printable_path(where: str, path: str) -> None:
    """Refuse a path that holds a character the terminal would run or hide (``text.UNSAFE_CATEGORIES``):
    Snakemake prints a job's input paths as they are."""
    if terminal_text(path) != path:
        raise UsageError(
            f"{where} {brief(path)}: holds control or invisible characters, which Snakemake would print raw on the "
            "terminal; rename the file"
        )


def _data_files(where: str, file: str) -> list[str]:
    """The Parquet files a folder's audit reads (none for a file), each printable (:func:`_printable_path`)."""
    if not os.path.isdir(file):
        return []
    from disaggregated_eval.audit.parquet_files import parquet_paths

    paths = [str(p) for p in parquet_paths(file)]  # walked already by _check_run: no error left to name
    for path in paths:
        _printable_path(f"{where}.file", path)
    return paths


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


def audit_code_files(root: str | os.PathLike[str] = ".", *, workdir: str | os.PathLike[str] | None = None) -> list[str]:
    """Source files an audit job runs: what its script imports, and what those import in turn.

    Found by the import walk of the other rules' code inputs
    (:func:`disaggregated_eval_workflow.code_files.script_files`) from the imports of
    :data:`AUDIT_SCRIPT`, so an edit of any library module the audit imports (directly or not, lazily
    or not) reruns the audit jobs, and no hand-written list can miss one.

    Parameters
    ----------
    root : path-like, default "."
        The workflow's folder (holding ``src/disaggregated_eval`` and ``workflow/scripts``).
    workdir : path-like, optional
        The workflow's working directory, which the paths are relative to (absolute for files outside
        it: the workflow used as a module); default ``root``.

    Returns
    -------
    list of str
        Paths relative to ``workdir`` (``src/disaggregated_eval/audit/core.py``, ...), sorted.
    """
    return code_files.script_files(Path(root) / AUDIT_SCRIPT, root=root, workdir=workdir)


def job_param(jobs: Mapping[str, Mapping[str, Any]], key: str):
    """Input / params function of the rule ``run_audit``: value ``key`` of the job of the wildcards."""

    def get(wildcards) -> Any:
        return jobs[f"{wildcards.run}/{wildcards.model}"][key]

    return get


def audit_targets(jobs: Mapping[str, Mapping[str, Any]]):
    """Input function of the target ``audit``: every job's record (the declared output of ``run_audit``).

    Raises (when Snakemake evaluates it, i.e. only if ``audit`` is requested) a ``ValueError`` naming
    the missing section if the configuration has no runs.
    """

    def get(wildcards) -> list[str]:
        if not jobs:
            raise ValueError(
                "no audits configured: add an `audit: runs:` section to the configuration "
                "(see examples/audit_compas.yaml and docs/audit.md)"
            )
        return [job["record"] for job in jobs.values()]

    return get


def output_pattern(section: Mapping[str, Any] | None) -> str:
    """The declared output of rule ``run_audit``, the job's record: ``<out_dir>/{run}/{model}.manifest.json``."""
    return folder_pattern(section) + RECORD_SUFFIX


def report_pattern(section: Mapping[str, Any] | None) -> str:
    """The second declared output of rule ``run_audit``, a copy of the folder's report:
    ``<out_dir>/{run}/{model}.report.html`` (shown by ``snakemake --report``).

    Examples
    --------
    >>> report_pattern({"out_dir": "res"})
    'res/{run}/{model}.report.html'
    """
    return folder_pattern(section) + REPORT_SUFFIX


def folder_pattern(section: Mapping[str, Any] | None) -> str:
    """The output folder of rule ``run_audit``, written by the job itself: ``<out_dir>/{run}/{model}``."""
    return f"{_out_dir(section or {})}/{{run}}/{{model}}"


def check_job_outputs(jobs: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse a run whose declared output paths hold a file this workflow did not write.

    Snakemake deletes a job's declared outputs (its record and report copy) before the job runs, so a
    file of the user's at either path would be deleted by a rerun. A file at the record's path is the
    workflow's when it is empty (``snakemake --touch``) or an audit's manifest; one at the report copy's
    path when it is empty or its SHA-256 is that of ``report.html`` in the record at the record's path or
    in the folder's ``manifest.json`` (the folder's report, or the one the record was copied with). Called
    by ``workflow/rules/audit.smk`` each time the workflow is parsed, before :func:`remove_stale_records`
    (which deletes a record that no longer describes its folder; the report copy is still recognised by
    it).

    Parameters
    ----------
    jobs : mapping
        :func:`audit_runs`'s result.

    Raises
    ------
    UsageError
        Naming the run and the file, and what to do: move the file, or choose another ``out_dir`` or
        run name.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "m.report.html").write_text("my own report")
    >>> job = {"run": "r", "out": str(root / "m"), "record": str(root / "m.manifest.json"),
    ...        "report": str(root / "m.report.html")}
    >>> try:
    ...     check_job_outputs({"r/m": job})
    ... except UsageError as exc:
    ...     print(str(exc).split(":")[0])
    audit.runs.r
    """
    for job in jobs.values():
        record, report, folder = Path(job["record"]), Path(job["report"]), Path(job["out"])
        kept = _read_bounded(record)
        if os.path.lexists(record) and (record.is_symlink() or kept is None or (kept and not _is_record(kept))):
            _refuse_foreign(job["run"], record, "not an audit's manifest")
        if not os.path.lexists(report):
            continue
        if report.is_symlink() or not report.is_file():
            _refuse_foreign(job["run"], report, "not a regular file")
        size = report.stat().st_size
        if size == 0:
            continue
        if size > MAX_REPORT_BYTES:  # every read is bounded: no report of an audit is this large
            _refuse_foreign(job["run"], report, f"{size:,} bytes, more than any audit's report ({MAX_REPORT_BYTES:,})")
        digest = file_sha256(report)
        listed = {_report_sha256(kept), _report_sha256(_read_bounded(folder / "manifest.json"))}
        if digest not in listed:
            _refuse_foreign(job["run"], report, f"not the report.html that {folder}/ or its record lists")


def _refuse_foreign(run: str, path: Path, why: str) -> None:
    raise UsageError(
        f"audit.runs.{run}: {path} holds a file this workflow did not write ({why}); Snakemake deletes a job's "
        "declared outputs before it runs, so the run is refused: move the file, or choose another audit.out_dir "
        "or run name"
    )


def _report_sha256(manifest: bytes | None) -> str | None:
    """The SHA-256 of ``report.html`` that an audit's manifest lists, or None."""
    try:
        files = json.loads(manifest).get("files") if manifest else None
    except (ValueError, AttributeError):
        return None
    digest = files.get("report.html") if isinstance(files, dict) else None
    return digest if isinstance(digest, str) else None


def remove_stale_records(jobs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Delete the records that no longer describe their folder, so that their jobs run again.

    A record is stale when its folder has no ``manifest.json`` (the folder was deleted or moved) or when
    the record is not empty and differs from that manifest (another audit, e.g. ``disagg-eval audit
    --out`` by hand, rewrote the folder). An empty record (``snakemake --touch``) is kept while the folder
    has a manifest; a file at a record's path that is not an audit's manifest (nor empty) is not this
    workflow's and is left alone, and so is one larger than :data:`MAX_RECORD_BYTES`. Called by
    ``workflow/rules/audit.smk`` each time the workflow is parsed; only records are deleted, never a
    folder.

    Parameters
    ----------
    jobs : mapping
        :func:`audit_runs`'s result.

    Returns
    -------
    list of str
        One line per deleted record, saying why.

    Examples
    --------
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "m.manifest.json").write_text('{"tool": "disagg-eval audit"}')  # its folder root/m is gone
    >>> lines = remove_stale_records({"r/m": {"out": str(root / "m"), "record": str(root / "m.manifest.json")}})
    >>> lines[0].endswith("has no manifest.json (the folder was moved or deleted); its audit runs again")
    True
    """
    lines = []
    for job in jobs.values():
        record, folder = Path(job["record"]), Path(job["out"])
        kept = _read_bounded(record)
        if kept is None or (kept and not _is_record(kept)):  # none, or a file this workflow did not write
            continue
        manifest = _read_bounded(folder / "manifest.json")
        if manifest is None:
            why = f"{folder}/ has no manifest.json (the folder was moved or deleted)"
        elif not kept or kept == manifest:
            continue
        else:
            why = f"{folder}/manifest.json differs from it (another audit wrote the folder)"
        try:
            record.unlink()
        except FileNotFoundError:
            continue
        lines.append(f"{record}: deleted, as {why}; its audit runs again")
    return lines


#: Largest record (or folder manifest) read when the workflow is parsed; an audit's manifest is a few KB.
MAX_RECORD_BYTES = MAX_MANIFEST_BYTES
#: Largest report copy :func:`check_job_outputs` reads to compare with the record's hash (larger: not this
#: workflow's; an audit's report with its figures embedded is a few MB).
MAX_REPORT_BYTES = 1 << 30


def _read_bounded(path: Path) -> bytes | None:
    """The bytes of the regular file ``path`` if it has at most :data:`MAX_RECORD_BYTES`, else None."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_RECORD_BYTES:
            return None
        with path.open("rb") as handle:
            data = handle.read(MAX_RECORD_BYTES + 1)
    except OSError:
        return None
    return data if len(data) <= MAX_RECORD_BYTES else None


def _is_record(data: bytes) -> bool:
    """Whether ``data`` is an audit's manifest (what a record copies)."""
    try:
        content = json.loads(data)
    except ValueError:
        return False
    return isinstance(content, dict) and content.get("tool") == TOOL
