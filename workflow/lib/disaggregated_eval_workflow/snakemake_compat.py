"""A guarded work-around for a Snakemake bug that makes ``--list-changes params`` list every output.

In Snakemake 9 (checked on 9.27.1, the newest release allowed by the ``snakemake>=9,<10`` pin when
this was last checked), ``snakemake --list-changes params`` prints one output of every job after an
unchanged run: ``Persistence.params_changed(job)`` folds the outputs' comparisons into a
``ParamsChange`` whose ``|`` returns the right-hand operand when the left one is empty, so an
*unchanged* result still carries the file it was computed for, and ``DAG.get_outputs_with_changes``
iterates over that object's files without asking whether it is a change (``bool(change)`` is
``False``). Scheduling is not affected (it asks ``bool``); only the listing is.

Reproduction (Snakemake 9.27.1): run ``snakemake --cores 2 --configfile config/quick.yaml``, then
``snakemake --list-changes params --configfile config/quick.yaml``. With this work-around it prints
nothing; with the call in the ``Snakefile`` removed it prints 98 paths, one output of each of the 98
jobs that write files, although ``snakemake -n`` has nothing to do. A real change is listed either
way (``--config seed=12345`` lists the outputs whose params hold the seed). ``tests/test_workflow.py``
checks the listing end to end on the tiny configuration; :func:`params_change_listing_is_buggy`
tells whether the installed Snakemake still needs the patch.

:func:`fix_params_change_listing` makes iterating over a ``ParamsChange`` that is no change yield no
file. It patches nothing when Snakemake no longer has the bug (the check runs on Snakemake's own
class), so an upstream fix makes it a no-op. The ``Snakefile`` calls it at parse time; the job
processes never list changes and are left alone.
"""

from __future__ import annotations

__all__ = ["params_change_listing_is_buggy", "fix_params_change_listing"]


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
