"""Writing an audit's output folder atomically: tables, figures, ``report.html``, ``manifest.json``.

Everything is first written to a temporary folder next to the target, ``.<out>.<pid>-<token>.tmp``,
and renamed into place only when every file is complete, so nothing appears under ``--out`` unless
the whole audit succeeded; a failure, Ctrl-C or SIGTERM (which the command line turns into the same
path) removes the temporary folder. A process killed outright (SIGKILL, a power cut) leaves it: the
next audit writing next to it removes every such folder whose process no longer runs
(:func:`disaggregated_eval.io.remove_stale_temporaries`), and the same for ``.old`` folders (an earlier
output moved aside for the instant of the swap). A process killed in that very instant, between the
swap's two renames, leaves no ``--out`` and the earlier output complete in its ``.old`` folder: the next
audit (its first check, :func:`check_out_dir`) renames it back, with a warning, before anything else.

An existing target is replaced only if it is empty or an earlier audit's folder holding nothing but
what that audit wrote, unmodified: its ``manifest.json`` (written by this tool) lists every other file
with its SHA-256. A folder with other files (a ``notes.md`` the user added), or whose listed files were
modified, is refused before the audit starts, naming the files (:func:`check_out_dir`), and checked
again just before the swap. ``--out`` may be a symbolic link to a folder: the folder it points to is
replaced and the link kept. The current folder, or one that contains it, is refused.

CSV files are for spreadsheets, which run a cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a
carriage return as a formula: such text cells (a column or level name from the data) are written
with a leading ``'`` (:func:`csv_safe`, OWASP's advice on CSV injection); numeric columns are
untouched and the parquet files keep every value as it is.

Layout (``docs/audit.md``, "Output files")::

    OUT/slices.parquet, slices.csv
    OUT/comparisons.parquet, comparisons.csv
    OUT/controlled.parquet, controlled.csv
    OUT/fairness.parquet, fairness.csv           the fairness summary
    OUT/calibration.parquet, calibration.csv     observed rate per score bin and slice
    OUT/calibration_summary.parquet, .csv        ECE and observed/expected ratio per slice
    OUT/thresholds.parquet, thresholds.csv       rates per slice across --thresholds (empty without)
    OUT/detectability.parquet, .csv              minimum detectable differences, rows needed
    OUT/figures/forest_<metric>.png|svg      one per metric
    OUT/figures/controlled_<control>.png|svg one per control variable
    OUT/figures/calibration_<family>.png|svg one per family of slices (every model a panel)
    OUT/figures/thresholds_<family>.png|svg  one per family (and model), with --thresholds
    OUT/report.html                      self-contained (figures embedded)
    OUT/manifest.json                    input SHA-256, options, seed, versions, file checksums
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import platform
import shutil
import warnings
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any

import pandas as pd

from .. import io as project_io
from .columns import ANALYSIS_TABLES
from .errors import AuditInputError

__all__ = [
    "OutputDirError",
    "FigureWarning",
    "OutputWarning",
    "TOOL",
    "MAX_MANIFEST_BYTES",
    "TABLES",
    "FORMULA_PREFIXES",
    "check_out_dir",
    "csv_safe",
    "file_sha256",
    "package_versions",
    "input_record",
    "input_fingerprint",
    "build_manifest",
    "write_outputs",
]

#: Written into every manifest; marks a folder as an audit's output (safe to replace).
TOOL = "disagg-eval audit"
#: Largest manifest read to recognise an earlier audit's folder (an audit's manifest is a few KB): a larger file
#: named manifest.json is not this tool's, and is never read whole (every read is bounded).
MAX_MANIFEST_BYTES = 1 << 24
#: Tables written (each an attribute of AuditResult): the three core tables, then the analyses'
#: (``columns.ANALYSIS_TABLES``: fairness, calibration, calibration_summary, thresholds, detectability, selection).
TABLES = ("slices", "comparisons", "controlled", *ANALYSIS_TABLES)
#: First characters that make a spreadsheet read a CSV cell as a formula (OWASP, "CSV Injection").
FORMULA_PREFIXES: tuple[str, ...] = ("=", "+", "-", "@", "\t", "\r")
_PACKAGES = (
    "disaggregated-eval", "numpy", "pandas", "scipy", "scikit-learn", "statsmodels", "numba",
    "matplotlib", "pyarrow",
)  # fmt: skip
_SHOW = 5  # files named in a message


class OutputWarning(UserWarning):
    """Something happened to ``--out`` while the audit ran (another audit wrote it); the output is complete."""


class FigureWarning(UserWarning):
    """A figure was left out or draws a box for a character no installed font has (the tables are complete)."""


class OutputDirError(ValueError):
    """The output folder cannot be used (holds other files, is a file, is the current folder, ...)."""


def _where(out_dir: Any) -> str:
    return f"--out {os.fspath(out_dir)}"


def _destination(out_dir: str | os.PathLike[str]) -> Path:
    """The folder that will be replaced: ``out_dir`` with symbolic links resolved, checked to be usable."""
    text = os.fspath(out_dir)
    if not str(text).strip():
        raise OutputDirError(f"--out {str(text)!r} is empty: give the output folder's name (e.g. --out audit)")
    dest = Path(os.path.realpath(text))
    cwd = Path(os.path.realpath(os.getcwd()))
    if dest == cwd or dest in cwd.parents:
        which = "the current folder" if dest == cwd else f"a folder that contains the current folder ({cwd})"
        raise OutputDirError(
            f"{_where(out_dir)}: is {which}; the output folder is replaced as a whole, so give a new folder "
            "(e.g. --out audit)"
        )
    return dest


def _listed_files(manifest: Path) -> dict[str, str] | None:
    """``files`` of an audit's manifest (relative path -> SHA-256), or None if not this tool's manifest."""
    try:
        with open(manifest, "rb") as handle:
            raw = handle.read(MAX_MANIFEST_BYTES + 1)
        if len(raw) > MAX_MANIFEST_BYTES:
            return None
        content = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(content, dict) or content.get("tool") != TOOL:
        return None
    files = content.get("files")
    if not isinstance(files, dict):
        return {}
    return {str(k): str(v) for k, v in files.items()}


def _names(paths: list[str]) -> str:
    return ", ".join(paths[:_SHOW]) + (f" and {len(paths) - _SHOW} more" if len(paths) > _SHOW else "")


def _check_replaceable(out_dir: Any, dest: Path) -> None:
    """Refuse to replace ``dest`` unless it is empty or holds only an earlier audit's unmodified files."""
    found: list[str] = []  # relative POSIX paths; folders end in "/"
    for root, dirs, files in os.walk(dest):
        rel = Path(root).relative_to(dest)
        for d in list(dirs):
            if os.path.islink(os.path.join(root, d)):  # never followed
                files.append(d)
                dirs.remove(d)
            else:
                found.append((rel / d).as_posix() + "/")
        found.extend((rel / f).as_posix() for f in files)
    if not found:
        return
    manifest = dest / "manifest.json"
    listed = _listed_files(manifest) if manifest.is_file() and not manifest.is_symlink() else None
    if listed is None:
        raise OutputDirError(
            f"{_where(out_dir)}: the folder exists and is not an earlier audit's output (no manifest.json written "
            "by disagg-eval); choose a new or empty folder"
        )
    mine = {n for n in listed if not PurePosixPath(n).is_absolute() and ".." not in PurePosixPath(n).parts}
    allowed = mine | {"manifest.json"}
    allowed |= {p.as_posix() + "/" for n in mine for p in PurePosixPath(n).parents if p != PurePosixPath(".")}
    others = sorted(f for f in found if f not in allowed or os.path.islink(dest / f.rstrip("/")))
    if others:
        raise OutputDirError(
            f"{_where(out_dir)}: holds files that the earlier audit did not write: {_names(others)}; an audit's "
            "folder is replaced only when it holds nothing else: move them, or choose another folder"
        )
    modified = sorted(n for n in mine if (dest / n).is_file() and file_sha256(dest / n) != listed[n])
    if modified:
        raise OutputDirError(
            f"{_where(out_dir)}: files of the earlier audit were changed since it wrote them (their SHA-256 differs "
            f"from manifest.json): {_names(modified)}; move them, or choose another folder"
        )


