"""How the command line stops: exit statuses, and SIGTERM unwinding like Ctrl-C.

Exit status 0 on success, 2 on bad usage or bad input, 1 on any other failure, 130 when interrupted
(Ctrl-C), 143 when terminated (SIGTERM: a kill, a timeout, ``docker stop``, a cluster's pre-emption)
(``docs/audit.md``, "Exit codes and bad input"). Within :func:`sigterm_unwinds`, SIGTERM raises
:class:`Terminated` in the main thread, so that it unwinds like Ctrl-C and every temporary file and folder
is removed on the way out.
"""

from __future__ import annotations

import contextlib
import signal
import typing
from collections.abc import Iterator

__all__ = [
    "EXIT_OK",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "Terminated",
    "sigterm_unwinds",
    "interruption",
]

#: Exit statuses (docs/audit.md, "Exit codes and bad input"): 128 + the signal's number when stopped by one.
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130: Ctrl-C
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143: kill, timeout, docker stop, a cluster's pre-emption


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM, so that it unwinds like Ctrl-C (temporary files removed)."""


#: Whether SIGTERM arrived within :func:`sigterm_unwinds` (read by :func:`interruption`).
_terminated = False


def _on_sigterm(signum, frame) -> typing.NoReturn:
    global _terminated
    _terminated = True
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the cleanup short
    raise Terminated(signum)


def interruption() -> BaseException:
    """The exception a signal raised, for code whose library swallowed it (DuckDB answers Ctrl-C or SIGTERM
    during a query with its own ``RuntimeError('Query interrupted')``): :class:`Terminated` after a SIGTERM,
    else :class:`KeyboardInterrupt`, so that the command line still exits 130 or 143 with nothing written.
    """
    return Terminated(signal.SIGTERM) if _terminated else KeyboardInterrupt()


@contextlib.contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated`; the previous handler is restored after it.

    Only the main thread may install a signal handler: elsewhere (a thread of a notebook or a server) the
    block runs with the handler it has.
    """
    try:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
