"""The plan before an audit's work (issue 36 item 4): stages, their time on this machine, a peak memory that is a cap."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from disaggregated_eval.audit import AuditInputError, audit
from disaggregated_eval.audit.progress import StderrProgress
from disaggregated_eval.audit.work_plan import Stage, plan_line
from disaggregated_eval.memory import AuditSize, audit_peak_parts

ROOT = Path(__file__).resolve().parents[1]


def _frame(n: int, seed: int = 3) -> pd.DataFrame:
    rng = np.random.Generator(np.random.PCG64(seed))
    a = rng.integers(0, 3, n)
    y = rng.binomial(1, 0.3 + 0.1 * (a == 1))
    return pd.DataFrame({"a": a.astype(str), "b": rng.integers(0, 2, n).astype(str), "y": y,
                         "p": np.clip(0.3 * y + rng.random(n) * 0.7, 0, 1)})  # fmt: skip


class _Recorder:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.stages: list[Stage] = []
        self.calls: list[tuple[str, int, int]] = []

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.calls.append((stage, done, total))

    def message(self, text: str, hold: bool = False) -> None:
        self.lines.append(text)

    def plan(self, stages) -> None:
        self.stages = list(stages)


def test_the_plan_names_every_stage_that_reports_progress_before_the_work():
    recorder = _Recorder()
    audit(_frame(3000), label="y", scores=["p"], groups=["a", "b"], controls=["none", "Y", "R"], n_resamples=300,
          n_permutations=200, metrics=["auc", "false_positive_rate"], progress=recorder)  # fmt: skip
    (line,) = [t for t in recorder.lines if t.startswith("plan: ")]
    assert re.search(r"^plan: \d+ weight model\(s\) ~\d+ s, bootstrap ~\d+ s, ", line)
    assert re.search(r"about .+ in all on this machine.*; peak memory about [\d,]+ MB \(limit [\d,]+ MB\)$", line)
    names = [s.name for s in recorder.stages]
    assert names[-1] == "summaries" and "bootstrap" in names and "fairness bootstrap" in names  # AUC, FPR only
    # every stage that reported progress was planned, in the plan's order; the plan came first
    reported = list(dict.fromkeys(stage for stage, _, _ in recorder.calls))
    assert set(reported) <= set(names), set(reported) - set(names)
    assert [n for n in names if n in reported] == reported
    assert all(s.seconds > 0 for s in recorder.stages)
    assert [s.upper_bound for s in recorder.stages if s.name == "permutations"] == [True]


def test_the_plan_line_states_the_tests_bound_apart():
    line = plan_line([Stage("bootstrap", 30.0), Stage("permutations", 7200.0, True), Stage("summaries", 2.0)],
                     peak_bytes=2 * 10**9, limit_mb=16_000)  # fmt: skip
    assert line == ("plan: bootstrap ~30 s, permutations up to 2.0 h, summaries ~2 s; about 32 s in all on this "
                    "machine, the tests up to 2.0 h more; peak memory about 2,000 MB (limit 16,000 MB)")  # fmt: skip


def test_one_overall_line_per_tenth_of_the_plan_in_a_log():
    stream = io.StringIO()
    progress = StderrProgress(stream)
    progress.plan([Stage("weights a V=Y", 1.0), Stage("bootstrap", 8.0), Stage("summaries", 1.0)])
    progress("weights a V=Y", 5, 5)
    for done in range(0, 1001, 50):
        progress("bootstrap", done, 1000)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "disagg-eval: 10% of the plan (weights a V=Y 5/5)"
    assert lines[-1] == "disagg-eval: 90% of the plan (bootstrap 1,000/1,000)"
    shares = [int(re.match(r"disagg-eval: (\d+)%", line).group(1)) for line in lines]
    assert shares == list(range(10, 100, 10))  # one line per tenth, none twice


def test_the_estimate_counts_the_parts_that_grow_with_resamples_and_slices():
    # N18 of the hostile trial: the fairness summary's own bootstrap and the slices' per-resample arrays were
    # not counted (1.71 KB per resample measured against 0.18 estimated at one metric and 23 outputs)
    base = dict(n_rows=2000, n_units=2000, n_models=1, n_families=4, n_slices=12, n_resamples=300_000,
                n_outputs=23, n_metrics=1)  # fmt: skip
    plain = audit_peak_parts(AuditSize(**base))["replicates"]
    with_fairness = audit_peak_parts(AuditSize(**base, n_extra_values=23 * 4))["replicates"]
    assert plain == 300_000 * 8 * (1.25 * 23 + 6 * 12)
    assert with_fairness - plain == 300_000 * 8 * 23 * 4
    assert with_fairness / 300_000 > 1.5e3  # bytes per resample, as measured (1.5 KB after 4152c5f)


def test_a_limit_below_the_estimate_refuses_with_its_parts_before_any_work():
    frame = _frame(2000)
    recorder = _Recorder()
    with pytest.raises(AuditInputError, match=r"would need about [\d,]+ MB of memory at its peak .* MB held now, "
                       r"the work's parts in MB: fixed \d+, rows \d+, weights \d+, replicates [\d,]+, batches 0, outputs \d+\), "
                       r"more than "
                       r"the limit of 500 MB"):  # fmt: skip
        audit(frame, label="y", scores=["p"], groups=["a", "b"], n_resamples=300_000, n_permutations=0,
              metrics=["false_positive_rate"], memory_limit_mb=500, progress=recorder)  # fmt: skip
    assert recorder.calls == []  # refused before any work


_CHILD = r"""
import json, re, sys
import numpy as np, pandas as pd
from disaggregated_eval.audit import audit
rng = np.random.Generator(np.random.PCG64(7))
n = 2000
a = rng.integers(0, 3, n); y = rng.binomial(1, 0.3, n)
frame = pd.DataFrame({"a": a.astype(str), "b": rng.integers(0, 2, n).astype(str), "y": y,
                      "p": np.clip(0.3 * y + rng.random(n) * 0.7, 0, 1)})
