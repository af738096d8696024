"""The output folder of an audit: nothing lost, nothing half-written, nothing left behind.

- ``--out`` is replaced only when it holds nothing but an earlier audit's unmodified files (its
  manifest lists each with its SHA-256); otherwise the audit is refused, naming the files, and the
  folder is left as it was (also when a file appears while the audit runs).
- Interrupts are real signals sent to a real ``disagg-eval audit`` process while it writes its
  outputs (a wrapper holds it there by sleeping after the figures are rendered): SIGTERM and Ctrl-C
  remove the temporary folder (exit 143 and 130), SIGKILL leaves it, named after the killed
  process, and the next audit writing there removes it.
- ``--out`` may be a symbolic link; CSV cells that a spreadsheet would run as formulas are
  neutralised; model names that are not safe file names give safe, distinct figure names.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from disaggregated_eval.audit import audit, cli
from disaggregated_eval.audit.outputs import TABLES, OutputDirError, check_out_dir, csv_safe, write_outputs

# Accuracy only and no permutations: the smallest audit that writes every kind of output file.
FAST = dict(metrics=["accuracy"], n_resamples=200, n_permutations=0)
TEMPORARY = re.compile(r"\.(?P<name>.+)\.(?P<pid>\d+)-[0-9a-f]{8}\.(tmp|old)")


def frame(n: int = 240, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"y": rng.integers(0, 2, n), "p": rng.random(n).round(3), "g": np.tile(["a", "b", "c"], n)[:n]})


@pytest.fixture(scope="module")
def result():
    return audit(frame(), label="y", scores=["p"], groups=["g"], **FAST)


@pytest.fixture
def earlier(result, tmp_path) -> Path:
    """An earlier audit's folder."""
    return write_outputs(result, tmp_path / "audit")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if TEMPORARY.fullmatch(p.name))


# ---- replacing an earlier audit (issue item 3) ----------------------------------------------------------------
def test_an_earlier_audit_holding_only_its_own_files_is_replaced(result, earlier):
    (earlier / "slices.csv").unlink()  # a file the manifest lists may be missing: still only its files
    write_outputs(result, earlier)
    assert (earlier / "slices.csv").is_file()
    assert leftovers(earlier.parent) == []


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda d: (d / "notes.md").write_text("mine"), "holds files that the earlier audit did not write: notes.md"),
        (lambda d: (d / "figures" / "extra.png").write_bytes(b"x"), "did not write: figures/extra.png"),
        (lambda d: (d / "data").mkdir(), "did not write: data/"),
        (lambda d: (d / "link.csv").symlink_to(d / "slices.csv"), "did not write: link.csv"),
        (lambda d: (d / "slices.csv").write_text("edited"), "were changed since it wrote them (their SHA-256 differs "
                                                           "from manifest.json): slices.csv"),
    ],
)  # fmt: skip
def test_a_folder_with_other_or_modified_files_is_never_replaced(result, earlier, change, needle):
    change(earlier)
    before = snapshot(earlier)
    with pytest.raises(OutputDirError, match=re.escape(needle)):
        check_out_dir(earlier)
    with pytest.raises(OutputDirError, match=re.escape(needle)):
        write_outputs(result, earlier)
    assert snapshot(earlier) == before
    assert leftovers(earlier.parent) == []


def test_a_manifest_larger_than_any_audits_is_not_read_whole(result, earlier, monkeypatch):
    """manifest.json is read to recognise an earlier audit only up to MAX_MANIFEST_BYTES: a larger one (3 GB of
    it was read whole, 3.4 GB of memory, then 'out of memory'; hostile trial 5, BM) is not this tool's, and the
    folder is refused and left as it was. Shown with the bound lowered and the real manifest padded past it."""
    from disaggregated_eval.audit import outputs

    manifest = earlier / "manifest.json"
    manifest.write_bytes(manifest.read_bytes() + b" " * 4096)  # still valid JSON, still this tool's
    before = snapshot(earlier)
    monkeypatch.setattr(outputs, "MAX_MANIFEST_BYTES", manifest.stat().st_size - 1)
    with pytest.raises(OutputDirError):
        check_out_dir(earlier)
    assert snapshot(earlier) == before
    monkeypatch.setattr(outputs, "MAX_MANIFEST_BYTES", manifest.stat().st_size)
    check_out_dir(earlier)  # at the bound: read, and the earlier audit's folder may be replaced


