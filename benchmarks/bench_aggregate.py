"""Out-of-core audits of a Parquet log: the aggregation engines compared, and the goal of issue 24 item 3.

Run: ``python benchmarks/bench_aggregate.py [--rows 200000000] [--folder /tmp] [--score continuous]``

1. Writes a seeded Parquet file of ``--rows`` prediction-log rows in chunks of 10^7 (pyarrow; three
   protected attributes of 4 levels as text, a 0/1 label, a hard 0/1 prediction, or with ``--score
   continuous`` a score with 10^6 distinct values), after checking the free disk space.
2. Aggregates it to counts (one row per distinct attribute, label and prediction combination) with
   DuckDB and with pyarrow's Acero (``pyarrow.acero``: a scan node streaming the file into a hash
   aggregate), each in its own process under ``/usr/bin/time -v`` (wall, CPU, peak resident memory), and
   checks that both give the same counts. The faster engine is the tool's (module
   ``disaggregated_eval.audit.aggregate``).
3. Runs ``disagg-eval audit FILE --aggregate yes`` on it (default metrics, 10,000 resamples) under
   ``/usr/bin/time -v``: the goal is <= 3 minutes wall and <= 2 GB peak memory at 2 x 10^8 rows on 2 cores.
   The tool of the base commit reads the rows with pandas; its peak at 10^6 rows (measured by
   ``benchmarks/bench_memory.py``), scaled, is printed beside it.
4. Deletes the file.

Figures depend on the machine's load: the load average is printed with them.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

CHUNK = 10_000_000
LEVELS = 4
COLUMNS = ["y", "pred", "a", "b", "c"]


def write_log(path: Path, rows: int, *, seed: int, score: str) -> None:
    """A seeded prediction log in Parquet, written chunk by chunk (one row group per chunk)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed)))
    names = {c: np.array([f"{c}{k}" for k in range(LEVELS)], dtype=object) for c in "abc"}
    writer = None
    try:
        for start in range(0, rows, CHUNK):
            n = min(CHUNK, rows - start)
            codes = {c: rng.integers(0, LEVELS, n, dtype=np.int8) for c in "abc"}
            risk = 0.2 + 0.1 * codes["a"] / LEVELS + 0.1 * codes["b"] / LEVELS
            y = (rng.random(n) < risk).astype(np.int8)
            if score == "hard":
                pred = (rng.random(n) < np.where(y == 1, 0.7, 0.2)).astype(np.int8)
            else:  # 10^6 distinct values
                pred = np.round(np.clip(risk + 0.3 * (y - 0.3) + 0.1 * rng.standard_normal(n), 0, 1), 6)
            columns = {"y": pa.array(y), "pred": pa.array(pred)}
            for c in "abc":
                columns[c] = pa.DictionaryArray.from_arrays(pa.array(codes[c]), pa.array(names[c].tolist()))
            table = pa.table(columns)
            if writer is None:
                writer = pq.ParquetWriter(str(path), table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def _timed(argv: list[str]) -> dict:
    """Run ``argv`` under /usr/bin/time -v: wall s, CPU s, peak resident MB, its stdout."""
    started = time.monotonic()
    done = subprocess.run(["/usr/bin/time", "-v", *argv], capture_output=True, text=True)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr[-2000:]}")
    text = done.stderr

    def field(name: str) -> float:
        return float(re.search(rf"{re.escape(name)}: ([0-9.]+)", text).group(1))

    cpu = field("User time (seconds)") + field("System time (seconds)")
    return {"wall": wall, "cpu": cpu, "peak_mb": field("Maximum resident set size (kbytes)") / 1024, "out": done.stdout}


# Each engine in its own process, timed around the aggregation only (imports and start-up excluded;
# /usr/bin/time -v gives the process's peak memory). The result is sorted by the columns in both.
_DUCKDB = """
import sys, time
import duckdb
columns = {columns!r}
keys = ", ".join(columns)
started, cpu = time.perf_counter(), time.process_time()
connection = duckdb.connect(config={{"memory_limit": "1GB"}})
connection.execute("SET enable_progress_bar = false")
table = connection.execute(
    f"SELECT {{keys}}, COUNT(*) AS count FROM read_parquet('{{sys.argv[1]}}') GROUP BY {{keys}} ORDER BY {{keys}}"
).df()
print(time.perf_counter() - started, time.process_time() - cpu)
table.to_parquet(sys.argv[2])
"""

