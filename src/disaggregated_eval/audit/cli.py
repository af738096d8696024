"""``disagg-eval``: the command line of the audit tool (``disagg-eval audit FILE ...``).

The options and their defaults come from :class:`disaggregated_eval.audit.options.AuditOptions`
(one home): every field becomes a flag (``min_group_size`` -> ``--min-group-size``; the list
fields ``scores``, ``groups``, ``controls`` are spelled ``--score``, ``--group``, ``--control``),
and a YAML file given with ``--config`` uses the field names as keys. Flags win over the file, the
file over the defaults; an unknown key is an error naming it. The parser collects the flags' text; it is
converted once (:func:`.options.options_from_flags`, :func:`.options.read_config_file`) and the merged
options are checked once (:func:`.options.resolve_options`), before the file is read; the audit trusts
the resolved options.

Streams and exit codes (``docs/audit.md``): results go to files under ``--out``; a short summary
goes to standard output; progress and warnings go to standard error (:mod:`.progress`). Exit status 0
on success, 2 on bad usage or bad input (one line naming the problem, before any work), 1 on any other
failure, 130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM, which unwinds like Ctrl-C so that
no temporary folder is left behind: :mod:`.signals`), 129 on SIGHUP (unwound the same way). :func:`run_audit` is the same command for a caller
that holds the options already (the workflow's rule ``run_audit``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import textwrap
import time
import traceback
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import vocabulary
from .errors import AuditInputError, UsageError
from .options import (
    AGGREGATE_CHOICES,
    AUTO_AGGREGATE_ROWS,
    FLAG_NAMES,
    OPTION_SECTIONS,
    REQUIRED_OPTIONS,
    flag_of,
    option_choices,
    option_default,
    option_fields,
    option_kind,
    options_from_flags,
    read_config_file,
    split_list,
)
from .progress import PROG, StderrProgress, one_line, show_warning, to_stderr
from .signals import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, Terminated, signals_unwind, unloadable
from .text import terminal_text

__all__ = ["build_parser", "command_options", "main", "run_audit"]
_AUDIT_DESCRIPTION = (
    "Disaggregated and controlled evaluation of the predictions in FILE: every metric for every level "
    "of every --group attribute and their intersections, with paired bootstrap intervals, comparisons "
    "with permutation tests, and controlled differences T_a (Pfohl et al. 2025). Results go to --out; "
    "a summary is printed. Lists take several values (--metrics auc precision) or commas "
    "(--control none,Y,R); write a comma inside a column name as \\, (--group 'income\\, annual'). "
    "See docs/audit.md."
)
_EPILOG = (
    "exit status: 0 success, 2 bad usage or input (one line naming the problem), 1 other failure, "
    "130 interrupted (Ctrl-C), 143 terminated (SIGTERM), 129 hung up (SIGHUP).\n"
    "example: disagg-eval audit examples/data/compas.csv --label two_year_recid --score compas_score "
    "--group race --group sex --control none,Y,R --out compas_audit"
)


def _default_text(field_) -> str:
    value = option_default(field_)
    if field_.name in REQUIRED_OPTIONS:
        return "required"
    if field_.name == "intersections" and value is None:
        return "all attributes"
    if field_.name == "preference_threshold" and value is None:
        return "the threshold"
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        if field_.name == "metrics" and tuple(value) == vocabulary.AUDIT_METRICS:
            others = [m for m in vocabulary.METRICS if m not in value]
            return f"all but {', '.join(others)}" if others else f"all {len(value)}"
        if field_.name == "controls" and list(value) == ["none"]:
            return "none, i.e. each slice against the overall value only"
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and field_.name.startswith("n_") and value >= 10_000:
        return f"{value:,}"
    return str(value)


# ----------------------------------------------------------------------------------------------
# parser
# ----------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``disagg-eval audit: error: ...``) and exit status 2."""

    def error(self, message: str) -> typing.NoReturn:
        raise UsageError(f"{message} (see {PROG} audit --help)")