@pytest.mark.parametrize("inner", ["sub", "figures/deeper/still"])
def test_an_output_folder_inside_an_earlier_audits_output_is_refused(result, earlier, inner):
    # WN of hostile trial round 5: --out inside an earlier audit's folder was written, so that folder then held
    # files its audit did not write (a later audit writing it was refused)
    before, paths = snapshot(earlier), sorted(earlier.rglob("*"))
    with pytest.raises(OutputDirError, match=f"is inside {re.escape(str(earlier))}, an earlier audit's output"):
        write_outputs(result, earlier / inner)
    assert snapshot(earlier) == before and sorted(earlier.rglob("*")) == paths  # not even the parent folders


def test_a_data_folder_with_a_copied_manifest_is_refused(result, earlier, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_bytes((earlier / "manifest.json").read_bytes())
    (data / "measurements.csv").write_text("a,b\n1,2\n")
    with pytest.raises(OutputDirError, match=r"did not write: measurements\.csv"):
        write_outputs(result, data)
    assert sorted(p.name for p in data.iterdir()) == ["manifest.json", "measurements.csv"]


def test_a_file_added_while_the_audit_runs_stops_the_swap(result, earlier, monkeypatch):
    from disaggregated_eval.audit import report

    original = report.render_html

    def add_a_file(*args, **kwargs):
        (earlier / "added-meanwhile.txt").write_text("written by someone else during the audit")
        return original(*args, **kwargs)

    monkeypatch.setattr(report, "render_html", add_a_file)
    with pytest.raises(OutputDirError, match=r"did not write: added-meanwhile\.txt"):
        write_outputs(result, earlier)
    assert (earlier / "added-meanwhile.txt").exists() and (earlier / "manifest.json").exists()
    assert leftovers(earlier.parent) == []


def test_out_may_be_a_symbolic_link_to_a_folder(result, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    for _ in range(2):  # written, then replaced
        write_outputs(result, link)
        assert link.is_symlink() and (real / "manifest.json").is_file()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["link", "real"]  # no .old, no .tmp


# ---- interrupted writes leave no litter (issue item 2) ------------------------------------------------------------
WRAPPER = """
import sys, time
from disaggregated_eval.audit import figure_rendering
from disaggregated_eval.audit.cli import main

start = figure_rendering.start_rendering

def start_then_wait(*args, **kwargs):
    rendering = start(*args, **kwargs)
    collect = rendering.result

    def result_then_wait(*a, **k):
        figures = collect(*a, **k)
        print("WRITING", file=sys.stderr, flush=True)  # the tables are in the temporary folder by now
        time.sleep(3600)
        return figures

    rendering.result = result_then_wait
    return rendering

figure_rendering.start_rendering = start_then_wait
sys.exit(main(sys.argv[1:]))
"""


def start_audit_and_wait_until_writing(tmp_path: Path, out_dir: Path) -> subprocess.Popen:
    data = tmp_path / "t.csv"
    frame().to_csv(data, index=False)
    argv = ["audit", str(data), "--label", "y", "--score", "p", "--group", "g", "--metrics", "accuracy",
            "--n-resamples", "200", "--n-permutations", "0", "--out", str(out_dir)]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", WRAPPER, *argv], stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.strip() == "WRITING":
            break
    else:
        pytest.fail(f"the audit ended before writing: {proc.wait()}\n{''.join(seen)}")
    temporaries = [p for p in out_dir.parent.iterdir() if p.name.endswith(".tmp")]
    assert [p.name for p in temporaries] == [p.name for p in temporaries if f".{proc.pid}-" in p.name] != []
    assert {"slices.csv", "comparisons.csv", "controlled.csv"} <= {p.name for p in temporaries[0].iterdir()}
    return proc


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "status", "message"), [(signal.SIGTERM, 143, "terminated (SIGTERM)"),
                                                        (signal.SIGINT, 130, "interrupted"),
                                                        (signal.SIGHUP, 129, "terminated (SIGHUP)")])  # fmt: skip
