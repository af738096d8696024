"""ACS task extraction: ``acs.extract_task`` against folktables' loader, at full California size.

Generates (once; reused when present) a synthetic PUMS person file shaped like the 2018 5-Year
California file (about 1.9 million rows, 286 columns) under ``benchmarks/output/`` (not committed),
then runs, each in a fresh Python subprocess so that peak memory is not shared:

- ``ours``: :func:`disaggregated_eval.acs.extract_task` for ACSIncome and ACSPublicCoverage;
- ``folktables``: ``ACSDataSource(...).get_data(states=["CA"], download=False)`` followed by
  ``ACSIncome.df_to_pandas`` and ``ACSPublicCoverage.df_to_pandas``.

For each it prints the wall time (import excluded), the peak resident memory of the subprocess
(``ru_maxrss``) and the resident memory right after the imports, then the ratios. Goal: ours at least
5x faster and at most 1/3 of folktables' peak memory. Both paths must give the same number of rows.

Usage::

    python benchmarks/bench_acs_extraction.py [--n-rows 1900000] [--n-columns 286] [--out-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

YEAR, HORIZON, STATE = 2018, "5-Year", "CA"


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def worker(kind: str, root: Path) -> None:
    """Run one extraction path and print a JSON line with its measurements."""
    import folktables

    from disaggregated_eval import acs

    baseline = _rss_mib()
    rows = {}
    start = time.perf_counter()
    if kind == "ours":
        path = acs.person_file_path(root, year=YEAR, horizon=HORIZON, state=STATE)
        for dataset in acs.TASKS:
            rows[dataset] = len(acs.extract_task(path, dataset, year=YEAR))
    else:
        source = folktables.ACSDataSource(survey_year=str(YEAR), horizon=HORIZON, survey="person", root_dir=str(root))
        data = source.get_data(states=[STATE], download=False)
        for dataset, name in acs.TASKS.items():
            features, _, _ = getattr(folktables, name).df_to_pandas(data)
            rows[dataset] = len(features)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"kind": kind, "seconds": seconds, "peak_mib": peak, "baseline_mib": baseline, "rows": rows}))


def run(kind: str, root: Path) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", kind, "--out-dir", str(root)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-rows", type=int, default=1_900_000)
    parser.add_argument("--n-columns", type=int, default=286)
    parser.add_argument("--seed", type=int, default=2018)
    parser.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent / "output" / "acs_extraction")
    parser.add_argument("--skip-folktables", action="store_true", help="time only our extraction")
    parser.add_argument("--worker", choices=["ours", "folktables"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.out_dir)
        return

    from disaggregated_eval import acs
    from disaggregated_eval.synthetic_pums import write_synthetic_person_file

    root = args.out_dir
    path = acs.person_file_path(root, year=YEAR, horizon=HORIZON, state=STATE)
    meta_path = root / "synthetic_file.json"
    meta = {"n_rows": args.n_rows, "n_columns": args.n_columns, "seed": args.seed}
    if path.is_file() and meta_path.is_file() and json.loads(meta_path.read_text()) == meta:
        print(f"reusing {path}")
    else:
        start = time.perf_counter()
        write_synthetic_person_file(
            path, n_rows=args.n_rows, seed=args.seed, year=YEAR, state=STATE, n_columns=args.n_columns
        )
        meta_path.write_text(json.dumps(meta) + "\n")
        print(f"wrote {path} in {time.perf_counter() - start:.1f} s")
    report = acs.validate_person_file(path, year=YEAR)
    print(f"file: {report['rows']:,} rows, {args.n_columns} columns, {report['bytes'] / 2**20:,.0f} MiB")

    results = {"ours": run("ours", root)}
    if not args.skip_folktables:
        results["folktables"] = run("folktables", root)
    print(f"{'path':<12}{'seconds':>10}{'peak MiB':>11}{'after import MiB':>18}  rows")
    for kind, r in results.items():
        print(f"{kind:<12}{r['seconds']:>10.1f}{r['peak_mib']:>11,.0f}{r['baseline_mib']:>18,.0f}  {r['rows']}")
    if "folktables" in results:
        ours, ft = results["ours"], results["folktables"]
        assert ours["rows"] == ft["rows"], "the two paths kept different numbers of rows"
        speedup = ft["seconds"] / ours["seconds"]
        memory = ours["peak_mib"] / ft["peak_mib"]
        print(f"speed-up (folktables time / ours): {speedup:.1f}x (goal >= 5x)")
        print(f"peak memory (ours / folktables): {memory:.3f} (goal <= 0.333)")
        print(
            f"peak memory above the imports (ours / folktables): "
            f"{(ours['peak_mib'] - ours['baseline_mib']) / (ft['peak_mib'] - ft['baseline_mib']):.3f}"
        )


if __name__ == "__main__":
    main()
