"""Tests of the Snakemake workflow: dry runs, config validation, tiny end-to-end runs.

Every Snakemake call runs in a temporary working directory that links the workflow files
(``Snakefile``, ``workflow/``, ``config/``, ``src/``, ``envs/``, ``profiles/``), through
``subprocess.run([sys.executable, "-m", "snakemake", ...])`` (see /work/shared/SNAKEMAKE_NOTES.md), so
nothing is written to the repository. The end-to-end runs use the tiny configs of ``tests/fixtures``.
"""

from __future__ import annotations

import contextlib
import fcntl
import filecmp
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from disaggregated_eval.config import ConfigError, validate_config
from disaggregated_eval.evaluation import TIDY_COLUMNS

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
TINY = FIXTURES / "tiny.yaml"
TINY_ACS = FIXTURES / "tiny_acs.yaml"
LINKED = ("Snakefile", "workflow", "config", "src", "envs", "profiles")
TIMEOUT = 3600  # seconds; a tiny run takes a few minutes on 2 busy cores

# The tidy columns of docs/design.md (evaluation stage); the library may add more (e.g. `reference`).
DESIGN_COLUMNS = [
    "study", "setting", "model", "comparison", "control", "weight_source", "group", "metric",
    "estimate", "ci_low", "ci_high", "n_resamples", "n_undefined",
]  # fmt: skip
CALIBRATION_COLUMNS = [
    "study", "setting", "model", "group", "bin", "n", "mean_score", "fraction_positive", "ci_low", "ci_high",
]  # fmt: skip
METRICS = ["log_loss", "auc", "sensitivity", "specificity", "net_benefit", "precision", "label_rate"]
SIMULATION_FIGURES = ["figure_1"] + [f"figure_B{i}" for i in range(1, 25)]
ACS_FIGURES = [f"figure_B{i}" for i in range(25, 41)]
SIMULATION_TABLES = [
    "results/tables/simulation_metrics.parquet",
    "results/tables/simulation_metrics.csv",
    "results/tables/simulation_calibration.parquet",
    "results/tables/theory_coverage.csv",
]
ACS_TABLES = [
    "results/tables/acs_metrics.parquet",
    "results/tables/acs_metrics.csv",
    "results/tables/acs_calibration.parquet",
    "results/tables/acs_cohort.csv",
    "results/tables/acs_cohort.md",
]


def make_workdir(path: Path) -> Path:
    """A working directory that links the workflow files of the repository."""
    path.mkdir(parents=True, exist_ok=True)
    for name in LINKED:
        link = path / name
        if not link.exists():
            link.symlink_to(REPO / name, target_is_directory=(REPO / name).is_dir())
    return path


def snakemake(workdir: Path, *args: str | Path) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", *map(str, args), "--directory", str(workdir)]
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=TIMEOUT)


def output_of(result: subprocess.CompletedProcess) -> str:
    return result.stdout + "\n" + result.stderr


def tiny_config(name: str) -> dict:
    return yaml.safe_load((FIXTURES / name).read_text())


@contextlib.contextmanager
def exclusive(lock_path: Path):
    """An inter-process lock, so that pytest-xdist workers share one run of an expensive fixture."""
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def shared_run(tmp_path_factory, name: str, *args: str | Path) -> Path:
    """Run Snakemake once per test session (across xdist workers) in a shared folder ``name``."""
    root = tmp_path_factory.getbasetemp().parent  # shared by all xdist workers of the session
    workdir = root / name
    marker = root / f"{name}.result.json"
    with exclusive(root / f"{name}.lock"):
        if not marker.exists():
            make_workdir(workdir)
            result = snakemake(workdir, *args)
            marker.write_text(json.dumps({"returncode": result.returncode, "output": output_of(result)}))
    outcome = json.loads(marker.read_text())
    assert outcome["returncode"] == 0, outcome["output"][-8000:]
    return workdir