def _is_complete_output(folder: Path) -> bool:
    """Whether ``folder`` holds an audit's complete, unmodified output: its manifest, every file the manifest
    lists with its SHA-256, and nothing else."""
    manifest = folder / "manifest.json"
    listed = _listed_files(manifest) if manifest.is_file() and not manifest.is_symlink() else None
    if not listed:
        return False
    try:
        _check_replaceable(folder, folder)
    except OutputDirError:
        return False
    return all((folder / name).is_file() for name in listed)


def _is_empty(folder: Path) -> bool:
    with os.scandir(folder) as entries:
        return next(entries, None) is None


def _restore_interrupted_swap(out_dir: Any, dest: Path) -> Path | None:
    """Put back an earlier output that an audit killed in the middle of its swap left aside.

    Under :func:`_swap_lock`. :func:`_swap_in` renames the earlier output to ``.<out>.<pid>-<token>.old``,
    then the new one to ``dest``: a process killed between the two renames (SIGKILL, a power cut) leaves
    ``dest`` missing and the earlier output, complete, in that folder. When ``dest`` is missing (or an empty
    folder, made in its place since) and such a folder of a process that no longer runs holds a complete, unmodified audit output
    (:func:`_is_complete_output`), the newest one is renamed back to ``dest``, with an
    :class:`OutputWarning` that says so. A ``.old`` folder beside an existing ``dest`` is the output that
    a finished swap replaced (its removal was cut short): it is removed, as before, by :func:`write_outputs`.

    Returns
    -------
    pathlib.Path or None
        The folder that was restored, or None.
    """
    empty = dest.is_dir() and not dest.is_symlink() and _is_empty(dest)
    if os.path.lexists(dest) and not empty:
        return None
    for old in reversed(project_io.stale_temporaries(dest, suffix=".old")):
        if old.is_symlink() or not old.is_dir() or not _is_complete_output(old):
            continue
        if empty:  # an empty folder made in its place holds nothing
            os.rmdir(dest)
        os.replace(old, dest)
        warnings.warn(
            f"{_where(out_dir)}: restored the earlier audit's output from {old.name}, where an audit that was "
            "killed while it replaced the folder had moved it; the folder is as that earlier audit wrote it",
            OutputWarning,
            stacklevel=4,
        )
        return old
    return None