class _Extend(argparse.Action):
    """``nargs="+"`` values, each split at its commas (``\\,`` a literal comma: :func:`.options.split_list`),
    appended to the list (converted later, with the other values, by :func:`.options.options_from_flags`)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        current = list(getattr(namespace, self.dest, None) or [])
        for value in values:
            current.extend(split_list(value))
        setattr(namespace, self.dest, current)


def _add_option(group, field_) -> None:
    kind, element, _ = option_kind(field_.name)
    flag = flag_of(field_.name)
    names = [flag]
    if field_.name in FLAG_NAMES:
        names.append("--" + field_.name.replace("_", "-"))  # --scores, --groups, --controls
    choices = option_choices(field_)
    help_text = field_.metadata.get("help", "")
    if choices is not None:
        help_text += f"; one{' or more' if kind == 'list' else ''} of {', '.join(choices)}"
    default = _default_text(field_)
    if "(default" not in help_text:  # the help may state its default in words already
        help_text += f" ({default})" if default == "required" else f" (default: {default})"
    help_text = help_text.replace("%", "%%")
    metavar = field_.metadata.get("metavar") or field_.name.upper()
    if element is bool and kind == "scalar":
        group.add_argument(*names, dest=field_.name, action=argparse.BooleanOptionalAction,
                           default=argparse.SUPPRESS, help=help_text)  # fmt: skip
        return
    kwargs: dict[str, Any] = dict(dest=field_.name, default=argparse.SUPPRESS, help=help_text, metavar=metavar)
    if kind == "list":
        kwargs.update(nargs="+", action=_Extend)
    group.add_argument(*names, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The ``disagg-eval`` parser; ``audit``'s options are built from :class:`AuditOptions`."""
    from importlib import metadata

    try:
        version = metadata.version("disaggregated-eval")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree
        version = "unknown"
    parser = _Parser(prog=PROG, description="Disaggregated and controlled evaluation of predictions.",
                     allow_abbrev=False)  # fmt: skip
    parser.add_argument("--version", action="version", version=f"{PROG} {version}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    audit = commands.add_parser(
        "audit",
        help="audit the predictions in a CSV or parquet file",
        description=textwrap.fill(_AUDIT_DESCRIPTION, width=100),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    audit.add_argument("file", nargs="?", default=argparse.SUPPRESS, metavar="FILE",
                       help="table with one row per person: .csv, .csv.gz, .tsv, .parquet, or a folder of .parquet "
                            "files (hive partitions) (or 'file' in --config)")  # fmt: skip
    audit.add_argument("--out", default=argparse.SUPPRESS, metavar="DIR",
                       help="output folder, written only if the whole audit succeeds; an earlier audit's folder "
                            "is replaced if it holds nothing else (default: <FILE name>_audit in the current folder)")  # fmt: skip
    audit.add_argument("--config", default=None, metavar="YAML",
                       help="YAML file with any of these options (names as in docs/audit.md, e.g. "
                            "min_group_size: 50, and file, out); flags given here win (default: none)")  # fmt: skip
    audit.add_argument("--aggregate", choices=AGGREGATE_CHOICES, default="auto", metavar="WHEN",
                       help="aggregate a Parquet input to counts with DuckDB before the audit, so that memory follows "
                            "the distinct rows, not the rows (same results, docs/audit.md 'Large data'): yes, no, or "
                            f"auto (a folder, or a file of more than {AUTO_AGGREGATE_ROWS:.0e} rows) (default: auto)")  # fmt: skip
    audit.add_argument("--quiet", action="store_true", default=False,
                       help="print no summary and no progress, only warnings and errors (default: no)")  # fmt: skip
    sections = {title: audit.add_argument_group(title) for title in OPTION_SECTIONS}
    for field_ in option_fields():
        _add_option(sections[field_.metadata["section"]], field_)
    return parser


# ----------------------------------------------------------------------------------------------
# resolution: defaults < --config < flags
# ----------------------------------------------------------------------------------------------
def command_options(args: argparse.Namespace) -> tuple[Path, Path, dict[str, Any], bool]:
    """File, output folder, option values (converted, not yet checked) and whether the seed is the default.

    Parameters
    ----------
    args : argparse.Namespace
        ``build_parser().parse_args(...)`` of an ``audit`` command.

    Raises
    ------
    UsageError
        If a flag's value cannot be read (naming the flag), the file, the label, a score or a group column
        is missing, or the ``--config`` file is bad.
    """
    known = {f.name for f in option_fields()}
    flags = {key: value for key, value in vars(args).items() if key in known}
    given = {key: value for key, value in vars(args).items() if key in ("file", "out")}
    given.update(options_from_flags(flags))  # each value converted once, naming its flag
    from_file = read_config_file(args.config) if args.config else {}
    merged = {**from_file, **given}
    file = merged.pop("file", None)
    out = merged.pop("out", None)
    if file is None:
        eaten = [v for name, value in given.items() if isinstance(value, list)
                 for v in value if isinstance(v, str) and Path(v).is_file()]  # fmt: skip
        hint = f" ({eaten[0]!r} was taken as a value of a list option: put FILE first)" if eaten else ""
        raise UsageError(f"missing FILE: give the table to audit as the first argument (or 'file' in --config){hint}")
    missing = [f"{flag_of(name)} COL" for name in REQUIRED_OPTIONS if not merged.get(name)]
    if missing:
        raise UsageError(f"missing {', '.join(missing)}: name the label, score and group columns of {file}")
    if out is not None and not str(out).strip():
        raise UsageError(f"--out {str(out)!r} is empty: give the output folder's name (e.g. --out audit)")
    out = Path(out) if out is not None else Path(f"{_stem(Path(file))}_audit")
    seed_is_default = "seed" not in merged
    return Path(file), out, merged, seed_is_default


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".csv.gz", ".tsv.gz", ".parquet", ".csv", ".tsv", ".pq"):
        if name.lower().endswith(suffix):
            return name[: -len(suffix)]
    return path.stem


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------
def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``disagg-eval`` (``[project.scripts]``); returns the exit status.

    Parameters
    ----------
    argv : sequence of str, optional
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 success, 2 bad usage or input, 1 other failure, 130 interrupted (Ctrl-C), 143 terminated
        (SIGTERM). On 1, 130 and 143 nothing is written to ``--out`` and no temporary is left behind, but for a
        signal after the new output was in place, which a line on standard error states.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()

    def command() -> int:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help and --version exit 0 through argparse
            return int(exc.code or 0)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        file, out, options, seed_is_default = command_options(args)
        return _audit_command(file, out, options, seed_is_default, quiet=args.quiet, aggregate=args.aggregate)

    return _exit_status(command)