# ---------------------------------------------------------------------------------------------
# (a) dry runs
@pytest.mark.parametrize(
    ("configfile", "target"),
    [(None, "all"), (None, "acs"), ("config/quick.yaml", "all"), ("config/quick.yaml", "acs"), ("config/quick.yaml", "paper")],
)  # (None, "paper") is test_dry_run_counts_jobs_per_dataset
def test_dry_run(tmp_path, configfile, target):
    workdir = make_workdir(tmp_path / "wd")
    extra = ["--configfile", configfile] if configfile else []
    result = snakemake(workdir, target, "-n", "--cores", "2", *extra)  # targets first: --configfile takes a list
    assert result.returncode == 0, output_of(result)
    assert "Job stats" in result.stdout
    assert not (workdir / "results").exists()


def test_dry_run_counts_jobs_per_dataset(tmp_path):
    """One job per dataset and stage, so datasets run in parallel (10 settings, 2 ACS tasks)."""
    workdir = make_workdir(tmp_path / "wd")
    result = snakemake(workdir, "-n", "--cores", "2", "paper")
    assert result.returncode == 0, output_of(result)
    counts = {}
    for line in result.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    assert counts["simulate_setting"] == 10
    assert counts["extract_acs_task"] == 2
    assert counts["fit_outcome_models"] == 12
    assert counts["bootstrap_metrics"] == 12
    assert counts["compute_oracle_weights"] == 10
    assert counts["obtain_pums_file"] == 1


def test_slurm_profile_parses(tmp_path):
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.skip('snakemake-executor-plugin-slurm is not installed (pip install -e ".[cluster]")')
    workdir = make_workdir(tmp_path / "wd")
    result = snakemake(workdir, "--dry-run", "--workflow-profile", "profiles/slurm")
    assert result.returncode == 0, output_of(result)


def test_lint(tmp_path):
    workdir = make_workdir(tmp_path / "wd")
    result = snakemake(workdir, "--lint")
    assert result.returncode == 0, output_of(result)


# ---------------------------------------------------------------------------------------------
# (b) bad configuration values stop the run at parse time, naming the key and the value
BAD_CONFIGS = [
    ({"simulation": {"settings": ["covariate_shift", "no_such_setting"]}}, ["simulation.settings", "no_such_setting"]),
    ({"simulation": {"n_train": -5}}, ["simulation.n_train", "-5"]),
    ({"evaluation": {"n_resamples": 0}}, ["evaluation.n_resamples", "0"]),
    ({"models": {"max_leaf_nodes": [10, -1]}}, ["models.max_leaf_nodes", "-1"]),
    ({"models": {"max_leaf_nodes": "10"}}, ["models.max_leaf_nodes", "'10'"]),
    ({"models": {"max_leaf_nodes": []}}, ["models.max_leaf_nodes", "[]"]),
    ({"acs": {"tasks": ["acs_income", "acs_employment"]}}, ["acs.tasks", "acs_employment"]),
]


@pytest.mark.parametrize(("override", "expected"), BAD_CONFIGS, ids=lambda v: json.dumps(v)[:40])
def test_bad_config_fails_dry_run(tmp_path, override, expected):
    workdir = make_workdir(tmp_path / "wd")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(override))
    result = snakemake(workdir, "-n", "--cores", "1", "--configfile", bad)
    text = output_of(result)
    assert result.returncode != 0, text
    for fragment in expected:
        assert fragment in text, text
    assert "Job stats" not in text


def test_bad_config_runs_no_job(tmp_path):
    workdir = make_workdir(tmp_path / "wd")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"simulation": {"n_train": -5}}))
    result = snakemake(workdir, "--cores", "1", "--configfile", bad)
    assert result.returncode != 0
    assert "simulation.n_train" in output_of(result)
    assert not (workdir / "results").exists()
    assert not (workdir / "logs").exists()


