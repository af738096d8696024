"""``disagg-eval``: the command line of the audit tool (``disagg-eval audit FILE ...``).

The options and their defaults come from :class:`disaggregated_eval.audit.options.AuditOptions`
(one home): every field becomes a flag (``min_group_size`` -> ``--min-group-size``; the list
fields ``scores``, ``groups``, ``controls`` are spelled ``--score``, ``--group``, ``--control``),
and a YAML file given with ``--config`` uses the field names as keys. Flags win over the file, the
file over the defaults; an unknown key is an error naming it.

Streams and exit codes (``docs/audit.md``): results go to files under ``--out``; a short summary
goes to standard output; progress (a tqdm bar on a terminal, plain lines otherwise) and warnings go
to standard error. Exit status 0 on success, 2 on bad usage or bad input (one line naming the
problem, before any work), 1 on any other failure, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import textwrap
import time
import traceback
import types
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from .. import vocabulary
from .options import AuditOptions

__all__ = [
    "UsageError",
    "PROG",
    "FLAG_NAMES",
    "CLI_KEYS",
    "build_parser",
    "option_fields",
    "flag_of",
    "options_from_mapping",
    "read_config_file",
    "resolve_options",
    "main",
]

PROG = "disagg-eval"
#: Field -> flag name where the flag is singular (given once per value).
FLAG_NAMES: dict[str, str] = {"scores": "score", "groups": "group", "controls": "control"}
#: Keys a ``--config`` file may hold besides the option fields.
CLI_KEYS: tuple[str, ...] = ("file", "out")
#: argparse sections: field -> section title (fields not listed go to "other options").
_SECTIONS: dict[str, str] = {
    "label": "columns", "scores": "columns", "groups": "columns", "positive_label": "columns",
    "sample_weight": "columns",
    "intersections": "slices", "min_group_size": "slices", "min_denominator": "slices",
    "missing_group": "slices",
    "threshold": "metrics", "preference_threshold": "metrics", "metrics": "metrics",
    "n_resamples": "intervals and tests", "resampling": "intervals and tests",
    "confidence": "intervals and tests", "seed": "intervals and tests", "adjust": "intervals and tests",
    "n_permutations": "intervals and tests",
    "controls": "controlled evaluation", "features": "controlled evaluation",
    "max_leaf_nodes": "controlled evaluation", "cv_folds": "controlled evaluation",
    "crossfit_folds": "controlled evaluation",
    "n_threads": "computation",
}  # fmt: skip
_SECTION_ORDER = ("columns", "slices", "metrics", "intervals and tests", "controlled evaluation", "computation")
#: Short placeholders in the usage line.
_METAVARS: dict[str, str] = {
    "label": "COL", "scores": "COL", "groups": "COL", "features": "COL", "sample_weight": "COL",
    "positive_label": "VALUE", "intersections": "K", "min_group_size": "N", "min_denominator": "N",
    "missing_group": "POLICY", "threshold": "T", "preference_threshold": "T", "metrics": "METRIC",
    "n_resamples": "B", "resampling": "SCHEME", "confidence": "LEVEL", "seed": "S", "adjust": "METHOD",
    "n_permutations": "P", "controls": "V", "max_leaf_nodes": "N", "cv_folds": "K",
    "crossfit_folds": "K", "n_threads": "N",
}  # fmt: skip
#: Options without which no audit can run (their empty defaults mean "required").
_REQUIRED = ("label", "scores", "groups")
#: Choices of list options (the scalar ones carry ``choices`` in their field metadata).
_LIST_CHOICES: dict[str, tuple[str, ...]] = {"metrics": vocabulary.METRICS, "controls": vocabulary.CONTROLS}
_AUDIT_DESCRIPTION = (
    "Disaggregated and controlled evaluation of the predictions in FILE: every metric for every level "
    "of every --group attribute and their intersections, with paired bootstrap intervals, comparisons "
    "with permutation tests, and controlled differences T_a (Pfohl et al. 2025). Results go to --out; "
    "a summary is printed. Lists take several values (--metrics auc precision) or commas "
    "(--control none,Y,R). See docs/audit.md."
)
_EPILOG = (
    "exit status: 0 success, 2 bad usage or input (one line naming the problem), 1 other failure.\n"
    "example: disagg-eval audit examples/data/compas.csv --label two_year_recid --score compas_score "
    "--group race --group sex --control none,Y,R --out compas_audit"
)


class UsageError(ValueError):
    """Bad command line or ``--config`` file: printed as one line, exit status 2."""


# ----------------------------------------------------------------------------------------------
# option fields -> types
# ----------------------------------------------------------------------------------------------
def option_fields() -> list:
    """The dataclass fields of :class:`AuditOptions`, in declaration order."""
    return list(fields(AuditOptions))


def flag_of(name: str) -> str:
    """The command-line flag of option ``name`` (``min_group_size`` -> ``--min-group-size``)."""
    return "--" + FLAG_NAMES.get(name, name).replace("_", "-")


_HINTS = typing.get_type_hints(AuditOptions)


def _kind(name: str) -> tuple[str, type, bool]:
    """(``"scalar"`` or ``"list"``, element type, whether ``None`` is allowed) of a field."""
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


def _default(field_) -> Any:
    if field_.default is not MISSING:
        return field_.default
    return field_.default_factory()  # type: ignore[misc]


def _choices(field_) -> tuple | None:
    choices = field_.metadata.get("choices")
    if choices is None:
        choices = _LIST_CHOICES.get(field_.name)
    return tuple(choices) if choices is not None else None


def _default_text(field_) -> str:
    value = _default(field_)
    if field_.name in _REQUIRED:
        return "required"
    if field_.name == "intersections" and value is None:
        return "all attributes"
    if value is None:
        return "none"
    if isinstance(value, (list, tuple)):
        if not value:
            return "none"
        if field_.name == "metrics" and tuple(value) == vocabulary.METRICS:
            return f"all {len(value)}"
        if field_.name == "controls" and list(value) == ["none"]:
            return "none, i.e. each slice against the overall value only"
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int) and field_.name.startswith("n_") and value >= 10_000:
        return f"{value:,}"
    return str(value)


# ----------------------------------------------------------------------------------------------
# value conversion (shared by the command line and the --config file)
# ----------------------------------------------------------------------------------------------
def _convert_scalar(value: Any, element: type, where: str, *, optional: bool) -> Any:
    if value is None:
        if optional:
            return None
        raise UsageError(f"{where} must not be empty")
    if element is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("yes", "true", "1", "no", "false", "0"):
            return value.lower() in ("yes", "true", "1")
        raise UsageError(f"{where} must be true or false; got {value!r}")
    if element is int:
        if isinstance(value, bool):
            raise UsageError(f"{where} must be an integer; got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            text = value.strip().replace("_", "").replace(",", "")
            if optional and text.lower() in ("all", "none", "null"):
                return None
            try:
                return int(text)
            except ValueError:
                pass
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise UsageError(f"{where} must be an integer; got {value!r}")
    if element is float:
        if isinstance(value, bool):
            raise UsageError(f"{where} must be a number; got {value!r}")
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise UsageError(f"{where} must be a number; got {value!r}")
    # strings (column names, labels, scheme names)
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise UsageError(f"{where} must be a text value; got {value!r}")
    return str(value)


def _split(values: Any) -> list:
    """A list from a list, a single value, or comma-separated text."""
    items = values if isinstance(values, (list, tuple)) else [values]
    out: list = []
    for item in items:
        if isinstance(item, str):
            out.extend(part.strip() for part in item.split(",") if part.strip())
        else:
            out.append(item)
    return out


def _convert(field_, value: Any, where: str) -> Any:
    kind, element, optional = _kind(field_.name)
    choices = _choices(field_)
    if kind == "list":
        if value is None:
            if optional:
                return None
            raise UsageError(f"{where} must list at least one value; got nothing")
        items = [_convert_scalar(v, element, where, optional=False) for v in _split(value)]
        if choices is not None:
            bad = [v for v in items if v not in choices]
            if bad:
                raise UsageError(f"{where} has unknown value(s) {_fmt(bad)}; expected some of {', '.join(choices)}")
        repeated = sorted({str(v) for v in items if items.count(v) > 1})
        if repeated:
            raise UsageError(f"{where} lists {', '.join(repeated)} more than once")
        return items
    converted = _convert_scalar(value, element, where, optional=optional)
    if choices is not None and converted not in choices:
        raise UsageError(f"{where} must be one of {', '.join(choices)}; got {converted!r}")
    return converted


def _fmt(values: Sequence[Any]) -> str:
    shown = ", ".join(repr(v) for v in values[:5])
    return "{" + shown + (", ..." if len(values) > 5 else "") + "}"


def options_from_mapping(mapping: Mapping[str, Any], *, source: str, allow: Sequence[str] = CLI_KEYS) -> dict[str, Any]:
    """Check and convert a mapping of option names to values (a ``--config`` file, a workflow entry).

    Parameters
    ----------
    mapping : mapping
        Keys are :class:`AuditOptions` field names (and ``allow``); values as YAML gives them.
        A list option also takes a single value or comma-separated text.
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
    known = {f.name: f for f in option_fields()}
    out: dict[str, Any] = {}
    for key, value in mapping.items():
        if key in allow:
            if not isinstance(value, (str, os.PathLike)) or not str(value):
                raise UsageError(f"{source}: {key} must be a path; got {value!r}")
            out[key] = str(value)
            continue
        if key not in known:
            spelled = {FLAG_NAMES.get(n, n): n for n in known}
            candidates = list(known) + list(allow) + list(spelled)
            close = difflib.get_close_matches(str(key).replace("-", "_"), candidates, n=1)
            hint = f" (did you mean {spelled.get(close[0], close[0])!r}?)" if close else ""
            raise UsageError(
                f"{source}: unknown option {key!r}{hint}; known options: {', '.join(list(known) + list(allow))}"
            )
        out[key] = _convert(known[key], value, f"{source}: {key}")
    return out