def run_audit(
    file: str | os.PathLike[str],
    out: str | os.PathLike[str],
    options: Mapping[str, Any],
    *,
    seed_is_default: bool = False,
    aggregate: str = "auto",
    quiet: bool = False,
) -> int:
    """Audit ``file`` into the folder ``out`` exactly as ``disagg-eval audit`` does; return its exit status.

    The command line after its arguments are read, for a caller that holds the options already (the
    workflow's rule ``run_audit``): ``out`` checked before anything else
    (:func:`.outputs.check_out_dir`), the options resolved once, the file read within its bounds, the
    folder written atomically (:func:`.outputs.write_outputs`: an earlier audit's folder stays as it
    was until the new one is complete), progress, warnings and one-line errors on standard error, the
    summary on standard output, and Ctrl-C and SIGTERM unwinding (:func:`.signals.signals_unwind`).

    Parameters
    ----------
    file : path-like
        The table (or folder of Parquet files) to audit.
    out : path-like
        The output folder (``--out``).
    options : mapping
        Audit options by field name (``label``, ``scores``, ``groups``, ...), as
        :func:`.options.resolve_options` takes them.
    seed_is_default : bool, default False
        Whether the summary says that the seed is the default one.
    aggregate : {"auto", "yes", "no"}, default "auto"
        ``--aggregate``.
    quiet : bool, default False
        ``--quiet``: no progress and no summary.

    Returns
    -------
    int
        The exit status of :func:`main` (0, 1, 2, 130 or 143); nothing raises.

    Examples
    --------
    >>> run_audit("no_such_file.csv", "audit_out", {"label": "y", "scores": ["p"], "groups": ["g"]})
    2
    """

    def command() -> int:
        return _audit_command(Path(file), Path(out), dict(options), seed_is_default, quiet=quiet, aggregate=aggregate)

    return _exit_status(command)