def _valid_config() -> dict:
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    validate_config(config)  # the shipped config is valid
    return config


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        ("simulation.n_test", 40, "simulation.n_test"),  # too small for 5 x 5 folds
        ("simulation.n_trian", 10, "simulation.n_trian"),  # unknown key
        ("simulation.oracle.n_bins", 1, "simulation.oracle.n_bins"),
        ("models.cv_folds", 1, "models.cv_folds"),
        ("models.max_leaf_nodes", [10, True], "models.max_leaf_nodes"),
        ("evaluation.confidence", 1.5, "evaluation.confidence"),
        ("evaluation.batch_size", 0, "evaluation.batch_size"),
        ("acs.horizon", "3-Year", "acs.horizon"),
        ("acs.state", "XX", "acs.state"),
        ("acs.download", "yes", "acs.download"),
        ("resources.simulation.bootstrap.threads", 0, "resources.simulation.bootstrap.threads"),
        ("seed", -1, "seed"),
    ],
)
def test_validate_config_names_key_and_value(path, value, fragment):
    config = _valid_config()
    node = config
    *parents, leaf = path.split(".")
    for part in parents:
        node = node[part]
    node[leaf] = value
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    assert fragment in str(info.value)
    assert repr(value) in str(info.value) or str(value) in str(info.value)


def deep_merge(base: dict, override: dict) -> dict:
    """Snakemake's merge of a --configfile over the configfile: nested mappings merge, values replace."""
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = value
    return base


@pytest.mark.parametrize("name", ["tiny.yaml", "tiny_acs.yaml"])
def test_tiny_configs_are_valid(name):
    validate_config(deep_merge(_valid_config(), tiny_config(name)))


def test_quick_config_is_valid():
    quick = yaml.safe_load((REPO / "config" / "quick.yaml").read_text())
    validate_config(deep_merge(_valid_config(), quick))


# ---------------------------------------------------------------------------------------------
# (c) tiny end-to-end run of the simulation study
@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory) -> Path:
    return shared_run(tmp_path_factory, "tiny_run_a", "--cores", "2", "--configfile", TINY)


def _datasets(config: dict) -> list[str]:
    return config["simulation"]["settings"] + config["simulation"]["selection_settings"]


def _check_figures(workdir: Path, study: str, figures: list[str]) -> None:
    for figure in figures:
        png = workdir / "figures" / study / f"{figure}.png"
        pdf = workdir / "figures" / study / f"{figure}.pdf"
        assert png.stat().st_size > 1000, png
        assert pdf.stat().st_size > 1000, pdf
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
        assert pdf.read_bytes()[:5] == b"%PDF-", pdf
    found = sorted(p.stem for p in (workdir / "figures" / study).glob("*.png"))
    assert found == sorted(figures)