def test_sigterm_and_ctrl_c_while_writing_remove_the_temporary_folder(result, tmp_path, sig, status, message):
    out_dir = write_outputs(result, tmp_path / "out")  # an earlier audit, which must survive
    before = snapshot(out_dir)
    proc = start_audit_and_wait_until_writing(tmp_path, out_dir)
    proc.send_signal(sig)
    rest = proc.stderr.read()
    assert proc.wait() == status, rest
    assert rest.strip().splitlines()[-1] == f"disagg-eval: {message}; nothing was written"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "t.csv"]  # no .tmp, no .old
    assert snapshot(out_dir) == before


@pytest.mark.slow
def test_a_killed_audit_leaves_its_temporary_folder_and_the_next_audit_removes_it(tmp_path, capsys):
    out_dir = tmp_path / "out"
    proc = start_audit_and_wait_until_writing(tmp_path, out_dir)
    proc.kill()  # SIGKILL: no handler runs
    proc.wait()
    proc.stderr.close()
    left = leftovers(tmp_path)
    assert len(left) == 1 and TEMPORARY.fullmatch(left[0])["pid"] == str(proc.pid) and not out_dir.exists()
    argv = ["audit", tmp_path / "t.csv", "--label", "y", "--score", "p", "--group", "g", "--metrics", "accuracy",
            "--n-resamples", "200", "--n-permutations", "0", "--out", out_dir, "--quiet"]  # fmt: skip
    assert cli.main([str(a) for a in argv]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "t.csv"]


@pytest.mark.slow
def test_a_closed_standard_output_after_writing_is_not_a_failure(tmp_path):
    """``disagg-eval audit ... | head -1``: the pipe closes while the summary is printed, after the output was
    written; the audit exits 0 with one line on standard error, not a BrokenPipeError traceback and status 1
    (hostile trial 4, S1)."""
    data = tmp_path / "t.csv"
    frame().to_csv(data, index=False)
    argv = ["audit", str(data), "--label", "y", "--score", "p", "--group", "g", "--metrics", "accuracy",
            "--n-resamples", "200", "--n-permutations", "0", "--out", str(tmp_path / "out")]  # fmt: skip
    reader, writer = os.pipe()
    os.close(reader)  # nobody reads: the first write of the summary meets a closed pipe
    done = subprocess.run([sys.executable, "-m", "disaggregated_eval.audit.cli", *argv], stdout=writer,
                          stderr=subprocess.PIPE, text=True, check=False)  # fmt: skip
    os.close(writer)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"disagg-eval: standard output was closed while the summary was printed; the audit's output in "
        f"{tmp_path / 'out'} is complete"
    )
    assert (tmp_path / "out" / "manifest.json").is_file()
    # a full device (`> /dev/full`, hostile trial 5, S1d): the same, naming the error
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "disaggregated_eval.audit.cli", *argv, "--seed", "12"],
                              stdout=full, stderr=subprocess.PIPE, text=True, check=False)  # fmt: skip
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"disagg-eval: the summary could not be printed (No space left on device); the audit's output in "
        f"{tmp_path / 'out'} is complete"
    )


