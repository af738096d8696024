"""What the command line writes on standard error while it works: progress, held messages, warnings.

:class:`StderrProgress` is the ``progress(stage, done, total)`` callback the command line hands to the
audit: a tqdm bar per stage on a terminal, plain lines otherwise (at most every 10% of a stage, so that
logs stay short). :func:`show_warning` prints a warning as one ``disagg-eval: warning: ...`` line and
:func:`one_line` writes any message on one line. Every text from the data (stage names and messages
carry column and level names) is escaped (:func:`~disaggregated_eval.audit.text.terminal_text`).
On a terminal (:func:`for_stream`) a message longer than the terminal's width is wrapped, its
continuation lines indented; written to a file or a pipe (a log) each message stays one line.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Any

from .text import fit_lines, terminal_text, terminal_width

__all__ = ["PROG", "StderrProgress", "show_warning", "one_line", "for_stream"]

#: The program's name: the command, and the prefix of every line it writes on standard error.
PROG = "disagg-eval"


class StderrProgress:
    """``progress(stage, done, total)``: one overall bar on a terminal once the audit's plan is known
    (:meth:`plan`), a tqdm bar per other stage; plain lines otherwise.

    Parameters
    ----------
    stream : file-like
        Standard error (a terminal when ``stream.isatty()``).
    quiet : bool, default False
        Print nothing (``--quiet``).
    """

    def __init__(self, stream, *, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet or stream is None  # None: Python started with standard error closed
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        if self.tty:
            try:
                import tqdm  # noqa: F401
            except ImportError:  # plain lines without tqdm
                self.tty = False
        self.bars: dict[str, Any] = {}
        self.last: dict[str, int] = {}
        self.pending: list[str] = []
        self.stages: dict[str, float] = {}  # the plan's stages and estimated seconds (:meth:`plan`)
        self.order: list[str] = []
        self.overall: Any = None
        self.overall_tenth = -1

    def plan(self, stages) -> None:
        """The audit's stages (:class:`.work_plan.Stage`, in order): their progress then moves one overall bar
        (a terminal) or prints a line per tenth of the estimated work (otherwise)."""
        self.stages = {terminal_text(s.name): max(float(s.seconds), 1e-3) for s in stages}
        self.order = list(self.stages)

    def _overall(self, stage: str, done: int, total: int) -> None:
        """Move the overall bar: the estimated seconds of the stages before ``stage`` plus its share done."""
        i = self.order.index(stage)
        before = sum(self.stages[name] for name in self.order[:i])
        share = min(1.0, done / total) if total else 1.0
        whole = sum(self.stages.values())
        fraction = min(1.0, (before + share * self.stages[stage]) / whole)
        if self.tty:
            from tqdm import tqdm

            if self.overall is None:
                self.overall = tqdm(total=1000, file=self.stream, leave=False, dynamic_ncols=True,
                                    bar_format="{desc} {percentage:3.0f}%|{bar}| {elapsed}<{remaining}")  # fmt: skip
            self.overall.set_description_str(f"audit: {stage}", refresh=False)
            self.overall.n = round(1000 * fraction)
            self.overall.refresh()
            if i == len(self.order) - 1 and done >= total:
                self.close()
            return
        tenth = int(10 * fraction)
        if tenth > self.overall_tenth:
            self.overall_tenth = tenth
            print(f"{PROG}: {10 * tenth}% of the plan ({stage} {done:,}/{total:,})", file=self.stream, flush=True)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if self.quiet:
            return
        if self.pending:  # held back until the engine has accepted the data
            for text in self.pending:
                self._print(text)
            self.pending.clear()
        stage = terminal_text(stage)
        if stage in self.stages:
            self._overall(stage, done, total)
            return
        if self.tty:
            from tqdm import tqdm

            if self.overall is not None:  # a stage after the plan's (writing outputs): the plan is done
                self.overall.close()
                self.overall = None
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
            return
        for held in self.pending:  # the lines held back come first
            self._print(held)
        self.pending.clear()
        self._print(text)

    def _print(self, text: str) -> None:
        text = for_stream(f"{PROG}: {terminal_text(text)}", self.stream)
        if self.tty and (self.bars or self.overall is not None):
            from tqdm import tqdm

            tqdm.write(text, file=self.stream)
        else:
            try:
                print(text, file=self.stream, flush=True)
            except (OSError, ValueError):  # standard error closed or full: the audit goes on, silently
                self.quiet = True

    def close(self) -> None:
        """Close the bars still open (a stage that stopped early)."""
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()
        if self.overall is not None:
            self.overall.close()
            self.overall = None


def for_stream(line: str, stream) -> str:
    """``line`` as it is written to ``stream``: wrapped to the terminal's width
    (:func:`~disaggregated_eval.audit.text.fit_lines`) when ``stream`` is a terminal, else unchanged
    (one line of a log per message).

    Examples
    --------
    >>> import io
    >>> for_stream("disagg-eval: " + "word " * 40, io.StringIO()).count("\\n")
    0
    """
    if not bool(getattr(stream, "isatty", lambda: False)()):
        return line
    return fit_lines(line, terminal_width())


def one_line(exc: BaseException | str) -> str:
    """A message on one line, with control characters of data-derived text escaped."""
    text = terminal_text(" ".join(str(exc).split()))
    return text or type(exc).__name__


def to_stderr(text: str) -> None:
    """Print a line of the command line's on standard error (escaped for it, :func:`for_stream`); a standard error
    that cannot be written (closed, a full device) is ignored: what is said there never fails an audit."""
    if sys.stderr is None:  # Python started with it closed (print would write to standard output instead)
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):  # closed, full, or gone
        print(for_stream(text, sys.stderr), file=sys.stderr, flush=True)


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` of the command line: ``disagg-eval: warning: <message on one line>``."""
    to_stderr(f"{PROG}: warning: {one_line(message)}")