@pytest.mark.slow
def test_tiny_run_produces_every_target(tiny_run):
    config = tiny_config("tiny.yaml")
    datasets = _datasets(config)
    n_test = config["simulation"]["n_test"]
    for path in SIMULATION_TABLES:
        assert (tiny_run / path).stat().st_size > 0, path
    for dataset in datasets:
        for path in [
            f"results/data/{dataset}/train.parquet",
            f"results/data/{dataset}/test.parquet",
            f"results/data/{dataset}/schema.json",
            f"results/models/{dataset}/scores.parquet",
            f"results/models/{dataset}/bayes_scores.parquet",
            f"results/models/{dataset}/model_selection.csv",
            f"results/models/{dataset}/models.joblib",
            f"results/weights/{dataset}/weights_estimated.parquet",
            f"results/weights/{dataset}/weights_oracle.parquet",
            f"results/weights/{dataset}/weight_model_selection.csv",
            f"results/evaluate/{dataset}/metrics.parquet",
            f"results/evaluate/{dataset}/metrics.csv",
            f"results/evaluate/{dataset}/calibration.parquet",
        ]:
            assert (tiny_run / path).stat().st_size > 0, path
        scores = pd.read_parquet(tiny_run / f"results/models/{dataset}/scores.parquet")
        assert list(scores.columns) == ["x", "xa", "xa_stratified"]
        assert len(scores) == n_test
        assert ((scores > 0) & (scores < 1)).all().all()
        for source in ("estimated", "oracle"):
            weights = pd.read_parquet(tiny_run / f"results/weights/{dataset}/weights_{source}.parquet")
            assert set(weights["weight_source"]) == {source}
            assert set(weights["control"]) == {"X", "Y", "R"}
            assert set(weights.loc[weights["control"] == "R", "model"]) == {
                "x", "xa", "xa_stratified", "bayes_x", "bayes_xa",
            }  # fmt: skip
            np.testing.assert_allclose(weights[["p_0", "p_1"]].sum(axis=1), 1.0, atol=1e-9)
    # Every rule wrote its log.
    for rule in ["simulate_setting", "fit_outcome_models", "score_bayes_models", "fit_weight_models",
                 "compute_oracle_weights", "bootstrap_metrics", "compute_calibration_curves"]:  # fmt: skip
        for dataset in datasets:
            assert (tiny_run / "logs" / rule / f"{dataset}.log").exists(), (rule, dataset)
    _check_figures(tiny_run, "simulation", SIMULATION_FIGURES)


@pytest.mark.slow
def test_tiny_run_tables_are_tidy(tiny_run):
    config = tiny_config("tiny.yaml")
    metrics = pd.read_parquet(tiny_run / "results/tables/simulation_metrics.parquet")
    assert list(metrics.columns) == list(TIDY_COLUMNS)
    assert set(DESIGN_COLUMNS) <= set(metrics.columns)
    assert set(metrics["study"]) == {"simulation"}
    assert set(metrics["setting"]) == set(_datasets(config))
    assert set(metrics["model"]) == {"x", "xa", "xa_stratified", "bayes_x", "bayes_xa"}
    assert set(METRICS) <= set(metrics["metric"])
    assert {"absolute", "relative", "weighted_population", "controlled_difference", "shared_space"} == set(
        metrics["comparison"]
    )
    assert set(metrics["control"]) == {"none", "X", "Y", "R"}
    assert set(metrics["weight_source"]) == {"none", "estimated", "oracle"}
    assert (metrics["n_resamples"] == config["evaluation"]["n_resamples"]).all()
    assert {"A = 0", "A = 1", "overall"} <= set(metrics["group"])
    csv = pd.read_csv(tiny_run / "results/tables/simulation_metrics.csv")
    assert list(csv.columns) == list(TIDY_COLUMNS) and len(csv) == len(metrics)

    calibration = pd.read_parquet(tiny_run / "results/tables/simulation_calibration.parquet")
    assert list(calibration.columns) == CALIBRATION_COLUMNS
    assert set(calibration["setting"]) == set(_datasets(config))
    assert set(calibration["model"]) == {"x", "xa", "xa_stratified"}

    theory = pd.read_csv(tiny_run / "results/tables/theory_coverage.csv")
    assert {"table", "setting", "model", "control", "expected", "covers_zero"} <= set(theory.columns)
    assert len(theory) > 0


@pytest.mark.slow
def test_tiny_run_is_up_to_date_and_params_trigger_reruns(tiny_run):
    unchanged = snakemake(tiny_run, "-n", "--cores", "2", "--configfile", TINY)
    assert unchanged.returncode == 0, output_of(unchanged)
    assert "Nothing to be done" in output_of(unchanged)
    changed = tiny_run.parent / "tiny_changed.yaml"
    config = tiny_config("tiny.yaml")
    config["evaluation"]["n_resamples"] += 1
    changed.write_text(yaml.safe_dump(config))
    rerun = snakemake(tiny_run, "-n", "--cores", "2", "--configfile", changed)
    assert rerun.returncode == 0, output_of(rerun)
    assert "bootstrap_metrics" in rerun.stdout
    assert "fit_outcome_models" not in rerun.stdout