KILLED_BETWEEN_RENAMES = """
import os, signal, sys
from disaggregated_eval.audit.cli import main

real_replace = os.replace

def replace(src, dst, *args, **kwargs):
    real_replace(src, dst, *args, **kwargs)
    if str(dst).endswith(".old"):  # the earlier output is aside, the new one not yet in place
        os.kill(os.getpid(), signal.SIGKILL)

os.replace = replace
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_an_output_left_aside_by_an_audit_killed_mid_swap_is_restored_by_the_next(result, tmp_path, capsys):
    """SIGKILL between the swap's two renames leaves no --out and the earlier output in ``.out.<pid>-<token>.old``:
    the next audit's first check renames it back, with a warning, so that an audit that then fails (here on
    its data) leaves it as it was; before, it stayed aside (and the next successful audit deleted it)."""
    out_dir = write_outputs(result, tmp_path / "out")
    before = snapshot(out_dir)
    data = tmp_path / "t.csv"
    frame().to_csv(data, index=False)
    argv = ["audit", str(data), "--label", "y", "--score", "p", "--group", "g", "--metrics", "accuracy",
            "--n-resamples", "200", "--n-permutations", "0", "--out", str(out_dir), "--quiet"]  # fmt: skip
    killed = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, *argv], capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    aside = [n for n in leftovers(tmp_path) if n.endswith(".old")]
    assert not out_dir.exists() and len(aside) == 1
    out_dir.mkdir()  # an empty folder made in its place meanwhile (it holds nothing: replaced by the restored one)
    assert cli.main([*argv[:-1], "--positive-label", "7", "--quiet"]) == 2  # fails on its data, after the check
    err = capsys.readouterr().err
    assert f"restored the earlier audit's output from {aside[0]}" in err and "positive_label '7' does not occur" in err
    assert snapshot(out_dir) == before
    assert not [n for n in leftovers(tmp_path) if n.endswith(".old")]
    # An incomplete folder aside (a removal cut short) is never put back (the next write removes it, as before).
    incomplete = tmp_path / ".out.99999999-0123abcd.old"
    out_dir.rename(incomplete)
    (incomplete / "slices.csv").unlink()
    check_out_dir(out_dir)
    assert not out_dir.exists() and incomplete.is_dir()


def test_stale_temporaries_of_running_processes_and_of_other_folders_are_kept(result, tmp_path):
    mine = tmp_path / f".out.{os.getpid()}-0123abcd.tmp"  # a process that runs: this one
    other = tmp_path / ".other.99999999-0123abcd.tmp"  # another target's
    dead = tmp_path / ".out.99999999-89abcdef.old"  # no such process
    for folder in (mine, other, dead):
        folder.mkdir()
    write_outputs(result, tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["out", mine.name, other.name])


# ---- CSV cells and file names from hostile names (items 1 and 4) ---------------------------------------------------
def test_csv_safe_prefixes_formula_cells_and_leaves_numbers_alone():
    table = pd.DataFrame({
        "slice": ["=HYPERLINK(\"http://evil.example\")", "+1", "-2", "@SUM(1+1)", "\tx", "\ry", "g=a", "overall"],
        "estimate": [-0.5, 1.0, -2.0, 0.0, np.nan, 3.0, -1.0, 0.25],
        "reported": [True, False] * 4,
    })  # fmt: skip
    safe = csv_safe(table)
    assert safe["slice"].tolist() == ["'=HYPERLINK(\"http://evil.example\")", "'+1", "'-2", "'@SUM(1+1)", "'\tx",
                                      "'\ry", "g=a", "overall"]  # fmt: skip
    pd.testing.assert_series_equal(safe["estimate"], table["estimate"])  # numbers untouched (negatives too)
    assert safe["reported"].tolist() == table["reported"].tolist()
    assert table["slice"].iloc[0].startswith("=")  # the input is not modified


def test_formula_cells_in_the_csv_files_and_raw_values_in_parquet(tmp_path):
    data = frame()
    data["g"] = np.where(data["g"] == "a", "=1+1", data["g"])
    res = audit(data.rename(columns={"p": "@risk"}), label="y", scores=["@risk"], groups=["g"], **FAST)
    out_dir = write_outputs(res, tmp_path / "out")
    for name in TABLES:  # every table, the summary analyses' too
        with (out_dir / f"{name}.csv").open(newline="") as handle:
            cells = [cell for row in csv.reader(handle) for cell in row]
        assert not [c for c in cells if c[:1] in ("=", "+", "@", "\t", "\r") or re.match(r"-[^0-9.]", c)], name
    slices = pd.read_parquet(out_dir / "slices.parquet")
    assert set(slices["model"]) == {"@risk"} and "g==1+1" in set(slices["slice"])
    assert "'@risk" in set(pd.read_csv(out_dir / "slices.csv")["model"])


def test_model_names_that_are_not_file_names_give_safe_distinct_figure_names(tmp_path):
    data = frame()
    data["risk/v1"] = data["p"]
    data["risk\\v1"] = (data["p"] * 0.9).round(3)
    data["../../escape"] = (data["p"] * 0.8).round(3)
    res = audit(data, label="y", scores=["risk/v1", "risk\\v1", "../../escape"], groups=["g"], **FAST)
    out_dir = write_outputs(res, tmp_path / "nested" / "out")
    names = sorted(p.name for p in (out_dir / "figures").iterdir())
    stems = {n.rsplit(".", 1)[0] for n in names}
    # the forest plot, one T_a figure per model and the calibration figure of the family g, all distinct
    assert len(stems) == 1 + 3 + 1
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\.(png|svg)", n) for n in names), names
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nested"]  # nothing written outside --out
    assert sorted(p.name for p in (tmp_path / "nested").iterdir()) == ["out"]
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert all(not name.startswith("/") and ".." not in name.split("/") for name in manifest["files"])


KILLED_WHILE_RENDERING = """
import multiprocessing, sys, time
from disaggregated_eval.audit import figure_rendering
from disaggregated_eval.audit.cli import main