_ACERO = """
import sys, time
import pyarrow.acero as ac
import pyarrow.dataset as ds
columns = {columns!r}
started, cpu = time.perf_counter(), time.process_time()
scan = ac.Declaration("scan", ac.ScanNodeOptions(ds.dataset(sys.argv[1]), columns=columns))
aggregate = ac.Declaration("aggregate", ac.AggregateNodeOptions([([], "hash_count_all", None, "count")], keys=columns))
table = ac.Declaration.from_sequence([scan, aggregate]).to_table(use_threads=True)
frame = table.to_pandas().sort_values(columns).reset_index(drop=True)  # (dictionary columns: pandas sorts them)
print(time.perf_counter() - started, time.process_time() - cpu)
frame.to_parquet(sys.argv[2])
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=float, default=2e7)
    parser.add_argument("--folder", default=tempfile.gettempdir())
    parser.add_argument("--score", choices=("hard", "continuous"), default="hard")
    parser.add_argument("--no-audit", action="store_true", help="compare the engines only")
    parser.add_argument("--seed", type=int, default=20250101)
    parser.add_argument("--audit-args", default="", help="more options of the audit, e.g. '--n-permutations 0'")
    args = parser.parse_args()
    rows = int(args.rows)
    folder = Path(args.folder)
    if not folder.is_dir():
        sys.exit(
            f"--folder {str(folder)!r} is not a folder; expected an existing folder for the temporary Parquet file"
        )
    need = rows * 3  # bytes: about 1.5 per row for hard predictions, 3 with continuous scores
    free = shutil.disk_usage(folder).free
    if free < 2 * need:
        sys.exit(f"{folder}: {free / 1e9:.1f} GB free, need about {2 * need / 1e9:.1f} GB for {rows:,} rows")
    work = Path(tempfile.mkdtemp(prefix="bench-aggregate-", dir=folder))
    try:
        path = work / "log.parquet"
        started = time.monotonic()
        write_log(path, rows, seed=args.seed, score=args.score)
        print(f"wrote {rows:,} rows ({path.stat().st_size / 1e6:.0f} MB, score {args.score}) in "
              f"{time.monotonic() - started:.0f} s; load average {os.getloadavg()[0]:.2f}")  # fmt: skip
        results = {}
        for name, code in (("duckdb", _DUCKDB), ("acero", _ACERO)):
            out = work / f"{name}.parquet"
            results[name] = _timed([sys.executable, "-c", code.format(columns=COLUMNS), str(path), str(out)])
            r = results[name]
            r["wall"], r["cpu"] = (float(v) for v in r["out"].split("\n")[-2].split())
            print(f"{name:>7}: {r['wall']:6.2f} s wall, {r['cpu']:6.2f} s CPU in the aggregation; process peak "
                  f"{r['peak_mb']:6.0f} MB (load average {os.getloadavg()[0]:.2f})")  # fmt: skip
        import pandas as pd

        a, b = pd.read_parquet(work / "duckdb.parquet"), pd.read_parquet(work / "acero.parquet")
        same = np.array_equal(a["count"].to_numpy(), b["count"].to_numpy()) and len(a) == len(b)
        print(f"same counts: {same} ({len(a):,} distinct rows); Acero / DuckDB wall "
              f"{results['acero']['wall'] / results['duckdb']['wall']:.2f}, peak memory "
              f"{results['acero']['peak_mb'] / results['duckdb']['peak_mb']:.2f}")  # fmt: skip
        if args.no_audit:
            return
        tool = Path(sys.executable).with_name("disagg-eval")
        audit = _timed([str(tool), "audit", str(path), "--label", "y", "--score", "pred", "--group", "a,b,c",
                        "--aggregate", "yes", "--out", str(work / "audit"), "--quiet", *args.audit_args.split()])  # fmt: skip
        print(f"  audit: {audit['wall']:6.1f} s wall, {audit['cpu']:6.1f} s CPU, peak {audit['peak_mb']:6.0f} MB "
              f"(goal at 2e8 rows: <= 180 s wall, <= 2,000 MB; load average {os.getloadavg()[0]:.2f})")  # fmt: skip
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
