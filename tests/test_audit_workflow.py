"""The workflow target ``audit``: one job per listed file and model (workflow/rules/audit.smk).

Snakemake runs in a temporary working directory that links the workflow files (as in
tests/test_workflow.py), through ``python -m snakemake``, so nothing is written to the repository.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from disaggregated_eval.audit.errors import UsageError
from disaggregated_eval.audit.text import terminal_text
from disaggregated_eval_workflow.audit_runs import audit_runs, check_job_outputs, remove_stale_records

REPO = Path(__file__).resolve().parents[1]
LINKED = ("Snakefile", "workflow", "config", "src", "profiles", "examples")
TIMEOUT = 1800
TINY_OPTIONS = {"n_resamples": 40, "n_permutations": 30, "max_leaf_nodes": [10], "cv_folds": 2, "crossfit_folds": 2}


def make_workdir(path: Path, *, copied: tuple[str, ...] = ()) -> Path:
    """A working directory linking the workflow files (``copied`` ones are copies, to be edited)."""
    path.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        if name in copied:
            shutil.copytree(REPO / name, path / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            (path / name).symlink_to(REPO / name, target_is_directory=(REPO / name).is_dir())
    return path


def snakemake(workdir: Path, *args) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", *map(str, args), "--directory", str(workdir)]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=TIMEOUT)


def output_of(result: subprocess.CompletedProcess) -> str:
    return result.stdout + "\n" + result.stderr


def write_config(path: Path, section: dict) -> Path:
    path.write_text(yaml.safe_dump({"audit": section}))
    return path


def test_example_config_dry_run_has_one_job_per_run_and_model(tmp_path):
    workdir = make_workdir(tmp_path / "wd")
    result = snakemake(workdir, "--dry-run", "--cores", "2", "audit", "--configfile", "examples/audit_compas.yaml")
    assert result.returncode == 0, output_of(result)
    text = output_of(result)
    assert "results/audit/compas_race_sex/compas_score" in text
    assert "results/audit/compas_age_sex/compas_score" in text
    assert "run_audit        2" in text


def test_audit_target_without_runs_names_the_missing_section(tmp_path):
    workdir = make_workdir(tmp_path / "wd")
    result = snakemake(workdir, "--dry-run", "--cores", "1", "audit")
    assert result.returncode != 0
    assert "no audits configured: add an `audit: runs:` section" in output_of(result)


@pytest.mark.parametrize(
    ("section", "needles"),
    [
        ({"runs": {"c": {"file": "x.csv", "label": "y", "scores": ["s"], "groups": ["g"], "min_group_sise": 3}}},
         ["audit.runs.c: unknown option 'min_group_sise'", "did you mean 'min_group_size'"]),
        ({"runs": {"c": {"label": "y", "scores": ["s"], "groups": ["g"]}}}, ["audit.runs.c: missing 'file'"]),
        ({"defaults": {"n_resamples": "many"}}, ["audit.defaults: n_resamples must be an integer; got 'many'"]),
        ({"bogus": 1}, ["bogus"]),  # the schema: unknown key of the section
    ],
)  # fmt: skip
def test_bad_audit_section_stops_before_any_job(tmp_path, section, needles):
    workdir = make_workdir(tmp_path / "wd")
    config = write_config(workdir / "bad.yaml", section)
    result = snakemake(workdir, "--dry-run", "--cores", "1", "audit", "--configfile", config)
    assert result.returncode != 0
    for needle in needles:
        assert needle in output_of(result)


def test_slurm_profile_dry_run(tmp_path):
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.fail('snakemake-executor-plugin-slurm is not installed (pip install -e ".[test,cluster]")')
    workdir = make_workdir(tmp_path / "wd")
    result = snakemake(workdir, "--dry-run", "--workflow-profile", "profiles/slurm", "audit",
                       "--configfile", "examples/audit_compas.yaml")  # fmt: skip
    assert result.returncode == 0, output_of(result)
    assert "run_audit        2" in output_of(result)


# ---- runs module (the section -> jobs), no Snakemake ----------------------------------------------
def test_runs_merge_defaults_config_file_and_own_keys(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.csv").write_text("y,a,b,g\n1,0.5,0.5,x\n")  # the header is read at parse time
    cli_config = tmp_path / "c.yaml"
    cli_config.write_text(yaml.safe_dump({"file": "data.csv", "label": "y", "scores": ["a", "b"], "groups": ["g"],
                                          "min_group_size": 40, "n_resamples": 99, "out": "ignored"}))  # fmt: skip
    jobs = audit_runs({
        "out_dir": "res",
        "defaults": {"n_resamples": 500, "seed": 4, "min_group_size": 20},
        "runs": {"one": {"config": str(cli_config), "n_resamples": 700}, "two": {"config": str(cli_config),
                 "compare_models": True}},
    })  # fmt: skip
    assert sorted(jobs) == ["one/a", "one/b", "two/all_models"]
    one = jobs["one/a"]
    assert one["out"] == "res/one/a" and one["file"] == "data.csv"
    assert one["options"]["scores"] == ["a"]
    assert one["options"]["n_resamples"] == 700  # own key > config file > defaults
    assert one["options"]["min_group_size"] == 40
    assert one["options"]["seed"] == 4
    assert "out" not in one["options"] and "file" not in one["options"]
    assert jobs["two/all_models"]["options"]["scores"] == ["a", "b"]


def test_runs_reject_names_that_cannot_be_folders():
    with pytest.raises(UsageError, match=r"score column of audit\.runs\.r 'my score'"):
        audit_runs({"runs": {"r": {"file": "f.csv", "label": "y", "scores": ["my score"], "groups": ["g"]}}})
    with pytest.raises(UsageError, match="run name 'a/b'"):
        audit_runs({"runs": {"a/b": {"file": "f.csv", "label": "y", "scores": ["s"], "groups": ["g"]}}})
    # a trailing newline is not a folder name either (a pattern's '$' would accept it: hostile trial 4, W16)
    with pytest.raises(UsageError, match=r"run name 'race\\n'"):
        audit_runs({"runs": {"race\n": {"file": "f.csv", "label": "y", "scores": ["s"], "groups": ["g"]}}})


@pytest.mark.parametrize("out_dir", ["/tmp/elsewhere", "../outside", "results/../../outside", "  "])
def test_an_out_dir_outside_the_working_directory_is_refused(out_dir):
    run = {"file": "f.csv", "label": "y", "scores": ["s"], "groups": ["g"]}
    with pytest.raises(UsageError, match=r"audit\.out_dir .*: give a folder inside the workflow's working directory"):
        audit_runs({"out_dir": out_dir, "runs": {"r": run}})
    with pytest.raises(UsageError, match=r"audit\.out_dir 'res/\{x\}': '\{' and '\}' would be read by Snakemake"):
        audit_runs({"out_dir": "res/{x}", "runs": {"r": run}})


@pytest.mark.parametrize(("key", "path"), [("file", "c\x1b]0;pwned\x07.csv"), ("population_margins", "m\u202evsc.csv")])
def test_a_path_the_terminal_would_run_or_hide_is_refused(key, path):
    """Snakemake prints a job's input paths raw: a path with control or invisible characters is refused at
    parse time, shown escaped (issue 32: text from the user made safe for output)."""
    run = {"file": "f.csv", "label": "y", "scores": ["s"], "groups": ["g"], key: path}
    with pytest.raises(UsageError, match=rf"audit\.runs\.r\.{key} .*: holds control or invisible characters") as info:
        audit_runs({"runs": {"r": run}})
    assert terminal_text(str(info.value)) == str(info.value)


def test_a_name_ending_like_a_record_is_refused():
    run = {"file": "f.csv", "label": "y", "scores": ["s.manifest.json"], "groups": ["g"]}
    with pytest.raises(UsageError, match=r"ends in '\.manifest\.json', the ending of the audit jobs' records"):
        audit_runs({"runs": {"r": run}})
    # a model "s.report.html" would have its folder where model "s" has its report copy
    run = {"file": "f.csv", "label": "y", "scores": ["s", "s.report.html"], "groups": ["g"]}
    with pytest.raises(UsageError, match=r"ends in '\.report\.html', the ending of the audit jobs' report copies"):
        audit_runs({"runs": {"r": run}})


def test_records_that_no_longer_describe_their_folder_are_removed(tmp_path, monkeypatch):
    """A record whose folder is gone, or whose folder holds another manifest, is deleted (its job runs again);
    a current record, an empty one (``snakemake --touch``) and a file at a record's path that is no audit's
    manifest (the user's) are kept; folders are never touched."""
    monkeypatch.chdir(tmp_path)
    one, two = (json.dumps({"tool": "disagg-eval audit", "seed": s}).encode() for s in (1, 2))
    jobs = {}
    for name, manifest, kept in (("same", one, one), ("other", two, one), ("gone", None, one), ("touched", one, b""),
                                 ("new", one, None), ("mine", None, b"my own notes")):  # fmt: skip
        folder = Path("res", "r", name)
        if manifest is not None:
            folder.mkdir(parents=True)
            (folder / "manifest.json").write_bytes(manifest)
        if kept is not None:
            folder.parent.mkdir(parents=True, exist_ok=True)
            Path(f"{folder}.manifest.json").write_bytes(kept)
        jobs[f"r/{name}"] = {"out": str(folder), "record": f"{folder}.manifest.json"}
    lines = remove_stale_records(jobs)
    assert [line.split(":")[0] for line in lines] == ["res/r/other.manifest.json", "res/r/gone.manifest.json"]
    assert "differs from it" in lines[0] and "has no manifest.json" in lines[1]
    assert sorted(p.name for p in Path("res", "r").iterdir()) == [
        "mine.manifest.json", "new", "other", "same", "same.manifest.json", "touched", "touched.manifest.json"]  # fmt: skip


REPORT = b"<html>an audit's report</html>"


def fake_output(folder: Path, report: bytes = REPORT) -> tuple[Path, Path]:
    """An audit's folder (its manifest listing ``report``'s SHA-256) with the job's record and report copy
    beside it, as rule run_audit writes them; returns (record, report copy)."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest = json.dumps({"tool": "disagg-eval audit", "files": {"report.html": hashlib.sha256(report).hexdigest()}})
    (folder / "manifest.json").write_text(manifest)
    (folder / "report.html").write_bytes(report)
    record, copy = Path(f"{folder}.manifest.json"), Path(f"{folder}.report.html")
    record.write_text(manifest)
    copy.write_bytes(report)
    return record, copy


def _job(folder: Path) -> dict:
    return {"run": folder.parent.name, "out": str(folder), "record": f"{folder}.manifest.json",
            "report": f"{folder}.report.html"}  # fmt: skip


def test_a_file_of_the_users_at_a_jobs_output_path_refuses_the_run(tmp_path, monkeypatch):
    """Snakemake deletes a job's declared outputs before it runs (issue 32 item 5, hostile trials W14/W15):
    a file at the record's or report copy's path that the workflow did not write refuses the run, naming it;
    the workflow's own (current, touched, stale, half-written) pass, and nothing is deleted."""
    monkeypatch.chdir(tmp_path)
    ok = {}
    ok["current"] = fake_output(Path("res", "r", "current"))
    record, copy = ok["touched"] = fake_output(Path("res", "r", "touched"))
    record.write_bytes(b"")  # snakemake --touch
    copy.write_bytes(b"")
    ok["gone"] = fake_output(Path("res", "r", "gone"))
    shutil.rmtree(Path("res", "r", "gone"))  # its record is stale: the report copy still is the workflow's
    ok["rewritten"] = fake_output(Path("res", "r", "rewritten"))
    other = json.dumps({"tool": "disagg-eval audit", "files": {"report.html": hashlib.sha256(b"new").hexdigest()}})
    Path("res", "r", "rewritten", "manifest.json").write_text(other)  # another audit wrote the folder since
    record, _ = ok["half"] = fake_output(Path("res", "r", "half"))
    record.unlink()  # the job stopped between its report copy and its record
    ok["none"] = (Path("res", "r", "none.manifest.json"), Path("res", "r", "none.report.html"))
    jobs = {f"r/{name}": _job(Path("res", "r", name)) for name in ok}
    check_job_outputs(jobs)
    for name, (record, copy) in ok.items():
        assert record.exists() == (name not in ("half", "none")) and copy.exists() == (name != "none"), name

    for name, user_record, user_report, bad in [
        ("mine_record", b'{"mine": true}', None, "mine_record.manifest.json"),
        ("notes_record", b"my own notes", None, "notes_record.manifest.json"),
        ("mine_report", None, b"my own report", "mine_report.report.html"),  # beside the workflow's record
        ("both", b'{"mine": true}', b"my own report", "both.manifest.json"),
    ]:
        record, copy = fake_output(Path("res", "u", name))
        for path, content in ((record, user_record), (copy, user_report)):
            if content is not None:
                path.write_bytes(content)
        with pytest.raises(UsageError) as caught:
            check_job_outputs({**jobs, f"u/{name}": _job(Path("res", "u", name))})
        assert str(caught.value) == (
            f"audit.runs.u: res/u/{bad} holds a file this workflow did not write ("
            + ("not an audit's manifest" if bad.endswith(".json") else "not the report.html that res/u/mine_report/ "
               "or its record lists")
            + "); Snakemake deletes a job's declared outputs before it runs, so the run is refused: move the file, "
            "or choose another audit.out_dir or run name"
        )  # fmt: skip
        assert (user_record is None or record.read_bytes() == user_record) and (
            user_report is None or copy.read_bytes() == user_report)  # fmt: skip
        shutil.rmtree(Path("res", "u"))
    # a report copy without any record or folder (W14: the folder refused, the user's report beside it)
    Path("res", "w").mkdir()
    Path("res", "w", "m.report.html").write_text("mine")
    with pytest.raises(UsageError, match=r"res/w/m\.report\.html holds a file this workflow did not write"):
        check_job_outputs({"w/m": _job(Path("res", "w", "m"))})
    assert Path("res", "w", "m.report.html").read_text() == "mine"
    # every read is bounded: a report copy larger than any audit's is refused without being read
    with open(Path("res", "w", "m.report.html"), "r+b") as big:
        big.truncate((1 << 30) + 1)  # sparse: no disk used
    with pytest.raises(UsageError, match=r"m\.report\.html holds a file .* \(1,073,741,825 bytes, more than any"):
        check_job_outputs({"w/m": _job(Path("res", "w", "m"))})


def _margins_run(path: Path) -> dict:
    """A run with a margins file, written in ``path`` (the working directory)."""
    (path / "data.csv").write_text("y,s,g\n" + "1,0.7,x\n0,0.2,x\n1,0.6,z\n0,0.4,z\n" * 5)
    (path / "margins.csv").write_text("g,share\nx,0.4\nz,0.6\n")
    return {"file": "data.csv", "label": "y", "scores": ["s"], "groups": ["g"], "population_margins": "margins.csv"}


def test_runs_list_the_files_their_options_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = _margins_run(tmp_path)
    jobs = audit_runs({"runs": {"m": run, "plain": {k: v for k, v in run.items() if k != "population_margins"}}})
    assert jobs["m/s"]["option_files"] == ["margins.csv"]
    assert jobs["plain/s"]["option_files"] == []


def test_an_edited_margins_file_reruns_the_audit(tmp_path):
    # The job's output is made to look up to date (newer than every input), then only the margins file is
    # touched: the dry run must plan run_audit again, naming the margins file as the updated input.
    workdir = make_workdir(tmp_path / "wd")
    config = write_config(workdir / "m.yaml", {"out_dir": "res", "runs": {"m": _margins_run(workdir)}})
    out = workdir / "res" / "m" / "s"
    record, report = fake_output(out)  # the job's declared outputs: copies of the manifest and report
    now = time.time()
    for path in (out / "manifest.json", out, report, record):
        os.utime(path, (now + 1000, now + 1000))
    args = ("--dry-run", "--cores", "1", "audit", "--configfile", config, "--rerun-triggers", "mtime")
    before = snakemake(workdir, *args)
    assert before.returncode == 0, output_of(before)
    assert "Nothing to be done" in output_of(before) and "run_audit        1" not in output_of(before)
    os.utime(workdir / "margins.csv", (now + 2000, now + 2000))
    after = snakemake(workdir, *args)
    assert after.returncode == 0, output_of(after)
    assert "run_audit        1" in output_of(after)
    assert "margins.csv" in output_of(after)


def test_a_rerun_never_deletes_a_file_of_the_users_at_a_jobs_output_path(tmp_path):
    # Hostile trials W14/W15: files of the user's at the record's and report copy's paths; Snakemake would
    # delete them before the job runs. The run is refused when the workflow is parsed; both are kept.
    workdir = make_workdir(tmp_path / "wd")
    config = write_config(
        workdir / "m.yaml", {"out_dir": "res", "runs": {"m": {**_margins_run(workdir), **TINY_OPTIONS}}}
    )
    mine = {
        workdir / "res" / "m" / "s.report.html": b"my own report",
        workdir / "res" / "m" / "s.manifest.json": b'{"mine": true}',
    }
    for path, content in mine.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        result = snakemake(workdir, "--cores", "1", "audit", "--configfile", config)
        text = output_of(result)
        assert result.returncode != 0, text
        assert f"audit.runs.m: res/m/{path.name} holds a file this workflow did not write" in text, text
        assert "move the file, or choose another audit.out_dir or run name" in text and "Job stats" not in text, text
        assert all(p.read_bytes() == c for p, c in mine.items() if p.exists())
    assert sorted(p.name for p in (workdir / "res" / "m").iterdir()) == ["s.manifest.json", "s.report.html"]


def _parquet_folder_run(path: Path) -> dict:
    """A run whose file is a folder of Parquet files (hive partitions ``half=1``, ``half=2``, and a README.txt
    that is not read), written in ``path`` (the working directory)."""
    rows = pd.DataFrame({"y": [1, 0, 1, 0] * 5, "s": [0.7, 0.2, 0.6, 0.4] * 5, "g": ["x", "x", "z", "z"] * 5})
    for half, part in (("1", rows.iloc[:10]), ("2", rows.iloc[10:])):
        (path / "cpq" / f"half={half}").mkdir(parents=True)
        part.to_parquet(path / "cpq" / f"half={half}" / "part-0.parquet")
    (path / "cpq" / "README.txt").write_text("not read")
    return {"file": "cpq", "label": "y", "scores": ["s"], "groups": ["g", "half"]}


def test_a_folder_of_parquet_files_is_a_runs_file_as_on_the_command_line(tmp_path, monkeypatch):
    """The command line reads a folder of Parquet files; the workflow's parse-time check read it as a file
    and refused it as an "unknown file type" (hostile trial 3, W0). Its files are inputs of the job: an edit
    of one reruns it. A folder the command line refuses is refused for the command line's reason."""
    monkeypatch.chdir(tmp_path)
    run = _parquet_folder_run(tmp_path)
    jobs = audit_runs({"runs": {"pq": run}})
    assert jobs["pq/s"]["file"] == "cpq"
    assert jobs["pq/s"]["data_files"] == ["cpq/half=1/part-0.parquet", "cpq/half=2/part-0.parquet"]
    with pytest.raises(UsageError, match=r"^audit\.runs\.pq: cpq: no column\(s\) \['sex'\]; its columns are"):
        audit_runs({"runs": {"pq": {**run, "groups": ["g", "sex"]}}})
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match=r"^audit\.runs\.pq: empty: a folder without Parquet files"):
        audit_runs({"runs": {"pq": {**run, "file": "empty"}}})
    csv = {**run, "file": "d.csv", "groups": ["g"]}
    (tmp_path / "d.csv").write_text("y,s,g\n1,0.5,x\n")
    assert audit_runs({"runs": {"c": csv}})["c/s"]["data_files"] == []


