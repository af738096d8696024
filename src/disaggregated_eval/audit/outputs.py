"""Writing an audit's output folder atomically: tables, figures, ``report.html``, ``manifest.json``.

Everything is first written to a temporary folder next to the target and renamed into place only
when every file is complete, so nothing appears under ``--out`` unless the whole audit succeeded;
a failure (or Ctrl-C) removes the temporary folder. An existing target is replaced only if it is
empty or an earlier audit's folder (it holds a ``manifest.json`` written by this tool): any other
folder is refused before the audit starts (:func:`check_out_dir`).

Layout (``docs/audit.md``, "Output files")::

    OUT/slices.parquet, slices.csv
    OUT/comparisons.parquet, comparisons.csv
    OUT/controlled.parquet, controlled.csv
    OUT/figures/forest_<metric>.png|svg      one per metric
    OUT/figures/controlled_<control>.png|svg one per control variable
    OUT/report.html                      self-contained (figures embedded)
    OUT/manifest.json                    input SHA-256, options, seed, versions, file checksums
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import shutil
import tempfile
from dataclasses import asdict
from importlib import metadata
from pathlib import Path
from typing import Any

from .. import io as project_io

__all__ = [
    "OutputDirError",
    "TOOL",
    "TABLES",
    "check_out_dir",
    "file_sha256",
    "package_versions",
    "input_record",
    "build_manifest",
    "write_outputs",
]

#: Written into every manifest; marks a folder as an audit's output (safe to replace).
TOOL = "disagg-eval audit"
#: Table name -> attribute of AuditResult.
TABLES = ("slices", "comparisons", "controlled")
_PACKAGES = (
    "disaggregated-eval", "numpy", "pandas", "scipy", "scikit-learn", "statsmodels", "numba",
    "matplotlib", "seaborn", "pyarrow",
)  # fmt: skip


class OutputDirError(ValueError):
    """The output folder cannot be used (exists with other content, or is a file)."""


def _is_audit_dir(path: Path) -> bool:
    manifest = path / "manifest.json"
    if not manifest.is_file():
        return False
    try:
        return json.loads(manifest.read_text(encoding="utf-8")).get("tool") == TOOL
    except (OSError, ValueError, AttributeError):
        return False


def check_out_dir(out_dir: str | os.PathLike[str]) -> Path:
    """Check that ``out_dir`` can receive an audit, before any work is done.

    Returns
    -------
    pathlib.Path
        The folder (it may not exist yet).

    Raises
    ------
    OutputDirError
        If ``out_dir`` is a file, a non-empty folder that is not an earlier audit's output, or its
        parent folder cannot be created or written to.
    """
    target = Path(out_dir)
    if target.exists() and not target.is_dir():
        raise OutputDirError(f"--out {target}: is a file; expected a folder for the audit's outputs")
    if target.is_dir() and any(target.iterdir()) and not _is_audit_dir(target):
        raise OutputDirError(
            f"--out {target}: the folder exists and is not an earlier audit's output (no manifest.json "
            "written by disagg-eval); choose a new or empty folder"
        )
    parent = target.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"--out {target}: cannot create the parent folder {parent} ({exc.strerror})") from exc
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputDirError(f"--out {target}: the parent folder {parent} is not writable")
    return target


def file_sha256(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def package_versions() -> dict[str, str]:
    """Versions of Python and of the packages an audit's numbers and figures depend on."""
    versions = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    return value


def input_record(input_path: str | os.PathLike[str] | None) -> dict | None:
    """Path, name, size and SHA-256 of the audited file (``None`` without a file)."""
    if input_path is None:
        return None
    path = Path(input_path)
    return {"path": str(input_path), "name": path.name, "sha256": file_sha256(path),
            "size_bytes": path.stat().st_size}  # fmt: skip


def build_manifest(result: Any, *, source: dict | None, files: dict[str, str]) -> dict:
    """The content of ``manifest.json`` (see :func:`write_outputs`); ``source`` from :func:`input_record`."""
    options = _jsonable(asdict(result.options))
    return {
        "tool": TOOL,
        "input": source,
        "n_rows": int(result.n_rows),
        "seed": int(result.options.seed),
        "options": options,
        "notes": list(result.notes),
        "tables": {name: len(getattr(result, name)) for name in TABLES},
        "versions": package_versions(),
        "files": dict(sorted(files.items())),
    }


def _make_tmp_dir(target: Path) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.resolve().parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)
    return tmp


def _swap_in(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target``; an existing (checked) target is moved aside first, then removed."""
    old = None
    if target.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".old", dir=target.resolve().parent))
        os.rmdir(old)
        os.replace(target, old)
    try:
        os.replace(tmp, target)
    except BaseException:
        if old is not None:
            os.replace(old, target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def write_outputs(
    result: Any,
    out_dir: str | os.PathLike[str],
    *,
    input_path: str | os.PathLike[str] | None = None,
    summary: str | None = None,
    progress: Any = None,
) -> Path:
    """Write the audit's output folder atomically (``AuditResult.write``).

    Parameters
    ----------
    result : AuditResult
    out_dir : path
        Target folder; checked with :func:`check_out_dir` (an earlier audit's folder is replaced).
    input_path : path, optional
        The audited file: its path, size and SHA-256 go into ``manifest.json``.
    summary : str, optional
        Terminal summary shown in the report; default :func:`disaggregated_eval.audit.summary.summary_text`.
    progress : callable, optional
        ``progress(stage, done, total)`` after each file group.

    Returns
    -------
    pathlib.Path
        The output folder.

    Raises
    ------
    OutputDirError
        If ``out_dir`` cannot be used (nothing is written).
    """
    from . import plots, report
    from .summary import summary_text

    target = check_out_dir(out_dir)
    summary = summary if summary is not None else summary_text(result, input_path=input_path)
    tmp = _make_tmp_dir(target)
    rendering = None
    try:
        # Worker processes draw the figures while this process writes the tables (plots.start_rendering).
        rendering = plots.start_rendering(result)
        steps = len(TABLES) + 3
        step = 0

        def tick() -> None:
            nonlocal step
            step += 1
            if progress is not None:
                progress("writing outputs", step, steps)

        for name in TABLES:
            table = getattr(result, name)
            project_io.write_table(table, tmp / f"{name}.parquet")
            project_io.write_table(table, tmp / f"{name}.csv")
            tick()
        figures = rendering.result()
        (tmp / "figures").mkdir()
        for name, (_, images) in figures.items():
            for fmt, data in images.items():
                (tmp / "figures" / f"{name}.{fmt}").write_bytes(data)
        tick()
        files = {p.relative_to(tmp).as_posix(): file_sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        source = input_record(input_path)
        preliminary = build_manifest(result, source=source, files=files)
        page = report.render_html(result, figures=figures, summary=summary, manifest=preliminary,
                                  input_path=input_path)  # fmt: skip
        (tmp / "report.html").write_text(page, encoding="utf-8")
        tick()
        files["report.html"] = file_sha256(tmp / "report.html")
        manifest = build_manifest(result, source=source, files=files)
        project_io.write_json(manifest, tmp / "manifest.json")
        tick()
        _swap_in(tmp, target)
    except BaseException:
        if rendering is not None:
            rendering.close(abort=True)
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
        raise
    return target
