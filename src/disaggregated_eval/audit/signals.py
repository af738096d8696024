"""How the command line stops: exit statuses, and Ctrl-C, SIGTERM and SIGHUP unwinding the same way.

Exit status 0 on success, 2 on bad usage or bad input, 1 on any other failure, 130 when interrupted
(Ctrl-C, SIGINT), 143 when terminated (SIGTERM: a kill, a timeout, ``docker stop``, a cluster's
pre-emption, Snakemake stopping its jobs), 129 on SIGHUP (the terminal or ssh session closed)
(``docs/audit.md``, "Exit codes and bad input"). Within :func:`signals_unwind`, SIGINT raises
:class:`KeyboardInterrupt` and SIGTERM or SIGHUP :class:`Terminated` in the main thread, so that both unwind and every temporary file and folder is removed on the way out; once
one of them has arrived, both are ignored until the block ends, so that a second Ctrl-C (or a SIGTERM
sent to every process of a job after a Ctrl-C) cannot cut that cleanup short. SIGKILL runs no handler:
what it leaves is removed, or restored, by the next audit (:mod:`.outputs`).
"""

from __future__ import annotations

import contextlib
import signal
import typing
from collections.abc import Iterator

from .progress import PROG, one_line

__all__ = [
    "address_space_limit",
    "unloadable",
    "EXIT_OK",
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "Terminated",
    "signals_unwind",
    "interruption",
]

#: Exit statuses (docs/audit.md, "Exit codes and bad input"): 128 + the signal's number when stopped by one.
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 128 + signal.SIGINT  # 130: Ctrl-C
EXIT_TERMINATED = 128 + signal.SIGTERM  # 143: kill, timeout, docker stop, a cluster's pre-emption

_HANDLED = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM or SIGHUP (its number the first argument), so that it unwinds
    like Ctrl-C (temporary files removed)."""

    @property
    def signum(self) -> int:
        """The signal's number (SIGTERM's when none was given)."""
        return int(self.args[0]) if self.args else int(signal.SIGTERM)

    @property
    def name(self) -> str:
        """The signal's name, ``SIGTERM`` or ``SIGHUP``."""
        return signal.Signals(self.signum).name

    @property
    def status(self) -> int:
        """The exit status: 128 + the signal's number (143 after SIGTERM, 129 after SIGHUP).

        Examples
        --------
        >>> Terminated(signal.SIGHUP).status, Terminated().name
        (129, 'SIGTERM')
        """
        return 128 + self.signum


#: The last signal that unwound within :func:`signals_unwind` (read by :func:`interruption`).
_received: int | None = None


def _unwind(signum, frame) -> typing.NoReturn:
    global _received
    _received = signum
    for other in _HANDLED:  # the first signal wins: the cleanup on the way out runs to its end
        signal.signal(other, signal.SIG_IGN)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(signum)


def interruption() -> BaseException:
    """The exception a signal raised, for code whose library swallowed it (DuckDB answers Ctrl-C or SIGTERM
    during a query with its own ``RuntimeError('Query interrupted')``): :class:`Terminated` after a SIGTERM,
    else :class:`KeyboardInterrupt`, so that the command line still exits 130 or 143 with nothing written.

    Examples
    --------
    >>> type(interruption()).__name__ in ("KeyboardInterrupt", "Terminated")
    True
    """
    if _received is not None and _received != signal.SIGINT:
        return Terminated(_received)
    return KeyboardInterrupt()


@contextlib.contextmanager
def signals_unwind() -> Iterator[None]:
    """Within the block, SIGINT raises ``KeyboardInterrupt`` and SIGTERM :class:`Terminated` (module docstring).

    A signal that the process ignored when the block began (``nohup``, a background job of a
    non-interactive shell ignores SIGINT) stays ignored. The previous handlers are restored when the
    block ends. Only the main thread may install a signal handler: elsewhere (a thread of a notebook or
    a server) the block runs with the handlers it has.

    Examples
    --------
    >>> import os, signal
    >>> try:
    ...     with signals_unwind():
    ...         os.kill(os.getpid(), signal.SIGTERM)
    ... except Terminated:
    ...     print("unwound")
    unwound
    """
    global _received
    _received = None  # a signal of an earlier block is not this one's
    previous: dict[int, typing.Any] = {}
    try:
        for signum in _HANDLED:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                previous[signum] = signal.signal(signum, _unwind)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # None: set outside Python


def address_space_limit() -> int | None:
    """The process's address-space limit (``ulimit -v``, ``RLIMIT_AS``) in bytes, or None when there is none.

    Examples
    --------
    >>> limit = address_space_limit()
    >>> limit is None or limit > 0
    True
    """
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, AttributeError, ValueError, OSError):  # pragma: no cover - platforms without it
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


def unloadable(exc: BaseException) -> str | None:
    """The one-line message for a library that could not be loaded under an address-space limit, or None.

    Parameters
    ----------
    exc : BaseException
        An exception raised while importing (``MemoryError``, or an ``ImportError`` or ``OSError`` such as
        "failed to map segment from shared object").

    Returns
    -------
    str or None
        The message naming the limit and the error, when an address-space limit is set and ``exc`` is one of
        those; None otherwise (the failure is another one: a missing package is not hidden).

    Examples
    --------
    >>> unloadable(ValueError("x")) is None, unloadable(OSError(28, "No space left on device")) is None
    (True, True)
    """
    limit = address_space_limit()
    loading = isinstance(exc, MemoryError | ImportError) or (
        isinstance(exc, OSError) and "shared object" in str(exc)  # a full disk or a missing file is not this
    )
    if limit is None or not loading:
        return None
    return (
        f"{PROG}: error: its libraries could not be loaded under the address-space limit (ulimit -v) of "
        f"{limit / 1e6:,.0f} MB ({type(exc).__name__}: {one_line(exc)}); they alone map about 1,800 MB: run it "
        "with a larger limit"
    )