def test_an_edited_file_of_a_parquet_folder_reruns_the_audit(tmp_path):
    workdir = make_workdir(tmp_path / "wd")
    config = write_config(workdir / "pq.yaml", {"out_dir": "res", "runs": {"pq": _parquet_folder_run(workdir)}})
    args = ("--dry-run", "--cores", "1", "audit", "--configfile", config, "--rerun-triggers", "mtime")
    planned = snakemake(workdir, *args)
    assert planned.returncode == 0, output_of(planned)
    assert "input: cpq, cpq/half=1/part-0.parquet, cpq/half=2/part-0.parquet," in output_of(planned)
    out = workdir / "res" / "pq" / "s"
    record, report = fake_output(out)
    now = time.time()
    for path in (out / "manifest.json", out, report, record):
        os.utime(path, (now + 1000, now + 1000))
    before = snakemake(workdir, *args)
    assert before.returncode == 0, output_of(before)
    assert "Nothing to be done" in output_of(before)
    os.utime(workdir / "cpq" / "half=2" / "part-0.parquet", (now + 2000, now + 2000))  # the folders' times unchanged
    after = snakemake(workdir, *args)
    assert after.returncode == 0, output_of(after)
    assert "reason: Updated input files: cpq/half=2/part-0.parquet" in output_of(after)