def _exit_status(command: Callable[[], int]) -> int:
    """Run ``command`` as the command line runs it: warnings as one line, SIGINT and SIGTERM unwinding,
    an error as one line on standard error, and the exit status (``docs/audit.md``)."""
    from .loading import InputFileError
    from .outputs import OutputDirError

    input_errors = (UsageError, InputFileError, OutputDirError, AuditInputError)
    old_showwarning = warnings.showwarning
    warnings.showwarning = show_warning
    try:
        with signals_unwind():
            return command()
    except KeyboardInterrupt:
        to_stderr(f"{PROG}: interrupted; nothing was written")
        return EXIT_INTERRUPTED
    except Terminated as stop:
        to_stderr(f"{PROG}: terminated ({stop.name}); nothing was written")
        return stop.status
    except input_errors as exc:
        to_stderr(f"{PROG} audit: error: {one_line(exc)}")
        return EXIT_USAGE
    except (MemoryError, SystemError) as exc:  # more than the process may hold (e.g. ulimit -v): one line
        failed = _allocation_failure(exc)
        if failed is None:  # a SystemError of another cause: the traceback, as for any other failure
            return _failed(exc)
        detail = f" ({one_line(failed)})" if str(failed) else ""
        to_stderr(
            f"{PROG} audit: error: out of memory{detail}: this process may hold less than the audit needs "
            "(its plan line states the estimated peak); run it where more memory is free (ulimit -v, the "
            "machine), or with fewer --n-resamples, --intersections, --control or --metrics"
        )
        return EXIT_USAGE
    except Exception as exc:
        unloaded = unloadable(exc)  # a library imported late (scipy) that an address-space limit leaves no room for
        if unloaded is not None and not isinstance(exc, MemoryError):
            to_stderr(unloaded)
            return EXIT_USAGE
        return _failed(exc)
    finally:
        warnings.showwarning = old_showwarning


def _failed(exc: Exception) -> int:
    """An unexpected failure: its traceback and one line naming it on standard error; the exit status 1."""
    with contextlib.suppress(OSError, ValueError):  # standard error closed or full
        traceback.print_exc(file=sys.stderr)
    to_stderr(f"{PROG} audit: failed: {type(exc).__name__}: {one_line(exc)}")
    return EXIT_FAILURE