def _check_not_inside_an_output(out_dir: Any, dest: Path) -> None:
    """Refuse an output folder inside an earlier audit's output: that folder would then hold files its audit did
    not write, and a later audit writing it would be refused (or, were it not, would remove this one)."""
    for folder in dest.parents:
        manifest = folder / "manifest.json"
        if manifest.is_file() and not manifest.is_symlink() and _listed_files(manifest):
            raise OutputDirError(
                f"{_where(out_dir)}: is inside {folder}, an earlier audit's output folder (its manifest.json lists its "
                "files); the folder would then hold files its audit did not write: give a folder outside it"
            )


def check_out_dir(out_dir: str | os.PathLike[str]) -> Path:
    """Check that ``out_dir`` can receive an audit, before any work is done (module docstring).

    An earlier output that an audit killed in the middle of its swap left aside is renamed back first
    (:func:`_restore_interrupted_swap`, with an :class:`OutputWarning`), so that it is checked, and kept,
    like any earlier output.

    Returns
    -------
    pathlib.Path
        The folder as given (it may not exist yet).

    Raises
    ------
    OutputDirError
        If ``out_dir`` is empty, the current folder or one containing it, a file, inside an earlier audit's
        output folder, a folder holding anything but an earlier audit's unmodified outputs (the message names the other or modified
        files), or its parent folder cannot be created or written to.
    """
    dest = _destination(out_dir)
    target = Path(out_dir)
    if dest.exists() and not dest.is_dir():
        raise OutputDirError(f"{_where(out_dir)}: is a file; expected a folder for the audit's outputs")
    _check_not_inside_an_output(out_dir, dest)
    parent = dest.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputDirError(f"{_where(out_dir)}: cannot create the parent folder {parent} ({exc.strerror})") from exc
    with _swap_lock(dest):  # not while another audit swaps its output in
        _restore_interrupted_swap(out_dir, dest)
        if dest.is_dir():
            _check_replaceable(out_dir, dest)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputDirError(f"{_where(out_dir)}: the parent folder {parent} is not writable")
    return target


def csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with text cells that a spreadsheet would run as a formula prefixed with ``'``.

    A text cell starting with one of :data:`FORMULA_PREFIXES` (``=``, ``+``, ``-``, ``@``, tab,
    carriage return) gets a leading single quote, as OWASP recommends against CSV injection; numeric
    and boolean columns, and other cells, are unchanged. So does a column name starting so (an
    attribute's level column is named after the group column). The input is not modified.

    Examples
    --------
    >>> safe = csv_safe(pd.DataFrame({"-sex": ["=1+1", "F"], "n": [-1, 2]}))
    >>> list(safe.columns), list(safe["'-sex"]), list(safe["n"])
    (["'-sex", 'n'], ["'=1+1", 'F'], [-1, 2])
    """
    out = frame
    names = [f"'{c}" if isinstance(c, str) and c.startswith(FORMULA_PREFIXES) else c for c in frame.columns]
    if names != list(frame.columns):
        out = frame.set_axis(names, axis=1)
        frame = out
    for column in frame.columns:
        values = frame[column]
        if not (values.dtype == object or pd.api.types.is_string_dtype(values.dtype)):
            continue
        risky = values.map(lambda v: isinstance(v, str) and v.startswith(FORMULA_PREFIXES)).to_numpy(dtype=bool)
        if risky.any():
            if out is frame:
                out = frame.copy()
            out[column] = values.where(~risky, "'" + values.astype(str))
    return out


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
    """Path, name, size and SHA-256 of the audited file (``None`` without a file).

    A folder of Parquet files: the total size of the files the audit reads
    (:func:`.parquet_files.parquet_paths`: ``.pq`` and any case of ``.parquet`` read, hidden and ``_``
    files not), and the SHA-256 of the list of their paths (relative to the folder, in the order of
    their paths) each with its own SHA-256.
    """
    if input_path is None:
        return None
    path = Path(input_path)
    if path.is_dir():
        from .parquet_files import parquet_paths

        files = parquet_paths(path)
        listing = "".join(f"{f.relative_to(path).as_posix()}\t{file_sha256(f)}\n" for f in files)
        return {"path": str(input_path), "name": path.name, "sha256": hashlib.sha256(listing.encode()).hexdigest(),
                "size_bytes": sum(f.stat().st_size for f in files), "files": len(files)}  # fmt: skip
    return {"path": str(input_path), "name": path.name, "sha256": file_sha256(path),
            "size_bytes": path.stat().st_size}  # fmt: skip


def input_fingerprint(input_path: str | os.PathLike[str] | None) -> tuple | None:
    """What tells whether the audited file (or each Parquet file of a folder) was replaced or written to:
    its path, device, inode, size and modification time (``None`` without a file).

    Taken before the input is read and again once its SHA-256 is computed (:func:`write_outputs`), so
    that the manifest never gives the SHA-256 of a file other than the one audited.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".csv") as handle:
    ...     before = input_fingerprint(handle.name)
    ...     _ = handle.write(b"y,p\\n1,0.5\\n"); handle.flush()
    ...     before == input_fingerprint(handle.name)
    False
    """
    if input_path is None:
        return None
    path = Path(input_path)
    if path.is_dir():
        from .parquet_files import parquet_paths

        files = parquet_paths(path)
    else:
        files = [path]
    stamps = []
    for f in files:
        status = os.stat(f)
        stamps.append((str(f), status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns))
    return tuple(stamps)


def build_manifest(result: Any, *, source: dict | None, files: dict[str, str]) -> dict:
    """The content of ``manifest.json`` (see :func:`write_outputs`); ``source`` from :func:`input_record`."""
    options = _jsonable(result.options.record())
    return {
        "tool": TOOL,
        "input": source,
        "n_rows": int(result.n_rows),
        "seed": int(result.options.seed),
        "options": options,
        "notes": list(result.notes),
        "tables": {name: len(_table(result, name)) for name in TABLES},
        "versions": package_versions(),
        "files": dict(sorted(files.items())),
    }


def _table(result: Any, name: str) -> pd.DataFrame:
    """Table ``name`` of a result; an empty one with its columns when the result has none (an object built
    before the analyses' tables existed)."""
    table = getattr(result, name, None)
    if table is None:
        return pd.DataFrame({c: [] for c in ANALYSIS_TABLES[name]})
    return table


def _make_tmp_dir(dest: Path) -> Path:
    """``.<out>.<pid>-<token>.tmp`` next to ``dest``, with the permissions of an ordinary new folder."""
    tmp = project_io.temporary_sibling(dest, suffix=".tmp", directory=True)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)
    return tmp