start = figure_rendering.start_rendering

def start_then_wait(*args, **kwargs):
    rendering = start(*args, **kwargs)  # the renderers are forked here
    pids = [p.pid for p in multiprocessing.active_children()]
    print("WORKERS " + " ".join(map(str, pids)), file=sys.stderr, flush=True)
    time.sleep(3600)

figure_rendering.start_rendering = start_then_wait
sys.exit(main(sys.argv[1:]))
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return "\nState:\tZ" not in state  # a zombie has exited


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux") or len(os.sched_getaffinity(0)) < 2,
                    reason="figure renderers are forked only on Linux with 2 or more CPUs")  # fmt: skip
def test_a_killed_audit_takes_its_figure_renderers_with_it(tmp_path):
    """SIGKILL runs no cleanup; the forked renderers must not live on, waiting for work for ever."""
    data = tmp_path / "t.csv"
    frame().to_csv(data, index=False)
    argv = ["audit", str(data), "--label", "y", "--score", "p", "--group", "g", "--metrics", "accuracy", "auc",
            "--n-resamples", "200", "--n-permutations", "0", "--out", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WHILE_RENDERING, *argv], stderr=subprocess.PIPE, text=True)
    workers = None
    for line in proc.stderr:
        if line.startswith("WORKERS"):
            workers = [int(p) for p in line.split()[1:]]
            break
    assert workers, f"no renderer was started: {proc.wait()}"
    assert all(_alive(pid) for pid in workers)
    proc.kill()
    proc.wait()
    proc.stderr.close()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if _alive(pid)]


# ---- audits writing one --out at once (issue 22, item 7) -------------------------------------------
def _concurrent_writer(result, out: str, log: str, barrier, slow: float) -> None:
    """A child process: write ``result`` to ``out`` when every writer is ready; record in ``log`` each
    check of the folder (start and end times), the warnings and the outcome."""
    import warnings

    from disaggregated_eval.audit import figure_rendering, outputs

    figure_rendering._renderers = lambda n, n_jobs: 1  # draw in this process: four writers on two cores
    real = outputs._check_replaceable

    def slow_check(out_dir, dest):
        start = time.monotonic()
        time.sleep(slow)  # widen the window in which another writer could swap the folder
        try:
            return real(out_dir, dest)
        finally:
            with open(log, "a") as handle:
                handle.write(json.dumps({"pid": os.getpid(), "check": [start, time.monotonic()]}) + "\n")

    outputs._check_replaceable = slow_check
    barrier.wait()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            outputs.write_outputs(result, out)
            outcome = "ok"
        except Exception as exc:
            outcome = f"{type(exc).__name__}: {exc}"
    with open(log, "a") as handle:
        record = {"pid": os.getpid(), "outcome": outcome, "warnings": [str(w.message) for w in caught]}
        handle.write(json.dumps(record) + "\n")