# ---------------------------------------------------------------------------------------------
# (d) same config, two folders: bit-identical tables
@pytest.mark.slow
def test_tiny_run_is_reproducible(tmp_path, tiny_run):
    other = make_workdir(tmp_path / "run_b")
    result = snakemake(other, *SIMULATION_TABLES, "--cores", "2", "--configfile", TINY)
    assert result.returncode == 0, output_of(result)
    compared = list(SIMULATION_TABLES)
    for dataset in _datasets(tiny_config("tiny.yaml")):
        compared += [
            f"results/data/{dataset}/test.parquet",
            f"results/models/{dataset}/scores.parquet",
            f"results/weights/{dataset}/weights_estimated.parquet",
            f"results/weights/{dataset}/weights_oracle.parquet",
            f"results/evaluate/{dataset}/metrics.parquet",
        ]
    different = [p for p in compared if not filecmp.cmp(tiny_run / p, other / p, shallow=False)]
    assert not different, f"differ between two runs of the same config: {different}"


# ---------------------------------------------------------------------------------------------
# (e) the ACS study offline, from a synthetic PUMS person file
@pytest.mark.slow
def test_acs_study_offline_from_synthetic_pums(tmp_path):
    from disaggregated_eval import acs, synthetic_pums

    config = tiny_config("tiny_acs.yaml")["acs"]
    workdir = make_workdir(tmp_path / "acs_run")
    person_file = acs.person_file_path(
        workdir / config["data_root"], year=config["year"], horizon=config["horizon"], state=config["state"]
    )
    synthetic_pums.write_synthetic_person_file(person_file, n_rows=4000, seed=11, year=config["year"])
    before = person_file.read_bytes()

    result = snakemake(workdir, "acs", "--cores", "2", "--configfile", TINY_ACS)
    assert result.returncode == 0, output_of(result)[-8000:]

    for path in ACS_TABLES + ["results/acs/source/validation.json"]:
        assert (workdir / path).stat().st_size > 0, path
    report = json.loads((workdir / "results/acs/source/validation.json").read_text())
    assert report["rows"] == 4000
    cohort = pd.read_csv(workdir / "results/tables/acs_cohort.csv")
    assert list(cohort["group"]) == list(acs.GROUP_LABELS)
    for task in config["tasks"]:
        assert f"{task}_count" in cohort.columns and f"{task}_prevalence" in cohort.columns
        n_rows = sum(len(pd.read_parquet(workdir / f"results/data/{task}/{split}.parquet")) for split in ("train", "test"))
        assert cohort[f"{task}_count"].sum() == n_rows
    assert "ACSIncome" in (workdir / "results/tables/acs_cohort.md").read_text()

    metrics = pd.read_parquet(workdir / "results/tables/acs_metrics.parquet")
    assert list(metrics.columns) == list(TIDY_COLUMNS)
    assert set(DESIGN_COLUMNS) <= set(metrics.columns)
    assert set(metrics["study"]) == {"acs"}
    assert set(metrics["setting"]) == set(config["tasks"])
    assert set(metrics["model"]) == {"x", "xa", "xa_stratified"}
    assert set(metrics["weight_source"]) == {"none", "estimated"}
    calibration = pd.read_parquet(workdir / "results/tables/acs_calibration.parquet")
    assert list(calibration.columns) == CALIBRATION_COLUMNS
    _check_figures(workdir, "acs", ACS_FIGURES)

    # The user's person file is read, never rewritten or deleted (it is not a Snakemake output).
    assert person_file.read_bytes() == before
    again = snakemake(workdir, "acs", "-n", "--cores", "2", "--configfile", TINY_ACS)
    assert "Nothing to be done" in output_of(again), output_of(again)
