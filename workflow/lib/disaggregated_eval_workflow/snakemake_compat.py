"""Guarded work-arounds of two Snakemake bugs: ``--list-changes params`` lists every output, and a SIGINT
to Snakemake leaves its local jobs running.

**The params listing.** In Snakemake 9 (checked on 9.27.1, the newest release allowed by the
``snakemake>=9,<10`` pin when this was last checked), ``snakemake --list-changes params`` prints one
output of every job after an unchanged run: ``Persistence.params_changed(job)`` folds the outputs'
comparisons into a ``ParamsChange`` whose ``|`` returns the right-hand operand when the left one is
empty, so an *unchanged* result still carries the file it was computed for, and
``DAG.get_outputs_with_changes`` iterates over that object's files without asking whether it is a
change (``bool(change)`` is ``False``). Scheduling is not affected (it asks ``bool``); only the listing
is.

Reproduction (Snakemake 9.27.1): run ``snakemake --cores 2 --configfile config/quick.yaml``, then
``snakemake --list-changes params --configfile config/quick.yaml``. With this work-around it prints
nothing; with the call in the ``Snakefile`` removed it prints 98 paths, one output of each of the 98
jobs that write files, although ``snakemake -n`` has nothing to do. A real change is listed either
way (``--config seed=12345`` lists the outputs whose params hold the seed). ``tests/test_workflow.py``
checks the listing end to end on the tiny configuration; :func:`params_change_listing_is_buggy`
tells whether the installed Snakemake still needs the patch. :func:`fix_params_change_listing` makes
iterating over a ``ParamsChange`` that is no change yield no file. It patches nothing when Snakemake
no longer has the bug (the check runs on Snakemake's own class), so an upstream fix makes it a no-op.

**Interrupted local jobs.** On SIGINT (Ctrl-C, or ``kill -INT`` to Snakemake's process) Snakemake
prints "Terminating processes on user request" and calls its executor's ``cancel()``; the local
executor's (``snakemake.executors.local.Executor.cancel``, Snakemake 9.27.1) only waits for its
thread pool, so a job that did not receive the signal itself (``kill -INT``, a supervisor that
signals Snakemake alone) runs to its end, after which Snakemake, already stopping, marks its complete
output incomplete. A terminal's Ctrl-C reaches the jobs only because it signals the whole process
group. :func:`stop_local_jobs_on_cancel` makes ``cancel()`` first give the jobs' processes (every
process below Snakemake's) a moment to stop on their own, then send SIGTERM to those still running,
then wait as before (a second Ctrl-C during that moment cuts it short: SIGTERM at once; it used to
interrupt ``cancel()`` itself, so the jobs ran on to their end): an audit job unwinds (its earlier output untouched, its temporary folder removed,
exit status 143: :mod:`disaggregated_eval.audit.signals`), and any other job stops as ``kill`` stops it.
SIGTERM to Snakemake itself keeps Snakemake's meaning: finish the running jobs, start no other.

The ``Snakefile`` applies both at parse time; the job processes of ``script:`` rules never parse it
(a cluster job does, and runs its one job through the local executor).
"""

from __future__ import annotations

import contextlib
import time

__all__ = ["params_change_listing_is_buggy", "fix_params_change_listing", "stop_local_jobs_on_cancel"]

#: Seconds that :func:`stop_local_jobs_on_cancel` lets the jobs stop on their own before SIGTERM.
GRACE_SECONDS = 2.0


def _params_change_class():
    try:
        from snakemake.persistence import ParamsChange
    except ImportError:  # another Snakemake layout: nothing to fix
        return None
    return ParamsChange


def params_change_listing_is_buggy() -> bool:
    """Whether Snakemake's ``ParamsChange`` lists files although it holds no change.

    Returns
    -------
    bool
        ``True`` if an empty ``ParamsChange`` combined with another empty one for a file yields that
        file when iterated (the bug described in the module docstring), ``False`` otherwise (fixed,
        or a Snakemake without this class).
    """
    cls = _params_change_class()
    if cls is None:
        return False
    try:
        combined = cls() | cls(files={"unchanged.txt"})
        return (not combined) and list(combined) == ["unchanged.txt"]
    except Exception:  # a changed signature: not the class this work-around knows
        return False


def fix_params_change_listing() -> bool:
    """Make ``snakemake --list-changes params`` list only outputs whose params changed.

    Returns
    -------
    bool
        ``True`` if Snakemake had the bug and was patched (in this process), ``False`` if there was
        nothing to fix.
    """
    if not params_change_listing_is_buggy():
        return False
    cls = _params_change_class()
    original = cls.__iter__

    def __iter__(self):  # only a change names its files
        return original(self) if self else iter(())

    cls.__iter__ = __iter__
    return True


def _local_executor_class():
    try:
        from snakemake.executors.local import Executor
    except ImportError:  # another Snakemake layout: nothing to patch
        return None
    return Executor if callable(getattr(Executor, "cancel", None)) else None


def stop_local_jobs_on_cancel(grace: float = GRACE_SECONDS) -> bool:
    """Make Snakemake's local executor stop its running jobs when it is cancelled (module docstring).

    Parameters
    ----------
    grace : float, default :data:`GRACE_SECONDS`
        Seconds the jobs get to stop on their own (a terminal's Ctrl-C has signalled them already)
        before the ones still running get SIGTERM.

    Returns
    -------
    bool
        ``True`` if the executor was patched (in this process), ``False`` if this Snakemake has no local
        executor of the known layout, psutil is missing, or it was patched already.

    Examples
    --------
    >>> first = stop_local_jobs_on_cancel()
    >>> stop_local_jobs_on_cancel()  # once per process
    False
    """
    cls = _local_executor_class()
    try:
        import psutil
    except ImportError:  # pragma: no cover - a dependency of Snakemake
        return False
    if cls is None or getattr(cls.cancel, "_stops_jobs", False):
        return False
    original = cls.cancel

    def alive(process) -> bool:  # without waiting on it: Snakemake's own wait must see its status
        try:
            return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def cancel(self):
        try:
            running = psutil.Process().children(recursive=True)
            deadline = time.monotonic() + grace
            try:
                while running and time.monotonic() < deadline:
                    time.sleep(0.05)
                    running = [p for p in running if alive(p)]
            except KeyboardInterrupt:  # a second Ctrl-C during the grace period: stop them now, not never
                running = [p for p in running if alive(p)]
            for process in running:
                with contextlib.suppress(psutil.Error):  # gone meanwhile
                    process.terminate()
        except psutil.Error:  # pragma: no cover - stopping must go on whatever happens here
            pass
        return original(self)

    cancel._stops_jobs = True
    cls.cancel = cancel
    return True