def _allocation_failure(exc: BaseException) -> BaseException | None:
    """The failed allocation behind ``exc``: itself when it is a MemoryError, else the MemoryError it was raised
    from or while handling (a compiled kernel that fails to allocate can surface as ``SystemError: ... returned
    a result with an exception set``), else None."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, MemoryError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def _check_out_not_in_input(out: Path, file: Path) -> None:
    """Refuse an output folder inside the input folder (a folder of Parquet files): its tables would be read as
    input by every later audit of that folder (which then refuses them or, worse, counts them)."""
    from .outputs import OutputDirError

    if not file.is_dir():
        return
    source, dest = Path(os.path.realpath(file)), Path(os.path.realpath(out))
    if dest == source or source in dest.parents:
        raise OutputDirError(
            f"--out {out}: is inside the input folder {file}, whose Parquet files are the audit's rows: its tables "
            "would be read as input by every later audit of that folder; give a folder outside it"
        )


def _folder_identity(path: Path) -> tuple[int, int] | None:
    """The device and inode of the folder at ``path`` (links followed), or None where there is none: an audit's
    swap puts a new folder there, so a different identity means that the new output is in place."""
    try:
        found = os.stat(path)
    except (OSError, ValueError):
        return None
    return (found.st_dev, found.st_ino)


def _audit_command(file: Path, out: Path, options: dict[str, Any], seed_is_default: bool, *, quiet: bool,
                   aggregate: str = "auto") -> int:  # fmt: skip
    """Run one audit of the command line (:func:`run_audit`). A signal after the new output is in place (while the
    earlier one is removed, or the summary printed) exits 130 or 143 with a line saying that the output is
    complete, not that nothing was written."""
    before = _folder_identity(out)
    try:
        return _audit_and_print(file, out, options, seed_is_default, quiet=quiet, aggregate=aggregate)
    except (KeyboardInterrupt, Terminated) as stop:
        now = _folder_identity(out)
        if now is None or now == before:
            raise
        name, status = ("SIGINT", EXIT_INTERRUPTED) if isinstance(stop, KeyboardInterrupt) else (stop.name, stop.status)
        to_stderr(f"{PROG}: stopped ({name}) after the audit's output in {out} was complete")
        return status


def _audit_and_print(file: Path, out: Path, options: dict[str, Any], seed_is_default: bool, *, quiet: bool,
                     aggregate: str) -> int:  # fmt: skip
    from dataclasses import replace

    from .core import audit
    from .inputs import InputSpec
    from .loading import load_input
    from .options import resolve_options
    from .outputs import check_out_dir, input_fingerprint, write_outputs
    from .terminal import summary_text
    from .text import DEFAULT_WIDTH

    progress = StderrProgress(sys.stderr, quiet=quiet)
    try:
        # Everything that needs no data is checked before the file is read: the output folder, then
        # every option value (once: the resolved options go to the engine as they are).
        _check_out_not_in_input(out, file)  # before check_out_dir, which makes the parent folders
        check_out_dir(out)
        resolved = resolve_options(None, options)
        columns = InputSpec.from_options(resolved).columns
        started = time.monotonic()
        try:
            read_as = input_fingerprint(file)  # to check, once its SHA-256 is taken, that it did not change
        except (OSError, ValueError):
            read_as = None  # a missing file or a folder that cannot be read: load_input names the problem
        data, counts, read = load_input(file, columns, frequency_weight=resolved.frequency_weight,
                                        memory_limit_mb=resolved.memory_limit_mb, aggregate=aggregate,
                                        level_columns=resolved.groups)  # fmt: skip
        if counts != resolved.frequency_weight:  # aggregated by DuckDB: its count column (checked by load_input)
            resolved = replace(resolved, frequency_weight=counts)
        progress.message(read, hold=True)
        result = audit(data, options=resolved, progress=progress)
        # The report shows the summary without the output folder and at the default width, so that the
        # same audit gives the same bytes wherever it is written and whatever the terminal.
        in_report = summary_text(result, input_path=file, seed_is_default=seed_is_default, width=DEFAULT_WIDTH)
        write_outputs(result, out, input_path=file, summary=in_report, progress=progress, read_as=read_as)
        text = summary_text(result, input_path=file, out_dir=out, seed_is_default=seed_is_default)
        progress.message(f"wrote {out} in {time.monotonic() - started:.1f} s")
    finally:
        progress.close()
    if not quiet:
        try:
            print("\n".join(terminal_text(line) for line in text.split("\n")))
            sys.stdout.flush()
        except OSError as exc:  # `| head -1`, a full device: the output is complete; only the summary was cut
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
            why = ("standard output was closed while the summary was printed" if isinstance(exc, BrokenPipeError)
                   else f"the summary could not be printed ({exc.strerror or exc})")  # fmt: skip
            to_stderr(f"{PROG}: {why}; the audit's output in {out} is complete")  # standard error may be gone too
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
