"""``disagg-eval``: the command line of the audit tool (``disagg-eval audit FILE ...``).

The options and their defaults come from :class:`disaggregated_eval.audit.options.AuditOptions`
(one home): every field becomes a flag (``min_group_size`` -> ``--min-group-size``; the list
fields ``scores``, ``groups``, ``controls`` are spelled ``--score``, ``--group``, ``--control``),
and a YAML file given with ``--config`` uses the field names as keys. Flags win over the file, the
file over the defaults; an unknown key is an error naming it.

Streams and exit codes (``docs/audit.md``): results go to files under ``--out``; a short summary
goes to standard output; progress (a tqdm bar on a terminal, plain lines otherwise) and warnings go
to standard error, every text from the data escaped (:func:`~disaggregated_eval.audit.text.terminal_text`).
Exit status 0 on success, 2 on bad usage or bad input (one line naming the problem, before any
work), 1 on any other failure, 130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM, which
unwinds like Ctrl-C so that no temporary folder is left behind).

The options, their conversion from text and YAML, and ``--config`` files are read by
:mod:`disaggregated_eval.audit.options` (one home); import them from there.
"""

from __future__ import annotations

import argparse
import signal
import sys
import textwrap
import time
import traceback
import typing
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .. import vocabulary
from .options import (
    AGGREGATE_CHOICES,
    AUTO_AGGREGATE_ROWS,
    FLAG_NAMES,
    OPTION_SECTIONS,
    REQUIRED_OPTIONS,
    UsageError,
    convert_option,
    convert_scalar,
    flag_of,
    option_choices,
    option_default,
    option_fields,
    option_kind,
    read_config_file,
    split_list,
)
from .text import terminal_text

__all__ = [
    "PROG",
    "EXIT_OK",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "build_parser",
    "resolve_options",
    "main",
]