CANCEL_STOPS_JOBS = """
import signal, subprocess, sys, time, types
from concurrent.futures import ThreadPoolExecutor
from snakemake.executors.local import Executor
from disaggregated_eval_workflow.snakemake_compat import stop_local_jobs_on_cancel

assert stop_local_jobs_on_cancel(grace=0.5)
quick = subprocess.Popen([sys.executable, "-c", "pass"])  # stops on its own within the grace period
slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # a job that got no signal
time.sleep(0.2)
start = time.monotonic()
Executor.cancel(types.SimpleNamespace(pool=ThreadPoolExecutor()))
print(slow.wait(timeout=60), quick.wait(timeout=60), round(time.monotonic() - start, 1))
"""


def test_a_cancelled_local_executor_stops_the_jobs_still_running():
    """Snakemake's local executor, cancelled (SIGINT to Snakemake), waited for its jobs; patched, it gives them
    the grace period, then sends SIGTERM to those still running (in a subprocess: it signals every child)."""
    paths = [str(REPO / "workflow" / "lib"), os.environ.get("PYTHONPATH", "")]  # pytest's pythonpath is not inherited
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    proc = subprocess.run(
        [sys.executable, "-c", CANCEL_STOPS_JOBS], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    slow, quick, seconds = proc.stdout.split()
    assert (int(slow), int(quick)) == (-signal.SIGTERM, 0)
    assert 0.5 <= float(seconds) < 30


CANCEL_TWICE_STOPS_JOBS = """
import os, signal, subprocess, sys, threading, time, types
from concurrent.futures import ThreadPoolExecutor
from snakemake.executors.local import Executor
from disaggregated_eval_workflow.snakemake_compat import stop_local_jobs_on_cancel

# Ctrl-C as a terminal delivers it, whatever this test process inherited (an ignored or blocked SIGINT)
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
assert stop_local_jobs_on_cancel(grace=5.0)
slow = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])  # a job that got no signal
time.sleep(0.2)
threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()  # the second Ctrl-C, within the grace period
start = time.monotonic()
try:
    Executor.cancel(types.SimpleNamespace(pool=ThreadPoolExecutor()))
except KeyboardInterrupt:
    print("interrupted", end=" ")
print(slow.wait(timeout=60), round(time.monotonic() - start, 1))
"""


def test_a_second_ctrl_c_while_the_jobs_get_their_grace_period_stops_them_at_once():
    """Ctrl-C twice (the second one during the grace period) raised KeyboardInterrupt inside the patched
    ``cancel()`` before it sent SIGTERM: the jobs ran on to their end while Snakemake waited for them
    (an interrupted audit rerun finished and replaced the folder). A second interrupt now stops them at once."""
    paths = [str(REPO / "workflow" / "lib"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    proc = subprocess.run(
        [sys.executable, "-c", CANCEL_TWICE_STOPS_JOBS], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    status, seconds = proc.stdout.split()
    assert int(status) == -signal.SIGTERM
    assert float(seconds) < 4.0  # at the second interrupt, not at the end of the 5 s grace period


# ---- a tiny end-to-end run -------------------------------------------------------------------------
@pytest.mark.slow
def test_two_audits_run_in_parallel_and_write_every_output(tmp_path):
    workdir = make_workdir(tmp_path / "wd", copied=("src",))  # a copy of the sources, edited below
    data = pd.read_csv(REPO / "examples" / "data" / "compas.csv").head(1500)
    data.to_csv(workdir / "compas_head.csv", index=False)
    section = {
        "defaults": TINY_OPTIONS,
        "runs": {
            "race": {"file": "compas_head.csv", "label": "two_year_recid", "scores": ["compas_score"],
                     "groups": ["race"], "metrics": ["false_positive_rate", "auc"], "controls": ["none", "Y"]},
            "age_sex": {"file": "compas_head.csv", "label": "two_year_recid", "scores": ["compas_score"],
                        "groups": ["age_cat", "sex"], "metrics": ["precision"], "controls": ["none", "R"]},
        },
    }  # fmt: skip
    config = write_config(workdir / "tiny_audit.yaml", section)
    result = snakemake(workdir, "--cores", "2", "audit", "--configfile", config)
    assert result.returncode == 0, output_of(result)
    for run, metrics, controls, families in (("race", ["false_positive_rate", "auc"], ["none", "Y"], ["race"]),
                                             ("age_sex", ["precision"], ["none", "R"],
                                              ["age_cat", "sex", "age_cat_x_sex"])):  # fmt: skip
        out = workdir / "results" / "audit" / run / "compas_score"
        for name in ("slices.parquet", "slices.csv", "comparisons.parquet", "comparisons.csv", "controlled.parquet",
                     "controlled.csv", "report.html", "manifest.json"):  # fmt: skip
            assert (out / name).is_file(), (run, name)
        assert sorted(p.stem for p in (out / "figures").glob("*.png")) == sorted(
            [f"controlled_{c}" for c in controls]
            + [f"forest_{m}" for m in metrics]
            + [f"calibration_{f}" for f in families]
        )
        manifest = json.loads((out / "manifest.json").read_text())
        assert manifest["options"]["n_resamples"] == 40 and manifest["n_rows"] == 1500
        assert manifest["options"]["metrics"] == metrics
        assert (workdir / "logs" / "run_audit" / run / "compas_score.log").is_file()
        assert (workdir / "benchmarks" / "output" / "run_audit" / run / "compas_score.tsv").is_file()
        # the job's copy of the report, next to its record: what `snakemake --report` shows
        assert out.with_name("compas_score.report.html").read_bytes() == (out / "report.html").read_bytes()
    # `snakemake --report` has both audits' reports, each with its caption filled in (issue 36, item 1).
    report = tmp_path / "report.html"
    made = snakemake(workdir, "--report", report, "audit", "--configfile", config)
    assert made.returncode == 0, output_of(made)
    text = report.read_text()
    start = text.index("var results = ", text.index('<script id="results">')) + len("var results = ")
    results, _ = json.JSONDecoder().raw_decode(text, start)
    assert sorted(results) == [f"results/audit/{run}/compas_score.report.html" for run in ("age_sex", "race")]
    for run in ("age_sex", "race"):
        caption = re.sub(r"<[^>]+>", "", results[f"results/audit/{run}/compas_score.report.html"]["caption"])
        assert f"Audit {run} of the scores compas_score (run {run} of the configuration" in caption, caption
        assert f"the report of the audit's folder results/audit/{run}/compas_score," in caption, caption
    # Up to date afterwards; a changed option reruns only its own job.
    dry = snakemake(workdir, "--dry-run", "--cores", "2", "audit", "--configfile", config)
    assert "Nothing to be done" in output_of(dry)
    # An edit of any library module the audit imports, even indirectly, reruns every audit job: memory.py
    # was missing from the hand-written list the code inputs were before they came from the import walk.
    memory = workdir / "src" / "disaggregated_eval" / "memory.py"
    original = memory.read_text()
    memory.write_text(original + "\n# an edit\n")
    dry = snakemake(workdir, "--dry-run", "--cores", "2", "audit", "--configfile", config)
    assert "run_audit        2" in output_of(dry), output_of(dry)
    memory.write_text(original)
    section["runs"]["race"]["min_group_size"] = 50
    write_config(workdir / "tiny_audit.yaml", section)
    dry = snakemake(workdir, "--dry-run", "--cores", "2", "audit", "--configfile", config)
    assert "run_audit        1" in output_of(dry), output_of(dry)


# ---- a bad edit stops the workflow at parse time and loses nothing (issue 22, item 2) -------------
BAD_EDITS = [
    ({"confidence": float("nan")}, "confidence must be in the open interval (0, 1); got nan"),
    ({"thresholds": ["0.1:inf:0.1"]}, "thresholds item '0.1:inf:0.1': a grid's start and stop must lie in (0, 1)"),
    ({"n_resamples": 10**12}, "n_resamples must be an integer in 1..1000000; got 1000000000000"),
    ({"groups": ["race", "no_such_column"]}, "no column(s) 'no_such_column'"),
    ({"calibration_bins": 10**9}, "calibration_bins must be an integer in 1..1000"),
]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (hidden ones too) by relative path, with its bytes."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def start_snakemake(workdir: Path, *args) -> subprocess.Popen:
    """``snakemake`` in the background, with SIGINT at its default (a test runner may ignore it)."""
    cmd = [sys.executable, "-m", "snakemake", *map(str, args), "--directory", str(workdir)]
    return subprocess.Popen(cmd, cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip


def wait_for_line(path: Path, needle: str, proc: subprocess.Popen, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.is_file() and needle in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            pytest.fail(f"snakemake ended before {needle!r} was logged: {proc.stdout.read()[-3000:]}")
        time.sleep(0.2)
    proc.kill()
    pytest.fail(f"{needle!r} never appeared in {path}")


@pytest.mark.slow
def test_no_failed_refused_or_interrupted_rerun_changes_the_earlier_output(tmp_path):
    """A run audited once keeps its folder byte for byte through every rerun that does not complete
    (issue 22, item 2; issue 32, item 5):

    - a bad edit (out of range, a column the file lacks) stops ``snakemake -n`` and ``snakemake`` at
      parse time, naming the run and the value, with no job planned;
    - an error that only the data show (a ``positive_label`` the label never takes) passes the parse-time
      check: the job runs and fails, naming the value; before, Snakemake then deleted the folder;
    - a file of the user's in the folder is refused (as by ``disagg-eval audit --out``), never deleted;
    - an edited rerun leaves the earlier output in place while it runs, and SIGINT to Snakemake alone
      stops its job (SIGTERM after 2 s; the job unwinds); before, Snakemake had deleted the folder before
      the job started, and the job ran on to its end;
    - the rerun, left to finish, replaces the folder; a folder deleted afterwards makes its job run again.
    """
    workdir = make_workdir(tmp_path / "wd")
    pd.read_csv(REPO / "examples" / "data" / "compas.csv").head(600).to_csv(workdir / "c.csv", index=False)
    run = {"file": "c.csv", "label": "two_year_recid", "scores": ["compas_score"], "groups": ["race"],
           "metrics": ["false_positive_rate"], "controls": ["none"], **TINY_OPTIONS, "n_resamples": 200}  # fmt: skip
    config = write_config(workdir / "audit.yaml", {"runs": {"race": run}})
    args = ("--cores", "1", "audit", "--configfile", config)
    first = snakemake(workdir, *args)
    assert first.returncode == 0, output_of(first)
    out = workdir / "results" / "audit" / "race" / "compas_score"
    record = out.with_name("compas_score.manifest.json")  # the rule's declared output
    before = snapshot(out)
    assert "manifest.json" in before and ".snakemake_timestamp" not in before  # an audit's folder, nothing else
    assert record.read_bytes() == before["manifest.json"]

    # A bad edit: parse time, no job (the real run checked once: it fails at the same place as the dry run).
    for i, (edit, message) in enumerate(BAD_EDITS):
        write_config(config, {"runs": {"race": {**run, **edit}}})
        for dry in (["--dry-run"], []) if i == 0 else (["--dry-run"],):
            result = snakemake(workdir, *dry, *args)
            text = output_of(result)
            assert result.returncode != 0, text
            assert "audit.runs.race" in text and message in text, (edit, text[-3000:])
            assert "Job stats" not in text, text  # no job was planned
        assert snapshot(out) == before, edit

    # An error only the data show: the job fails; the folder stays (its record goes: the job runs again).
    write_config(config, {"runs": {"race": {**run, "positive_label": 7}}})
    result = snakemake(workdir, *args)
    assert result.returncode != 0
    assert "positive_label '7' does not occur in label column 'two_year_recid'" in output_of(result), output_of(result)
    assert snapshot(out) == before and not record.exists()

    # A file of the user's in the folder: refused before the file is read, nothing deleted.
    (out / "notes.md").write_text("mine")
    write_config(config, {"runs": {"race": run}})
    result = snakemake(workdir, *args)
    assert result.returncode != 0
    assert "holds files that the earlier audit did not write: notes.md" in output_of(result), output_of(result)
    assert snapshot(out) == {**before, "notes.md": b"mine"}
    (out / "notes.md").unlink()

    # An edited rerun: the earlier output stays while it runs; SIGINT to Snakemake stops the job.
    write_config(config, {"runs": {"race": {**run, "n_resamples": 300_000}}})
    log = workdir / "logs" / "run_audit" / "race" / "compas_score.log"
    log.unlink()
    proc = start_snakemake(workdir, *args)
    wait_for_line(log, "bootstrap", proc)
    assert snapshot(out) == before
    proc.send_signal(signal.SIGINT)
    text = proc.communicate(timeout=300)[0]
    assert proc.returncode != 0, text
    assert log.read_text().strip().splitlines()[-1] == "disagg-eval: terminated (SIGTERM); nothing was written", text
    assert snapshot(out) == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["compas_score"]  # no temporary folder, no record

    # Left to finish, the rerun replaces the folder and writes its record last.
    write_config(config, {"runs": {"race": {**run, "n_resamples": 300}}})
    result = snakemake(workdir, *args)
    assert result.returncode == 0, output_of(result)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["options"]["n_resamples"] == 300 and record.read_bytes() == (out / "manifest.json").read_bytes()

    # A folder deleted by hand: its record no longer describes it, so its job is planned again.
    shutil.rmtree(out)
    dry = snakemake(workdir, "--dry-run", *args)
    assert dry.returncode == 0, output_of(dry)
    assert "run_audit        1" in output_of(dry), output_of(dry)
    assert f"{record.relative_to(workdir)}: deleted, as" in output_of(dry)
