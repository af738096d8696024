"""The ``disagg-eval`` command's entry point: the command line (:mod:`.cli`) loaded under a guard.

The command line imports numpy, pandas, pyarrow, numba and scipy, which map about 1.8 GB of address space.
Under an address-space limit (``ulimit -v``, ``prlimit --as``) smaller than that, the import itself fails
(``MemoryError``, or an ``ImportError`` or ``OSError`` "failed to map segment from shared object"); this
module says so in one line with the exit status 2 instead of a traceback. It imports nothing heavy itself.
"""

from __future__ import annotations

import os
import sys

from .progress import PROG, to_stderr
from .signals import EXIT_INTERRUPTED, EXIT_USAGE, address_space_limit, unloadable

__all__ = ["main"]


def main() -> int:
    """Run ``disagg-eval`` (:func:`.cli.main`); its exit status.

    Returns
    -------
    int
        :func:`.cli.main`'s status, or 2 when its libraries cannot be loaded under an address-space limit
        (one line on standard error naming the limit and the error).

    Examples
    --------
    >>> import contextlib, io
    >>> with contextlib.redirect_stdout(io.StringIO()) as out:
    ...     status = main_with(["--version"])
    >>> status, out.getvalue().startswith("disagg-eval")
    (0, True)
    """
    return main_with(sys.argv[1:])


def main_with(argv: list[str]) -> int:
    """:func:`main` with the arguments given (without the program's name).

    Under an address-space limit, pyarrow is told to use the system allocator before it is loaded: its default
    (mimalloc) reserves address space 1 GiB at a time, barely touched, which the limit counts, so that the room
    left for the audit's arrays (``disaggregated_eval.memory.address_space_room_bytes``) would depend on
    whether that reservation happened to fit (an audit refused under 2 GB ran under 1.5 GB). OpenBLAS is given one
    thread (the audit's linear algebra is small; ``--n-threads`` sets the bootstrap's and the fits' threads).
    """
    if address_space_limit() is not None:
        if "pyarrow" not in sys.modules:
            os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
        # OpenBLAS starts a thread per core when scipy loads it; under a limit too small for their stacks it
        # retried without end (a COMPAS audit under 600 MB spun for 80 minutes in scipy.special's import)
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    try:
        from . import loading, outputs  # noqa: F401 - what every run of the command line imports first
        from .cli import main as command_line
    except KeyboardInterrupt:  # Ctrl-C while the libraries load (the first second or two): as later, one line
        to_stderr(f"{PROG}: interrupted; nothing was written")
        return EXIT_INTERRUPTED
    except (MemoryError, ImportError, OSError) as exc:
        message = unloadable(exc)
        if message is None:
            raise
        to_stderr(message)
        return EXIT_USAGE
    return command_line(argv)
