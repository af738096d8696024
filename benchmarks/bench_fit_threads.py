"""Thread settings of the model-fitting rules, measured under Snakemake on an ACS-size task.

Snakemake exports ``OMP_NUM_THREADS`` (and the BLAS variables) equal to a job's ``threads``, and the
fit scripts pass ``n_jobs = threads`` to the grid searches, whose joblib (loky) worker processes
inherit the variable: ``threads`` workers with ``threads`` OpenMP threads each, ``threads**2``
threads on ``threads`` cores. This script runs the real rules ``fit_outcome_models`` and
``fit_weight_models`` of the workflow for ACSIncome, extracted from a synthetic PUMS person file
(``--fraction`` of the full 2.06 million person rows), with ``threads: --threads`` for both rules,
in three variants of the two rule scripts (the library is the same):

- ``current``: the behaviour before the fix: ``n_jobs = threads`` workers that inherit
  ``OMP_NUM_THREADS = threads`` (``model_fitting.worker_threads`` disabled), and the process default
  (``OMP_NUM_THREADS``) in the main process;
- ``fixed``: the scripts as committed: ``n_jobs = threads`` workers with one OpenMP thread each
  (``model_fitting`` sets ``joblib.parallel_config(inner_max_num_threads=1)``), ``n_threads = threads`` for
  the refits in the main process;
- ``openmp``: ``n_jobs = 1`` (grid searches in sequence), ``threads`` OpenMP threads.

Variants run one after the other in a round-robin (``--repeats`` rounds), each with
``snakemake --cores threads --forcerun fit_outcome_models fit_weight_models``. For every job it
prints Snakemake's benchmark (wall seconds, CPU seconds of the job's process tree), the load
average before and after, and the mean and maximum number of runnable threads on the machine
(``procs_running`` of ``/proc/stat``, sampled every 0.2 s; the sampler itself counts 1). It checks that
every variant writes bit-identical scores, weights and selection tables (exit status 1 otherwise).

Usage::

    python benchmarks/bench_fit_threads.py [--fraction 0.05] [--threads 2] [--repeats 1]
        [--variants current fixed openmp]
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import yaml

from disaggregated_eval import acs
from disaggregated_eval.synthetic_pums import write_synthetic_person_file

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "benchmarks" / "output" / "fit_threads"
YEAR, HORIZON, STATE = 2018, "5-Year", "CA"
FULL_PERSON_ROWS = 2_060_000  # about 950,000 ACSIncome rows, as for California 2018 5-Year
TASK = "acs_income"
RULES = ("fit_outcome_models", "fit_weight_models")
OUTPUTS = (
    f"results/models/{TASK}/scores.parquet",
    f"results/models/{TASK}/model_selection.csv",
    f"results/weights/{TASK}/weights_estimated.parquet",
    f"results/weights/{TASK}/weight_model_selection.csv",
)
SCRIPT_ARGUMENT = "    n_threads=snakemake.threads,\n"
#: The library import line of the two fit scripts, after which ``current`` patches the worker threads.
ANCHORS = ("from disaggregated_eval import io, outcome_models\n", "from disaggregated_eval import io, weight_models\n")


def variant_script(text: str, variant: str) -> str:
    """A rule script in the given thread variant (``fixed`` is the committed script)."""
    if SCRIPT_ARGUMENT not in text or "    n_jobs=snakemake.threads,\n" not in text:
        raise SystemExit("the fit scripts no longer pass n_jobs=/n_threads=snakemake.threads; update this benchmark")
    if variant == "fixed":
        return text
    if variant == "openmp":
        return text.replace("    n_jobs=snakemake.threads,\n", "    n_jobs=1,\n")
    # current: no per-worker limit, process-default threads in the main process.
    text = text.replace(SCRIPT_ARGUMENT, "")
    # The grid searches look up ``worker_threads`` in ``model_fitting`` (outcome and weight models alike).
    patch = (
        "import contextlib\n\n"
        "from disaggregated_eval import model_fitting as _model_fitting\n\n"
        "_model_fitting.worker_threads = lambda n_jobs: contextlib.nullcontext()  # benchmark: before the fix\n"
    )
    anchors = [a for a in ANCHORS if a in text]
    if len(anchors) != 1:
        raise SystemExit(f"the fit scripts no longer import one of {ANCHORS!r}; update this benchmark")
    return text.replace(anchors[0], anchors[0] + patch)


def make_workdir(path: Path, data_root: Path, threads: int, seed: int) -> None:
    """A Snakemake working directory with a copy of workflow/ (its fit scripts are swapped per variant)."""
    path.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "config", "src", "envs", "profiles"):
        link = path / name
        if not link.exists():
            link.symlink_to(REPO / name, target_is_directory=(REPO / name).is_dir())
    if (path / "workflow").exists():
        shutil.rmtree(path / "workflow")
    shutil.copytree(REPO / "workflow", path / "workflow")
    job = {"threads": threads, "mem_mb": 4000, "runtime": 120}
    config = {
        "seed": seed,
        "acs": {
            "data_root": str(data_root),
            "year": YEAR,
            "horizon": HORIZON,
            "state": STATE,
            "tasks": [TASK],
            "download": False,
        },
        "resources": {
            "acs": {
                "extract": {"threads": 1, "mem_mb": 4000, "runtime": 30},
                "models": job,
                "weights": job,
                "bootstrap": job,
            }
        },
    }
    (path / "bench.yaml").write_text(yaml.safe_dump(config))


class RunnableSampler:
    """Samples ``procs_running`` of /proc/stat (runnable threads on the machine) in the background."""

    def __init__(self, interval: float = 0.2):
        self.interval, self.values, self._stop = interval, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            with open("/proc/stat") as handle:
                for line in handle:
                    if line.startswith("procs_running"):
                        self.values.append(int(line.split()[1]))
            self._stop.wait(self.interval)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def snakemake(workdir: Path, threads: int, *args: str, timeout: float | None = None) -> bool:
    """Run Snakemake; False if it did not finish within ``timeout`` seconds (then it is stopped)."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "--cores",
        str(threads),
        "--configfile",
        "bench.yaml",
        "--directory",
        str(workdir),
        *args,
    ]
    process = subprocess.Popen(
        cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGTERM)  # Snakemake, its job and the job's workers
        process.communicate()
        for lock in (workdir / ".snakemake" / "locks").glob("*"):
            lock.unlink()
        return False
    if process.returncode != 0:
        raise SystemExit(f"snakemake failed:\n{stdout[-4000:]}\n{stderr[-4000:]}")
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fraction", type=float, default=0.05, help="share of the full-size person file, in (0, 1]")
    parser.add_argument("--threads", type=int, default=2, help="threads: of both rules (and --cores)")
    parser.add_argument("--repeats", type=int, default=1, help="round-robin rounds over the variants")
    parser.add_argument(
        "--variants", nargs="+", default=["current", "fixed", "openmp"], choices=["current", "fixed", "openmp"]
    )
    parser.add_argument(
        "--rules",
        nargs="+",
        default=list(RULES),
        choices=list(RULES),
        help="rules to run (fit_weight_models needs fit_outcome_models' scores from an earlier run)",
    )
    parser.add_argument("--timeout", type=float, default=None, help="stop a variant's run after this many seconds")
    parser.add_argument("--seed", type=int, default=2018)
    args = parser.parse_args()
    if not 0 < args.fraction <= 1:
        parser.error(f"--fraction must be in (0, 1]; got {args.fraction}")

    n_rows = round(FULL_PERSON_ROWS * args.fraction)
    data_root = OUTPUT / f"pums_{n_rows}"
    person = acs.person_file_path(data_root, year=YEAR, horizon=HORIZON, state=STATE)
    if not person.is_file():
        write_synthetic_person_file(person, n_rows=n_rows, seed=args.seed, year=YEAR, state=STATE)
    workdir = OUTPUT / "workdir"
    make_workdir(workdir, data_root, args.threads, args.seed)
    snakemake(workdir, args.threads, f"results/data/{TASK}/train.parquet")
    n_train = len(pd.read_parquet(workdir / f"results/data/{TASK}/train.parquet"))
    n_test = len(pd.read_parquet(workdir / f"results/data/{TASK}/test.parquet"))
    print(
        f"{TASK} from {n_rows:,} synthetic person rows (fraction {args.fraction}): {n_train:,} train / "
        f"{n_test:,} test rows; threads: {args.threads}, --cores {args.threads}; {os.cpu_count()} CPUs",
        flush=True,
    )

    rules = [rule for rule in RULES if rule in args.rules]
    target = f"results/weights/{TASK}/weights_estimated.parquet" if "fit_weight_models" in rules else OUTPUTS[0]
    stage = {"fit_outcome_models": "results/models/", "fit_weight_models": "results/weights/"}
    outputs = [path for path in OUTPUTS if any(path.startswith(stage[rule]) for rule in rules)]
    originals = {rule: (REPO / "workflow" / "scripts" / f"{rule}.py").read_text() for rule in RULES}
    rows = []
    saved = OUTPUT / "outputs"
    shutil.rmtree(saved, ignore_errors=True)
    for round_ in range(args.repeats):
        for variant in args.variants:
            for rule, text in originals.items():
                (workdir / "workflow" / "scripts" / f"{rule}.py").write_text(variant_script(text, variant))
            load_before = os.getloadavg()
            start = time.perf_counter()
            with RunnableSampler() as sampler:
                finished = snakemake(workdir, args.threads, target, "--forcerun", *rules, timeout=args.timeout)
            wall = time.perf_counter() - start
            load_after = os.getloadavg()
            runnable = pd.Series(sampler.values, dtype=float)
            if not finished:
                print(
                    f"round {round_} {variant:>8}: stopped after {wall:.0f} s (--timeout); runnable threads mean "
                    f"{runnable.mean():.2f}, max {int(runnable.max())}; load average before {load_before[0]:.2f}, "
                    f"after {load_after[0]:.2f}",
                    flush=True,
                )
                rows += [
                    {
                        "round": round_,
                        "variant": variant,
                        "rule": rule,
                        "job_s": float("nan"),
                        "cpu_s": float("nan"),
                        "max_rss_mb": float("nan"),
                    }
                    for rule in rules
                ]
                continue
            for rule in rules:
                bench = pd.read_csv(workdir / f"benchmarks/output/{rule}/{TASK}.tsv", sep="\t").iloc[-1]
                rows.append(
                    {
                        "round": round_,
                        "variant": variant,
                        "rule": rule,
                        "job_s": bench["s"],
                        "cpu_s": bench["cpu_time"],
                        "max_rss_mb": bench["max_rss"],
                    }
                )
            print(
                f"round {round_} {variant:>8}: {len(rules)} job(s) {wall:6.1f} s (incl. Snakemake); runnable threads mean "
                f"{runnable.mean():.2f}, max {int(runnable.max())}; load average before "
                f"{load_before[0]:.2f}, after {load_after[0]:.2f} (1 min)",
                flush=True,
            )
            copy = saved / f"{variant}_{round_}"
            for path in outputs:
                (copy / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(workdir / path, copy / path)
            for row in rows[-len(rules) :]:
                print(
                    f"    {row['rule']:<20} job {row['job_s']:7.1f} s, CPU {row['cpu_s']:7.1f} s, "
                    f"max RSS {row['max_rss_mb']:6.0f} MB",
                    flush=True,
                )

    table = pd.DataFrame(rows)
    summary = table.groupby(["rule", "variant"], sort=False)[["job_s", "cpu_s"]].median().unstack("variant")
    print("\nmedian job seconds (Snakemake benchmark `s`) and CPU seconds per rule and variant:")
    print(summary.round(1).to_string())
    if "current" in args.variants and "fixed" in args.variants:
        for rule in rules:
            ratio = summary.loc[rule, ("job_s", "current")] / summary.loc[rule, ("job_s", "fixed")]
            print(f"{rule}: current / fixed job time = {ratio:.2f}")
    (OUTPUT / "results.json").write_text(json.dumps(rows, indent=1))

    finished = sorted(saved.iterdir()) if saved.exists() else []
    if not finished:
        return
    reference = finished[0]
    different = [
        f"{target.name}/{path}"
        for target in finished
        for path in outputs
        if not filecmp.cmp(reference / path, target / path, shallow=False)
    ]
    if different:
        print(f"NOT bit-identical to {reference.name}: {different}")
        raise SystemExit(1)
    print(f"all variants and rounds wrote bit-identical outputs ({', '.join(outputs)})")


if __name__ == "__main__":
    main()