@contextlib.contextmanager
def _swap_lock(dest: Path):
    """Hold an exclusive lock on the folder that holds ``dest`` (``flock`` on the folder itself: nothing
    is left behind), so that audits writing the same ``--out`` at once check and swap one at a time;
    each then finds the folder complete, never half replaced by another. A no-op where ``fcntl`` is
    missing (Windows)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    try:
        fd = os.open(dest.parent, os.O_RDONLY)
    except OSError as exc:
        raise OutputDirError(f"--out {dest}: cannot open its parent folder {dest.parent} ({exc.strerror})") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _manifest_digest(dest: Path) -> str | None:
    """SHA-256 of ``dest/manifest.json``, or None if there is none: what an earlier audit left there."""
    manifest = dest / "manifest.json"
    try:
        return file_sha256(manifest) if manifest.is_file() else None
    except OSError:
        return None


def _swap_in(tmp: Path, dest: Path, out_dir: Any, *, seen: str | None = None) -> None:
    """Rename ``tmp`` to ``dest``; an existing (checked again) ``dest`` is moved aside first, then removed.

    Under :func:`_swap_lock`. ``seen`` is the digest of the manifest found there when the audit started
    (:func:`_manifest_digest`): a different one now means that another audit wrote the folder in the
    meantime, which an :class:`OutputWarning` says (the folder is still replaced: it held an audit's
    unmodified output, as checked).
    """
    with _swap_lock(dest):
        old = None
        if dest.exists():
            _check_replaceable(out_dir, dest)
            now = _manifest_digest(dest)
            if now != seen and now is not None:
                warnings.warn(
                    f"{_where(out_dir)}: another audit wrote this folder while this one ran; its output is replaced "
                    f"by this audit's (the folder holds one audit's files)",
                    OutputWarning,
                    stacklevel=3,
                )
            old = project_io.temporary_sibling(dest, suffix=".old", directory=True)
            os.rmdir(old)
            os.replace(dest, old)
        try:
            os.replace(tmp, dest)
        except BaseException:
            if old is not None:
                os.replace(old, dest)
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
    read_as: tuple | None = None,
) -> Path:
    """Write the audit's output folder atomically (``AuditResult.write``).

    Parameters
    ----------
    result : AuditResult
    out_dir : path
        Target folder; checked with :func:`check_out_dir` (an earlier audit's folder is replaced
        when it holds nothing else; a symbolic link's folder is replaced, the link kept).
    input_path : path, optional
        The audited file: its path, size and SHA-256 go into ``manifest.json``.
    summary : str, optional
        Terminal summary shown in the report; default :func:`disaggregated_eval.audit.terminal.summary_text`.
    progress : callable, optional
        ``progress(stage, done, total)`` after each file group.
    read_as : tuple, optional
        :func:`input_fingerprint` of ``input_path`` taken before it was read: if the file differs once
        its SHA-256 is computed (replaced or written to during the audit), nothing is written.

    Returns
    -------
    pathlib.Path
        The output folder.

    Raises
    ------
    OutputDirError
        If ``out_dir`` cannot be used (nothing is written; see :func:`check_out_dir`).
    AuditInputError
        If the input changed during the audit (``read_as``; nothing is written).
    """
    from . import figure_rendering, report
    from .terminal import summary_text
    from .text import DEFAULT_WIDTH

    target = check_out_dir(out_dir)
    dest = _destination(out_dir)
    seen = _manifest_digest(dest)
    for suffix in (".tmp", ".old"):  # left by audits killed outright (their process is gone)
        project_io.remove_stale_temporaries(dest, suffix=suffix)
    summary = summary if summary is not None else summary_text(result, input_path=input_path, width=DEFAULT_WIDTH)
    tmp = _make_tmp_dir(dest)
    rendering = None
    try:
        # Worker processes draw the figures while this process writes the tables (figure_rendering.start_rendering).
        # No figure ever fails an audit after its work: a figure that cannot be drawn is left out, with
        # a note in the report, the manifest and on standard error; the tables are written in any case.
        figure_notes: list[str] = []
        try:
            rendering = figure_rendering.start_rendering(result)
        except Exception as exc:
            figure_notes.append(f"no figure could be drawn (the tables are complete): {type(exc).__name__}: {exc}")
        steps = len(TABLES) + 3
        step = 0

        def tick() -> None:
            nonlocal step
            step += 1
            if progress is not None:
                progress("writing outputs", step, steps)

        for name in TABLES:
            table = _table(result, name)
            project_io.write_table(table, tmp / f"{name}.parquet")
            project_io.write_table(csv_safe(table), tmp / f"{name}.csv")
            tick()
        figures = rendering.result() if rendering is not None else {}
        if rendering is not None:
            figure_notes += rendering.notes()
        if figure_notes:
            result = dataclasses.replace(result, notes=[*result.notes, *figure_notes])
            for note in figure_notes:
                warnings.warn(note, FigureWarning, stacklevel=2)
        (tmp / "figures").mkdir()
        for name, (_, images) in figures.items():
            for fmt, data in images.items():
                (tmp / "figures" / f"{name}.{fmt}").write_bytes(data)
        tick()
        files = {p.relative_to(tmp).as_posix(): file_sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
        source = input_record(input_path)
        if read_as is not None and input_fingerprint(input_path) != read_as:
            raise AuditInputError(
                f"{input_path}: changed while it was audited (replaced, or written to: its size, time or file "
                f"differ from when it was read), so the SHA-256 the manifest would give is not that of the rows "
                f"audited; nothing was written: audit it again once it no longer changes"
            )
        preliminary = build_manifest(result, source=source, files=files)
        page = report.render_html(result, figures=figures, summary=summary, manifest=preliminary,
                                  input_path=input_path)  # fmt: skip
        (tmp / "report.html").write_text(page, encoding="utf-8")
        tick()
        files["report.html"] = file_sha256(tmp / "report.html")
        manifest = build_manifest(result, source=source, files=files)
        project_io.write_json(manifest, tmp / "manifest.json")
        tick()
        _swap_in(tmp, dest, out_dir, seen=seen)
    except BaseException:
        if rendering is not None:
            rendering.close(abort=True)
        with contextlib.suppress(OSError):
            shutil.rmtree(tmp)
        raise
    return target
