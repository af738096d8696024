"""Where a workflow run spent its time: the jobs' benchmark files summed per rule.

Every rule writes Snakemake's benchmark of each of its jobs to
``benchmarks/output/<rule>/<wildcards>.tsv`` (wall seconds ``s``, ``cpu_time``, ``max_rss`` in MB).
:func:`rule_times` adds them up per rule, so that the README's split of a run's time is measured, not
estimated: the job-minutes of all rules add up to the run's wall time times the jobs that ran side
by side (two on ``--cores 2``), less idle cores.

Run after a workflow run, in its working directory (the repository; this package is not installed,
so ``workflow/lib`` goes on the path)::

    PYTHONPATH=workflow/lib python -m disaggregated_eval_workflow.timings            # benchmarks/output
    PYTHONPATH=workflow/lib python -m disaggregated_eval_workflow.timings other/dir
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pandas as pd

__all__ = ["job_times", "rule_times", "main"]

#: Columns of :func:`rule_times`.
RULE_TIME_COLUMNS = ("rule", "jobs", "job_minutes", "cpu_minutes", "max_rss_mb")


def job_times(folder: str | os.PathLike[str] = "benchmarks/output") -> pd.DataFrame:
    """One row per benchmark file under ``folder``: ``rule, job, wall_s, cpu_s, max_rss_mb``.

    Parameters
    ----------
    folder : path-like, default ``"benchmarks/output"``
        The workflow's benchmark folder (``<folder>/<rule>/<job>.tsv``).

    Returns
    -------
    pandas.DataFrame
        ``rule`` is the first folder below ``folder``, ``job`` the rest of the path without ``.tsv``;
        ``wall_s`` (Snakemake's ``s``), ``cpu_s`` (``cpu_time``), ``max_rss_mb`` (``max_rss``) of the
        file's last line (its last run). Sorted by rule and job.

    Raises
    ------
    FileNotFoundError
        If ``folder`` does not exist.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"no benchmark folder {root} (run the workflow first, from this folder)")
    rows = []
    for path in sorted(root.rglob("*.tsv")):
        parts = path.relative_to(root).with_suffix("").parts
        table = pd.read_csv(path, sep="\t")
        if table.empty:
            continue
        last = table.iloc[-1]
        rows.append(
            {
                "rule": parts[0],
                "job": "/".join(parts[1:]),
                "wall_s": float(last["s"]),
                "cpu_s": float(last.get("cpu_time", float("nan"))),
                "max_rss_mb": float(last.get("max_rss", float("nan"))),
            }
        )
    return pd.DataFrame(rows, columns=["rule", "job", "wall_s", "cpu_s", "max_rss_mb"])


def rule_times(jobs: pd.DataFrame) -> pd.DataFrame:
    """Job time summed per rule, largest first, with a ``total`` row.

    Parameters
    ----------
    jobs : pandas.DataFrame
        :func:`job_times` output.

    Returns
    -------
    pandas.DataFrame
        Columns ``rule, jobs, job_minutes, cpu_minutes, max_rss_mb``: the rule's jobs, their wall
        minutes added up, their CPU minutes added up, the largest peak memory of one job (MB).
    """
    grouped = jobs.groupby("rule", sort=False).agg(
        jobs=("job", "size"), job_s=("wall_s", "sum"), cpu_s=("cpu_s", "sum"), max_rss_mb=("max_rss_mb", "max")
    )
    table = grouped.reset_index().sort_values("job_s", ascending=False, kind="stable")
    total = pd.DataFrame(
        [{"rule": "total", "jobs": int(table["jobs"].sum()), "job_s": table["job_s"].sum(),
          "cpu_s": table["cpu_s"].sum(), "max_rss_mb": table["max_rss_mb"].max()}]
    )  # fmt: skip
    table = pd.concat([table, total], ignore_index=True)
    table["job_minutes"] = (table.pop("job_s") / 60).round(1)
    table["cpu_minutes"] = (table.pop("cpu_s") / 60).round(1)
    return table[list(RULE_TIME_COLUMNS)]


def main(argv: list[str] | None = None) -> int:
    """Print :func:`rule_times` of a benchmark folder (default ``benchmarks/output``)."""
    args = sys.argv[1:] if argv is None else argv
    try:
        table = rule_times(job_times(args[0] if args else "benchmarks/output"))
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(table.to_string(index=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