lines = []
class P:
    def __call__(self, *args): pass
    def message(self, text, hold=False): lines.append(text)
audit(frame, label="y", scores=["p"], groups=["a", "b"], n_resamples=int(sys.argv[1]), n_permutations=0,
      metrics=["false_positive_rate"], progress=P())
line = next(t for t in lines if t.startswith("plan: "))
estimate = float(re.search(r"peak memory about ([\d,]+) MB", line).group(1).replace(",", ""))
with open("/proc/self/status") as f:
    peak = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmHWM:")) / 1e6
print(json.dumps({"estimate": estimate, "peak": peak}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="the peak is read from Linux's /proc")
def test_the_estimated_peak_is_a_cap_within_1_3_times_the_measured_peak():
    # The hostile trial's N18 shape (one metric, few rows, many resamples): the estimate was 0.15 of the peak,
    # so --memory-limit-mb admitted audits that used twice the limit. The process's peak (VmHWM, libraries and
    # data included) in a fresh process; the estimate is the plan line's. 150,000 resamples: the work adds
    # about 230 MB to the ~240 MB of the imports, so both parts of the estimate are tested.
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run([sys.executable, "-c", _CHILD, "150000"], capture_output=True, text=True, env=env,
                          timeout=600, check=True)  # fmt: skip
    got = json.loads(done.stdout.strip().splitlines()[-1])
    ratio = got["estimate"] / got["peak"]
    assert 1.0 <= ratio <= 1.3, got


def test_the_estimate_counts_the_outputs_of_many_slices():
    # M2 of hostile trial round 4: 6,000 one-row levels of g (18,003 slices, one model, one metric, 200 resamples)
    # were planned at 843 MB and peaked at 1,983 MB (1,936,560 KiB), while the outputs were written
    from disaggregated_eval.memory import audit_peak_bytes

    size = AuditSize(n_rows=6000, n_units=6000, n_models=1, n_families=4, n_slices=18_003, n_resamples=200,
                     n_outputs=36_005, n_metrics=1, n_extra_values=144_020)  # fmt: skip
    estimate = audit_peak_bytes(size, resident=262 * 10**6)  # held before the work, as measured
    assert 1_983e6 <= estimate <= 1.3 * 1_983e6
    parts = audit_peak_parts(size)
    assert estimate == 262 * 10**6 + parts["fixed"] + parts["outputs"]  # written after the work's arrays are freed
