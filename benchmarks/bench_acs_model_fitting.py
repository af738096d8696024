"""Model fitting of one ACS task at full size, on synthetic PUMS data.

Extracts ACSIncome (about 950,000 rows, as for real California 2018 5-Year data) from a synthetic
person file, splits and encodes it (:func:`disaggregated_eval.acs.encode_and_split`), then fits what
the pipeline fits for one task with :mod:`disaggregated_eval.outcome_models` and
:mod:`disaggregated_eval.weight_models`:

- outcome models ``x``, ``xa`` and ``xa_stratified`` (one per group), each a 3-value grid search
  of ``max_leaf_nodes`` with 5-fold CV and a refit;
- weight models ``P(A | X)``, ``P(A | Y)`` (on train) and ``P(A | R)`` for each model type
  (5-fold cross-fitting on the test split, each outer fold a 5-fold grid search).

It prints the time of every fit as it finishes, then the time per fit group, so the dominating fits
are visible. ``--fraction f`` subsamples the extracted rows (stratified on group x label) and also
prints a linear extrapolation to the full size (time / f; gradient boosting with binned features
scales about linearly in the number of rows, so this is a rough guide, not a measurement).

The synthetic file (only the needed columns; 2.06 million person rows give about 950,000 ACSIncome
rows) is written once under ``benchmarks/output/acs_model_fitting`` (not committed) and reused.

Usage::

    python benchmarks/bench_acs_model_fitting.py [--fraction 0.1] [--n-jobs 2] [--task acs_income]

``--n-jobs t`` does what the fit rules do with ``threads: t``: ``t`` grid-search workers with one
OpenMP thread each and ``t`` OpenMP threads for the refits (``benchmarks/bench_fit_threads.py``
measures the alternatives under Snakemake).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from disaggregated_eval import acs, seeds
from disaggregated_eval.synthetic_pums import write_synthetic_person_file

OUTPUT = Path(__file__).resolve().parent / "output"
YEAR, HORIZON, STATE = 2018, "5-Year", "CA"


def person_file(n_rows: int, seed: int) -> Path:
    """A synthetic person file with only the needed columns (written once, reused when present)."""
    root = OUTPUT / "acs_model_fitting"
    path = acs.person_file_path(root, year=YEAR, horizon=HORIZON, state=STATE)
    meta_path = root / "synthetic_file.json"
    meta = {"n_rows": n_rows, "seed": seed}
    if not (path.is_file() and meta_path.is_file() and json.loads(meta_path.read_text()) == meta):
        write_synthetic_person_file(path, n_rows=n_rows, seed=seed, year=YEAR, state=STATE)
        meta_path.write_text(json.dumps(meta) + "\n")
    return path


def group_key(message: str) -> str:
    """Fit group of a progress line of ``outcome_models.fit_outcome_models`` / ``fit_weight_models``."""
    if m := re.match(r"outcome model (\S+)", message):
        return f"outcome {m.group(1)}"
    if m := re.match(r"weight model P\(A \| (\w)\)", message):
        if m.group(1) == "R" and (r := re.search(r"for model '([^']+)'", message)):
            return f"weight R [{r.group(1)}]"
        return f"weight {m.group(1)}"
    return "other"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=list(acs.TASKS), default="acs_income")
    parser.add_argument("--fraction", type=float, default=1.0, help="subsample of the extracted rows, in (0, 1]")
    parser.add_argument("--n-rows", type=int, default=2_060_000, help="person rows of the synthetic file")
    parser.add_argument(
        "--n-jobs",
        type=int,
        default=2,
        help="parallel fits of each grid search (one OpenMP thread each) and OpenMP threads of the refits",
    )
    parser.add_argument("--seed", type=int, default=2018)
    args = parser.parse_args()
    if not 0 < args.fraction <= 1:
        parser.error(f"--fraction must be in (0, 1]; got {args.fraction}")

    from disaggregated_eval import outcome_models, weight_models

    t0 = time.perf_counter()
    path = person_file(args.n_rows, args.seed)
    df = acs.extract_task(path, args.task, year=YEAR)
    n_full = len(df)
    if args.fraction < 1:
        rng = seeds.generator(args.seed, "bench_model_fitting", "subsample")
        strata = df["a"].to_numpy() * 2 + df["y"].to_numpy()
        keep = np.zeros(len(df), dtype=bool)
        for s in np.unique(strata):
            rows = np.flatnonzero(strata == s)
            keep[rng.choice(rows, size=max(round(args.fraction * len(rows)), 10), replace=False)] = True
        df = df.loc[keep].reset_index(drop=True)
    train, test, schema = acs.encode_and_split(df, args.task, seed=args.seed)
    print(
        f"{schema['dataset']}: {n_full:,} extracted rows, fraction {args.fraction} -> {len(train):,} train / "
        f"{len(test):,} test; data preparation {time.perf_counter() - t0:.1f} s; n_jobs={args.n_jobs}",
        flush=True,
    )

    times: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    last = [time.perf_counter()]

    def progress(message: str) -> None:
        now = time.perf_counter()
        key = group_key(message)
        times[key] += now - last[0]  # includes the prediction that follows each weight-model fit
        counts[key] += 1
        last[0] = now
        print(f"  [{now - t0:7.1f} s] {message}", flush=True)

    common = dict(
        features=schema["features"],
        categorical=schema["categorical"],
        seed=args.seed,
        dataset=args.task,
        n_jobs=args.n_jobs,
        n_threads=args.n_jobs,
        progress=progress,
    )
    start = time.perf_counter()
    outcome, _ = outcome_models.fit_outcome_models(train, **common)
    scores = outcome.predict(test)
    outcome_seconds = time.perf_counter() - start
    last[0] = time.perf_counter()
    start = last[0]
    weight_models.fit_weight_models(
        train,
        test,
        {m: scores[m].to_numpy() for m in scores.columns},
        n_groups=len(schema["group_labels"]),
        group_labels=schema["group_labels"],
        **common,
    )
    weight_seconds = time.perf_counter() - start

    total = outcome_seconds + weight_seconds
    scale = 1 / args.fraction
    print(
        f"\n{'fit group':<28}{'fits':>5}{'seconds':>10}{'share':>8}" + (f"{'extrapolated s':>16}" if scale > 1 else "")
    )
    for key in sorted(times, key=times.get, reverse=True):
        line = f"{key:<28}{counts[key]:>5}{times[key]:>10.1f}{times[key] / total:>8.1%}"
        print(line + (f"{times[key] * scale:>16.0f}" if scale > 1 else ""))
    print(
        f"outcome models (incl. test prediction): {outcome_seconds:.1f} s; weight models: {weight_seconds:.1f} s; "
        f"total {total:.1f} s" + (f" -> extrapolated to fraction 1: {total * scale / 60:.1f} min" if scale > 1 else "")
    )
    print(f"peak resident memory: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB")


if __name__ == "__main__":
    main()