def read_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Options from a YAML ``--config`` file (checked by :func:`options_from_mapping`).

    Raises
    ------
    UsageError
        If the file is missing, is not valid YAML, is not a mapping, or has an unknown key or bad value.
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
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"--config {source}: not valid YAML{where} ({getattr(exc, 'problem', exc)})") from None
    if data is None:
        return {}
    return options_from_mapping(data, source=f"--config {source}")


# ----------------------------------------------------------------------------------------------
# parser
# ----------------------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``disagg-eval audit: error: ...``) and exit status 2."""

    def error(self, message: str) -> typing.NoReturn:
        raise UsageError(f"{message} (see {PROG} audit --help)")


class _Extend(argparse.Action):
    """``nargs="+"`` values (each possibly comma-separated, converted to a list) appended to the list."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        current = list(getattr(namespace, self.dest, None) or [])
        for value in values:
            current.extend(value if isinstance(value, list) else [value])
        setattr(namespace, self.dest, current)


def _argparse_type(field_) -> Callable[[str], Any]:
    where = flag_of(field_.name)
    kind, element, optional = _kind(field_.name)

    def convert(text: str) -> Any:
        try:
            if kind == "list":
                return [_convert_scalar(v, element, where, optional=False) for v in _split(text)]
            return _convert_scalar(text, element, where, optional=optional)
        except UsageError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{where} ")) from None

    convert.__name__ = element.__name__
    return convert


def _add_option(group, field_) -> None:
    kind, element, _ = _kind(field_.name)
    flag = flag_of(field_.name)
    names = [flag]
    if field_.name in FLAG_NAMES:
        names.append("--" + field_.name.replace("_", "-"))  # --scores, --groups, --controls
    choices = _choices(field_)
    help_text = field_.metadata.get("help", "")
    if choices is not None:
        help_text += f"; one{' or more' if kind == 'list' else ''} of {', '.join(choices)}"
    default = _default_text(field_)
    if "(default" not in help_text:  # the help may state its default in words already
        help_text += f" ({default})" if default == "required" else f" (default: {default})"
    help_text = help_text.replace("%", "%%")
    metavar = _METAVARS.get(field_.name, field_.name.upper())
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
                       help="table with one row per person: .csv, .csv.gz, .tsv, .parquet (or 'file' in --config)")  # fmt: skip
    audit.add_argument("--out", default=argparse.SUPPRESS, metavar="DIR",
                       help="output folder, written only if the whole audit succeeds; an earlier audit's "
                            "folder is replaced (default: <FILE name>_audit in the current folder)")  # fmt: skip
    audit.add_argument("--config", default=None, metavar="YAML",
                       help="YAML file with any of these options (names as in docs/audit.md, e.g. "
                            "min_group_size: 50, and file, out); flags given here win (default: none)")  # fmt: skip
    audit.add_argument("--quiet", action="store_true", default=False,
                       help="print no summary and no progress, only warnings and errors (default: no)")  # fmt: skip
    sections = {title: audit.add_argument_group(title) for title in _SECTION_ORDER}
    for field_ in option_fields():
        title = _SECTIONS.get(field_.name)
        if title is None:
            title = "other options"
            if title not in sections:
                sections[title] = audit.add_argument_group(title)
        _add_option(sections[title], field_)
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
            value = _convert(known[key], value, flag_of(key))
        if key not in ("command", "config", "quiet"):
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

    Plain lines are written at most every 10% of a stage (and at its end), so logs stay short.
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
        self.calls = 0

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.calls += 1
        if self.quiet:
            return
        if self.pending:  # held back until the engine has accepted the data
            for text in self.pending:
                self._print(text)
            self.pending.clear()
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
    print(f"{PROG}: warning: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------------------------
def _input_error_types() -> tuple[type[BaseException], ...]:
    """Exceptions meaning bad input: ours, and the audit engine's own class if it has one."""
    from .loading import InputFileError
    from .outputs import OutputDirError

    types_: list[type[BaseException]] = [UsageError, InputFileError, OutputDirError]
    try:
        from . import core

        engine_error = getattr(core, "AuditInputError", None)
        if isinstance(engine_error, type):
            types_.append(engine_error)
    except ImportError:  # pragma: no cover - engine not importable
        pass
    return tuple(types_)