@pytest.mark.slow
def test_four_audits_writing_one_out_at_once_check_and_swap_one_at_a_time(result, earlier, tmp_path):
    """Four writers replace one earlier audit's folder at once: each checks the folder and swaps its
    output in while holding the lock, so no check overlaps another writer's (without the lock, in 2 of
    20 trials a writer found the folder half replaced and exited 2, "files of the earlier audit were
    changed"); every writer succeeds, the folder holds one audit's complete files, and the writers that
    replaced another's output say so."""
    import multiprocessing

    context = multiprocessing.get_context("fork")
    results = [audit(frame(seed=10 + k), label="y", scores=["p"], groups=["g"], **FAST) for k in range(4)]
    log = tmp_path / "log.jsonl"
    barrier = context.Barrier(4)
    workers = [context.Process(target=_concurrent_writer, args=(r, str(earlier), str(log), barrier, 0.3))
               for r in results]  # fmt: skip
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=600)
        assert w.exitcode == 0
    records = [json.loads(line) for line in log.read_text().splitlines()]
    outcomes = [r for r in records if "outcome" in r]
    assert [r["outcome"] for r in outcomes] == ["ok"] * 4, outcomes
    checks = sorted(r["check"] for r in records if "check" in r)
    assert len(checks) >= 8  # each writer checks before its work and again at its swap
    for (_, end), (start, _) in itertools.pairwise(checks):
        assert start >= end, checks  # one at a time
    replaced = [w for r in outcomes for w in r["warnings"] if "another audit wrote this folder" in w]
    assert len(replaced) == 3, outcomes  # every writer but the first found another's output in place
    manifest = json.loads((earlier / "manifest.json").read_text())
    files = {p.relative_to(earlier).as_posix() for p in earlier.rglob("*") if p.is_file()}
    assert files == set(manifest["files"]) | {"manifest.json"}
    for name, digest in manifest["files"].items():
        assert hashlib.sha256((earlier / name).read_bytes()).hexdigest() == digest
    assert leftovers(earlier.parent) == []


def test_the_input_record_of_a_folder_describes_the_files_read(tmp_path):
    """The manifest's ``input`` of a Parquet folder hashes exactly the files the audit reads (issue 32's
    hostile trial, round 3): before, a ``.pq`` or ``.PARQUET`` file (read) was left out of the hash, and a
    hidden or ``_temporary`` file (not read) was in it, so another ``b.pq`` gave the same SHA-256."""
    from disaggregated_eval.audit.outputs import file_sha256, input_record
    from disaggregated_eval.audit.parquet_files import find_parquet

    folder = tmp_path / "exp"
    (folder / "_tmp").mkdir(parents=True)
    frame = pd.DataFrame({"y": [0, 1, 1, 0], "p": [0.1, 0.9, 0.4, 0.3]})
    frame.to_parquet(folder / "a.parquet")
    frame.to_parquet(folder / "b.pq")
    frame.to_parquet(folder / "c.PARQUET")
    frame.head(1).to_parquet(folder / "_tmp" / "junk.parquet")
    frame.head(1).to_parquet(folder / ".hidden.parquet")
    read = [f.path for f in find_parquet(folder).files]
    assert [p.name for p in read] == ["a.parquet", "b.pq", "c.PARQUET"]
    record = input_record(folder)
    listing = "".join(f"{p.relative_to(folder).as_posix()}\t{file_sha256(p)}\n" for p in read)
    assert record["files"] == 3
    assert record["size_bytes"] == sum(p.stat().st_size for p in read)
    assert record["sha256"] == hashlib.sha256(listing.encode()).hexdigest()
    frame.assign(y=1 - frame["y"]).to_parquet(folder / "b.pq")  # other rows in a file read: another hash
    changed = input_record(folder)
    assert changed["sha256"] != record["sha256"]
    (folder / "_tmp" / "junk.parquet").unlink()  # a file not read: the same hash
    assert input_record(folder) == changed


def test_an_input_changed_during_the_audit_writes_nothing(result, earlier, tmp_path):
    """The manifest's SHA-256 is that of the file audited (hostile trial, round 3: a file replaced while the
    audit ran gave exit 0 and a manifest with the new file's SHA-256, over the old file's rows)."""
    from disaggregated_eval.audit.errors import AuditInputError
    from disaggregated_eval.audit.outputs import file_sha256, input_fingerprint

    data = tmp_path / "t.csv"
    frame().to_csv(data, index=False)
    before = snapshot(earlier)
    read_as = input_fingerprint(data)
    other = tmp_path / "other.csv"
    frame().assign(y=1 - frame()["y"]).to_csv(other, index=False)
    os.replace(other, data)  # replaced while the audit ran (as an export rewrites it)
    with pytest.raises(AuditInputError, match=r"t\.csv: changed while it was audited .* nothing was written"):
        write_outputs(result, earlier, input_path=data, read_as=read_as)
    assert snapshot(earlier) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit", "t.csv"]  # no temporary folder left
    unchanged = input_fingerprint(data)
    write_outputs(result, earlier, input_path=data, read_as=unchanged)
    assert json.loads((earlier / "manifest.json").read_text())["input"]["sha256"] == file_sha256(data)