PROG = "disagg-eval"
#: Exit statuses (docs/audit.md, "Exit codes and bad input"): 128 + the signal's number when stopped by one.
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130: Ctrl-C
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143: kill, timeout, docker stop, a cluster's pre-emption
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
    "130 interrupted (Ctrl-C), 143 terminated (SIGTERM).\n"
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
    """``nargs="+"`` values (each possibly comma-separated, ``\\,`` a literal comma; converted to a list)
    appended to the list."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        current = list(getattr(namespace, self.dest, None) or [])
        for value in values:
            current.extend(value if isinstance(value, list) else [value])
        setattr(namespace, self.dest, current)


def _argparse_type(field_) -> Callable[[str], Any]:
    where = flag_of(field_.name)
    kind, element, optional = option_kind(field_.name)

    def convert(text: str) -> Any:
        try:
            if kind == "list":
                return [convert_scalar(v, element, where, optional=False) for v in split_list(text)]
            return convert_scalar(text, element, where, optional=optional)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{where} ")) from None

    convert.__name__ = element.__name__
    return convert


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
    kwargs: dict[str, Any] = dict(dest=field_.name, default=argparse.SUPPRESS, help=help_text,
                                  type=_argparse_type(field_), metavar=metavar)  # fmt: skip
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
def resolve_options(args: argparse.Namespace) -> tuple[Path, Path, dict[str, Any], bool]:
    """File, output folder, option values and whether the seed is the default.

    Raises
    ------
    UsageError
        If the file, the label, a score or a group column is missing, or the ``--config`` file is bad.
    """
    known = {f.name: f for f in option_fields()}
    given = {}
    for key, value in vars(args).items():
        if key in known:  # lists again through the checks of choices and repeats
            value = convert_option(known[key], value, flag_of(key))
        if key not in ("command", "config", "quiet", "aggregate"):
            given[key] = value
    from_file = read_config_file(args.config) if args.config else {}
    merged = {**from_file, **given}
    file = merged.pop("file", None)
    out = merged.pop("out", None)
    if file is None:
        eaten = [v for name, value in given.items() if isinstance(value, list)
                 for v in value if isinstance(v, str) and Path(v).is_file()]  # fmt: skip
        hint = f" ({eaten[0]!r} was taken as a value of a list option: put FILE first)" if eaten else ""
        raise UsageError(f"missing FILE: give the table to audit as the first argument (or 'file' in --config){hint}")
    required = [("label", "--label COL"), ("scores", "--score COL"), ("groups", "--group COL")]
    missing = [flag for name, flag in required if not merged.get(name)]
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
# progress and warnings on standard error
# ----------------------------------------------------------------------------------------------
class _Progress:
    """``progress(stage, done, total)``: a tqdm bar per stage on a terminal; plain lines otherwise.

    Plain lines are written at most every 10% of a stage (and at its end), so logs stay short. Stage
    names and messages may carry column and level names: they are printed through
    :func:`~disaggregated_eval.audit.text.terminal_text`.
    """

    def __init__(self, stream, *, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        if self.tty:
            try:
                import tqdm  # noqa: F401
            except ImportError:  # plain lines without tqdm
                self.tty = False
        self.bars: dict[str, Any] = {}
        self.last: dict[str, int] = {}
        self.pending: list[str] = []

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.quiet:
            return
        if self.pending:  # held back until the engine has accepted the data
            for text in self.pending:
                self._print(text)
            self.pending.clear()
        stage = terminal_text(stage)
        if self.tty:
            from tqdm import tqdm

            bar = self.bars.get(stage)
            if bar is None:
                bar = self.bars[stage] = tqdm(total=total, desc=stage, file=self.stream, leave=False,
                                              dynamic_ncols=True)  # fmt: skip
            bar.total = total
            bar.n = done
            bar.refresh()
            if done >= total:
                bar.close()
                self.bars.pop(stage, None)
            return
        tenth = int(10 * done / total) if total else 10
        if tenth > self.last.get(stage, -1) or done >= total:
            if done >= total and self.last.get(stage) == 10:
                return
            self.last[stage] = tenth
            print(f"{PROG}: {stage} {done:,}/{total:,}", file=self.stream, flush=True)

    def message(self, text: str, *, hold: bool = False) -> None:
        """A plain line on stderr; with ``hold``, only once the next progress report arrives."""
        if self.quiet:
            return
        if hold:
            self.pending.append(text)
        else:
            self._print(text)

    def _print(self, text: str) -> None:
        text = terminal_text(text)
        if self.tty and self.bars:
            from tqdm import tqdm

            tqdm.write(f"{PROG}: {text}", file=self.stream)
        else:
            print(f"{PROG}: {text}", file=self.stream, flush=True)

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"{PROG}: warning: {_one_line(message)}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------
class Terminated(BaseException):
    """Raised in the main thread on SIGTERM, so that it unwinds like Ctrl-C (temporary files removed)."""


def _on_sigterm(signum, frame) -> typing.NoReturn:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
    raise Terminated(signum)


def _one_line(exc: BaseException | str) -> str:
    """A message on one line, with control characters of data-derived text escaped."""
    text = terminal_text(" ".join(str(exc).split()))
    return text or type(exc).__name__


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
        (SIGTERM). On 1, 130 and 143 nothing is written to ``--out`` and no temporary is left behind.
    """
    from .inputs import AuditInputError
    from .loading import InputFileError
    from .outputs import OutputDirError

    input_errors = (UsageError, InputFileError, OutputDirError, AuditInputError)
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    progress = None
    old_showwarning = warnings.showwarning
    warnings.showwarning = _show_warning
    try:  # SIGTERM unwinds like Ctrl-C (only the main thread may install a handler)
        old_sigterm = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:
        old_sigterm = None
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help and --version exit 0 through argparse
            return int(exc.code or 0)
        if args.command is None:
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        file, out, options, seed_is_default = resolve_options(args)
        progress = _Progress(sys.stderr, quiet=args.quiet)
        return _audit_command(file, out, options, seed_is_default, progress=progress, quiet=args.quiet,
                              aggregate=args.aggregate)  # fmt: skip
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Terminated:
        print(f"{PROG}: terminated (SIGTERM); nothing was written", file=sys.stderr)
        return EXIT_TERMINATED
    except input_errors as exc:
        print(f"{PROG} audit: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        print(f"{PROG} audit: failed: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    finally:
        if old_sigterm is not None:
            signal.signal(signal.SIGTERM, old_sigterm)
        warnings.showwarning = old_showwarning
        if progress is not None:
            progress.close()


def _audit_command(file: Path, out: Path, options: dict[str, Any], seed_is_default: bool, *,
                   progress: _Progress, quiet: bool, aggregate: str = "auto") -> int:  # fmt: skip
    from .core import audit
    from .inputs import resolve_options as check_options
    from .loading import load_input, required_columns
    from .outputs import check_out_dir, write_outputs
    from .summary import summary_text

    # Everything that needs no data is checked before the file is read: the output folder, then
    # every option value (once: the resolved options go to the engine as they are).
    check_out_dir(out)
    resolved = check_options(None, options)
    columns = required_columns(resolved)
    started = time.monotonic()
    data, resolved, read = load_input(file, resolved, columns, aggregate=aggregate)
    progress.message(read, hold=True)
    result = audit(data, options=resolved, progress=progress)
    # The report shows the summary without the output folder, so that the same audit gives the same
    # bytes wherever it is written.
    in_report = summary_text(result, input_path=file, seed_is_default=seed_is_default)
    write_outputs(result, out, input_path=file, summary=in_report, progress=progress)
    text = summary_text(result, input_path=file, out_dir=out, seed_is_default=seed_is_default)
    progress.message(f"wrote {out} in {time.monotonic() - started:.1f} s")
    if not quiet:
        print("\n".join(terminal_text(line) for line in text.split("\n")))
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