def _check_options(options: dict[str, Any]) -> None:
    """The engine's own check of the option values, without data (if the engine offers one)."""
    try:
        from .inputs import resolve_options as engine_resolve
    except ImportError:  # pragma: no cover - engine without a separate option check
        return
    engine_resolve(None, options)


def _run_audit(data, options: dict[str, Any], progress: _Progress):
    from . import core

    audit = core.audit
    import inspect

    kwargs = dict(options)
    if "progress" in inspect.signature(audit).parameters:
        kwargs["progress"] = progress
    return audit(data, **kwargs)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
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
        0 success, 2 bad usage or input, 1 other failure, 130 interrupted.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    progress = None
    old_showwarning = warnings.showwarning
    warnings.showwarning = _show_warning
    input_errors: tuple[type[BaseException], ...] = (UsageError,)
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help and --version exit 0 through argparse
            return int(exc.code or 0)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        input_errors = _input_error_types()
        file, out, options, seed_is_default = resolve_options(args)
        progress = _Progress(sys.stderr, quiet=args.quiet)
        return _audit_command(file, out, options, seed_is_default, progress=progress, quiet=args.quiet,
                              input_errors=input_errors)  # fmt: skip
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted; nothing was written", file=sys.stderr)
        return 130
    except input_errors as exc:
        print(f"{PROG} audit: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        print(f"{PROG} audit: failed: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return 1
    finally:
        warnings.showwarning = old_showwarning
        if progress is not None:
            progress.close()


def _audit_command(file: Path, out: Path, options: dict[str, Any], seed_is_default: bool, *,
                   progress: _Progress, quiet: bool, input_errors) -> int:  # fmt: skip
    from .loading import load_table, required_columns
    from .outputs import check_out_dir, write_outputs

    check_out_dir(out)
    _check_options(options)  # option values (ranges, names) before the file is read
    columns = required_columns(options)
    started = time.monotonic()
    data = load_table(file, columns=columns)
    progress.message(f"read {file}: {len(data):,} rows, {len(columns)} columns", hold=True)
    calls_before = progress.calls
    try:
        result = _run_audit(data, options, progress)
    except input_errors:
        raise
    except (ValueError, TypeError) as exc:
        # Engines without their own error class validate before the first progress report: an
        # error then is bad input; later it is a failure.
        if progress.calls == calls_before:
            raise UsageError(str(exc)) from exc
        raise
    from .summary import summary_text

    # The report shows the summary without the output folder, so that the same audit gives the same
    # bytes wherever it is written.
    in_report = summary_text(result, input_path=file, seed_is_default=seed_is_default)
    write_outputs(result, out, input_path=file, summary=in_report, progress=progress)
    text = summary_text(result, input_path=file, out_dir=out, seed_is_default=seed_is_default)
    progress.message(f"wrote {out} in {time.monotonic() - started:.1f} s")
    if not quiet:
        print(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
