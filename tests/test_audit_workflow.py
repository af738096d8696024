"""The workflow target ``audit``: one job per listed file and model (workflow/rules/audit.smk).

Snakemake runs in a temporary working directory that links the workflow files (as in
tests/test_workflow.py), through ``python -m snakemake``, so nothing is written to the repository.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from disaggregated_eval.audit.errors import UsageError
from disaggregated_eval_workflow.audit_runs import audit_runs

REPO = Path(__file__).resolve().parents[1]
LINKED = ("Snakefile", "workflow", "config", "src", "envs", "profiles", "examples")
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
    out.mkdir(parents=True)
    (out / "summary.json").write_text("{}")
    (out / ".snakemake_timestamp").write_text("")
    now = time.time()
    for path in (out / "summary.json", out / ".snakemake_timestamp", out):
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


@pytest.mark.slow
def test_a_bad_edit_fails_the_dry_run_and_keeps_the_earlier_result(tmp_path):
    """A run audited once, then edited with a bad value (out of range, or a column the file lacks):
    ``snakemake -n`` and ``snakemake`` stop at parse time with a message naming the run and the value,
    and the earlier output folder is byte for byte as it was. Before, only types were checked at parse
    time: the job started, failed, and Snakemake deleted the earlier results/audit/<run>/<model>."""
    workdir = make_workdir(tmp_path / "wd")
    pd.read_csv(REPO / "examples" / "data" / "compas.csv").head(600).to_csv(workdir / "c.csv", index=False)
    run = {"file": "c.csv", "label": "two_year_recid", "scores": ["compas_score"], "groups": ["race"],
           "metrics": ["false_positive_rate"], "controls": ["none"], **TINY_OPTIONS, "n_resamples": 200}  # fmt: skip
    config = write_config(workdir / "audit.yaml", {"runs": {"race": run}})
    first = snakemake(workdir, "--cores", "1", "audit", "--configfile", config)
    assert first.returncode == 0, output_of(first)
    out = workdir / "results" / "audit" / "race" / "compas_score"
    before = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert "manifest.json" in {str(p) for p in before}
    for edit, message in BAD_EDITS:
        write_config(config, {"runs": {"race": {**run, **edit}}})
        for dry in (["--dry-run"], []):
            result = snakemake(workdir, *dry, "--cores", "1", "audit", "--configfile", config)
            text = output_of(result)
            assert result.returncode != 0, text
            assert "audit.runs.race" in text and message in text, (edit, text[-3000:])
            assert "Job stats" not in text, text  # no job was planned
        after = {p.relative_to(out): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
        assert after == before, edit
