"""The practitioner's install: the wheel without extras, in a fresh virtual environment, runs an audit.

``pip install disaggregated-eval`` (no extra) must give a working ``disagg-eval audit`` without the
pipeline's packages (Snakemake, folktables, jsonschema, tabulate, pygments: the ``workflow`` extra),
and must install only the library and the audit: the workflow's plumbing
(``workflow/lib/disaggregated_eval_workflow``) stays in the repository. The test builds the wheel
from a copy of the sources (the workflow folder included, so that a packaging rule picking it up
would show), installs it into a plain ``venv`` (no system site-packages, so nothing installed for
the tests can leak in; pip takes the dependencies from its configured indexes and cache) and audits
a small file made from the shipped COMPAS copy.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
# Packages of the `workflow` extra: none of them may be needed by the library or the audit.
WORKFLOW_ONLY = ("snakemake", "folktables", "jsonschema", "tabulate", "pygments")
GUARD = 3600  # seconds; only a guard against a hung install, never a speed limit


# The environment of every command: nothing that would put another copy of the package on the path.
CLEAN_ENV = {
    k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV")
}


def run(*cmd, cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, timeout=GUARD, env=CLEAN_ENV
    )
    assert result.returncode == 0, f"{cmd}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def site_packages_mb(venv: Path) -> float:
    return sum(p.stat().st_size for p in venv.joinpath("lib").rglob("*") if p.is_file()) / 1e6


@pytest.mark.slow
def test_wheel_without_extras_runs_an_audit_in_a_fresh_venv(tmp_path):
    source = tmp_path / "source"
    source.mkdir()
    shutil.copy(REPO / "pyproject.toml", source)
    shutil.copy(REPO / "README.md", source)
    for folder in ("src", "workflow"):
        shutil.copytree(REPO / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", tmp_path / "dist", source, cwd=tmp_path)
    (wheel,) = (tmp_path / "dist").glob("disaggregated_eval-*.whl")
    # Only the library and the audit: the package and its metadata, no workflow module.
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    version = wheel.name.split("-")[1]
    assert tops == {"disaggregated_eval", f"disaggregated_eval-{version}.dist-info"}, tops
    assert not [n for n in names if "workflow" in n or "/pipeline/" in n or "snakemake" in n]
    shipped = {n for n in names if n.startswith("disaggregated_eval/")}
    expected = {
        p.relative_to(REPO / "src").as_posix()
        for p in (REPO / "src" / "disaggregated_eval").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert shipped == expected, sorted(shipped ^ expected)  # every library file, and nothing else

    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", wheel, cwd=tmp_path)
    where = run(python, "-c", "import disaggregated_eval; print(disaggregated_eval.__file__)", cwd=tmp_path).stdout
    assert Path(where.strip()).is_relative_to(venv), where  # the audit below runs the installed wheel

    probe = (
        "import importlib.util, json\n"
        f"print(json.dumps({{m: importlib.util.find_spec(m) is not None for m in {list(WORKFLOW_ONLY)!r}}}))"
    )
    installed = json.loads(run(python, "-c", probe, cwd=tmp_path).stdout)
    assert not any(installed.values()), f"the plain install pulled workflow packages: {installed}"

    data = pd.read_csv(REPO / "examples" / "data" / "compas.csv").head(800)
    data.to_csv(tmp_path / "compas_800.csv", index=False)
    audit = run(
        venv / "bin" / "disagg-eval", "audit", "compas_800.csv", "--label", "two_year_recid",
        "--score", "compas_score", "--group", "race", "--group", "sex",
        "--metrics", "false_positive_rate", "precision", "auc", "--control", "none,Y,R",
        "--n-resamples", "40", "--n-permutations", "40", "--out", "audit_out",
        cwd=tmp_path,
    )  # fmt: skip
    out = tmp_path / "audit_out"
    for name in ("slices.parquet", "slices.csv", "comparisons.csv", "controlled.csv", "report.html", "manifest.json"):
        assert (out / name).is_file(), name
    assert sorted(p.name for p in (out / "figures").glob("*.png")) == sorted(
        [f"controlled_{c}.png" for c in ("none", "Y", "R")]
        + [f"forest_{m}.png" for m in ("auc", "false_positive_rate", "precision")]
        + [f"calibration_{a}.png" for a in ("race", "sex", "race_x_sex")]
    )
    slices = pd.read_csv(out / "slices.csv")
    assert {"race=African-American", "sex=Female"} <= set(slices["slice"])
    assert json.loads((out / "manifest.json").read_text())["n_rows"] == 800
    assert "False positive rate" in audit.stdout
    # The size of the plain install, for the record (the full install adds the workflow extra's packages).
    print(f"plain install: {site_packages_mb(venv):.0f} MB in {venv / 'lib'}")
