"""Tests of the Snakemake workflow: dry runs, config validation, tiny end-to-end runs.

Every Snakemake call runs in a temporary working directory that links the workflow files
(``Snakefile``, ``workflow/``, ``config/``, ``src/``, ``profiles/``), through
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

from disaggregated_eval.evaluation import TIDY_COLUMNS

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
TINY = FIXTURES / "tiny.yaml"
TINY_ACS = FIXTURES / "tiny_acs.yaml"
LINKED = ("Snakefile", "workflow", "config", "src", "profiles")
TIMEOUT = 3600  # seconds; a tiny run takes a few minutes on 2 busy cores

# The tidy columns of docs/design.md (evaluation stage); the library may add more (e.g. `reference`).
DESIGN_COLUMNS = [
    "study", "dataset", "model", "comparison", "control", "weight_source", "group", "metric",
    "estimate", "ci_low", "ci_high", "n_resamples", "n_undefined",
]  # fmt: skip
CALIBRATION_COLUMNS = [
    "study", "dataset", "model", "group", "bin", "n", "mean_score", "fraction_positive", "ci_low", "ci_high",
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


def _job_counts(text: str) -> dict[str, int]:
    """The "Job stats" table of a dry run: rule -> number of jobs."""
    counts = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    return counts


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
    [
        (None, "all"),
        (None, "acs"),
        ("config/quick.yaml", "all"),
        ("config/quick.yaml", "acs"),
        ("config/quick.yaml", "paper"),
    ],
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
    counts = _job_counts(result.stdout)
    assert counts["simulate_setting"] == 10
    assert counts["extract_acs_task"] == 2
    assert counts["fit_outcome_models"] == 12
    assert counts["bootstrap_metrics"] == 12
    assert counts["compute_oracle_weights"] == 10
    assert counts["obtain_pums_file"] == 1


def test_slurm_profile_parses(tmp_path):
    if importlib.util.find_spec("snakemake_executor_plugin_slurm") is None:
        pytest.fail('snakemake-executor-plugin-slurm is not installed (pip install -e ".[cluster]")')
    workdir = make_workdir(tmp_path / "wd")
    result = snakemake(workdir, "--dry-run", "--workflow-profile", "profiles/slurm")
    assert result.returncode == 0, output_of(result)
    # The shipped partition is a placeholder: the dry run says so before it lists the jobs (issue 22, item
    # 11: it planned 99 jobs on CHANGE_ME without a word).
    text = output_of(result)
    assert "warning: default resource slurm_partition is still 'CHANGE_ME'" in text, text[-3000:]
    given = snakemake(workdir, "--dry-run", "--workflow-profile", "profiles/slurm", "--default-resources",
                      "slurm_partition=gpu", "runtime=60", "mem_mb=4000")  # fmt: skip
    assert given.returncode == 0, output_of(given)
    assert "CHANGE_ME" not in output_of(given)


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
    # A setting in both lists would make every collected row appear twice.
    (
        {"simulation": {"selection_settings": ["selection_x", "covariate_shift"]}},
        ["simulation.settings and simulation.selection_settings both list 'covariate_shift'"],
    ),
    ({"simulation": {"settings": ["outcome_shift", "outcome_shift"]}}, ["simulation.settings lists 'outcome_shift'"]),
    # A bootstrap whose replicates cannot fit in its job's memory: found before any model is fit.
    ({"evaluation": {"n_resamples": 900_000}}, ["evaluation.n_resamples = 900,000 needs about"]),
    # Sizes have stated maximums (disaggregated_eval.memory), so that no job starts that cannot hold its data
    # (issue 22, item 2: n_train 1e12 asked for a 7.28 TiB allocation after deleting the old train/test files).
    (
        {"simulation": {"n_train": 1e12}},
        ["simulation.n_train must be a positive integer at most 10,000,000", "got 1000000000000.0"],
    ),
    ({"calibration": {"n_bins": 1e9}}, ["calibration.n_bins must be an integer from 2 to 1,000; got 1000000000.0"]),
    ({"coverage": {"n_replicates": 10**9}}, ["coverage.n_replicates must be a positive integer at most 10,000"]),
    ({"coverage": {"n_resamples": 10**7}}, ["coverage.n_resamples must be a positive integer at most 1,000,000"]),
    ({"coverage": {"n_resamples": 900_000}}, ["coverage.n_resamples = 900,000 needs about"]),
    # NaN passes JSON schema's range checks; it used to fail in the first bootstrap job, after every fit.
    ({"evaluation": {"confidence": float("nan")}}, ["evaluation.confidence must be a number strictly between", "nan"]),
    ({"acs": {"test_size": float("nan")}}, ["acs.test_size must be a number strictly between 0 and 1; got nan"]),
    ({"evaluation": {"threshold": float("nan")}}, ["evaluation.threshold must be a number strictly between"]),
    # PUMS files from 2019 on have RELSHIPP, not RELP: found before the 0.6 GB download.
    ({"acs": {"year": 2019}}, ["acs.year must be at most 2018 for the task acs_income", "RELSHIPP", "got 2019"]),
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


def test_a_yaml_alias_bomb_in_one_config_value_gives_one_short_message(tmp_path):
    """408 bytes of ``--config seed=[&a0 [...], &a1 [*a0, ...], ...]`` stand for 43 million values: the
    check refuses it by its expanded size without expanding it (issue 22, item 3: a 336-byte bomb gave
    a 28 MB message, the whole expanded value)."""
    levels = ["&a0 [" + ", ".join(["lol"] * 9) + "]"]
    levels += [f"&a{k} [" + ", ".join([f"*a{k - 1}"] * 9) + "]" for k in range(1, 8)]
    bomb = "[" + ", ".join(levels) + "]"
    workdir = make_workdir(tmp_path / "wd")
    result = snakemake(workdir, "-n", "--cores", "1", "--config", f"seed={bomb}")
    text = output_of(result)
    assert result.returncode != 0, text[-2000:]
    assert "the configuration key seed is too large: more than 100,000 items once its YAML aliases" in text
    assert len(text) < 5_000, len(text)  # Snakemake's preamble, the message and two frames
    assert "Job stats" not in text


def test_empty_main_config_file_is_named(tmp_path):
    """An empty config/config.yaml stops the run with a message naming the file."""
    workdir = tmp_path / "wd"
    (workdir / "config").mkdir(parents=True)
    (workdir / "config" / "config.yaml").write_text("# nothing here\n")
    make_workdir(workdir)  # links the other workflow files
    result = snakemake(workdir, "-n", "--cores", "1")
    text = output_of(result)
    assert result.returncode != 0, text
    assert "configuration file config/config.yaml is empty" in text, text


def test_key_given_twice_in_a_configfile_is_refused(tmp_path):
    workdir = make_workdir(tmp_path / "wd")
    twice = tmp_path / "twice.yaml"
    twice.write_text("evaluation:\n  n_resamples: 100\n  n_resamples: 200\n")
    result = snakemake(workdir, "-n", "--cores", "1", "--configfile", twice)
    text = output_of(result)
    assert result.returncode != 0, text
    assert f"configuration file {twice} gives the key 'n_resamples' twice (lines 2 and 3)" in text, text
    assert "Job stats" not in text


def test_a_file_named_results_gives_one_line_not_a_traceback(tmp_path):
    workdir = make_workdir(tmp_path / "wd")
    (workdir / "results").write_text("a file where the output folder belongs")
    result = snakemake(workdir, "results/data/covariate_shift/train.parquet", "--cores", "1", "--configfile", TINY)
    text = output_of(result)
    assert result.returncode != 0, text
    assert "results exists and is not a folder" in text, text
    assert "Traceback" not in text and "NotADirectoryError" not in text
    assert len(text.strip().splitlines()) < 12, text  # Snakemake's preamble, the message and 2 frames
    assert (workdir / "results").read_text() == "a file where the output folder belongs"


def test_bad_config_runs_no_job(tmp_path):
    workdir = make_workdir(tmp_path / "wd")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"simulation": {"n_train": -5}}))
    result = snakemake(workdir, "--cores", "1", "--configfile", bad)
    assert result.returncode != 0
    assert "simulation.n_train" in output_of(result)
    assert not (workdir / "results").exists()
    assert not (workdir / "logs").exists()


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
    assert set(metrics["dataset"]) == set(_datasets(config))
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
    assert set(calibration["dataset"]) == set(_datasets(config))
    assert set(calibration["model"]) == {"x", "xa", "xa_stratified"}

    theory = pd.read_csv(tiny_run / "results/tables/theory_coverage.csv")
    assert {"table", "dataset", "model", "control", "expected", "covers_zero"} <= set(theory.columns)
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
    # The batch size changes memory, not results: it reruns nothing.
    config = tiny_config("tiny.yaml")
    config["evaluation"]["batch_size"] = 7
    changed.write_text(yaml.safe_dump(config))
    same = snakemake(tiny_run, "-n", "--cores", "2", "--configfile", changed)
    assert same.returncode == 0, output_of(same)
    assert "Nothing to be done" in output_of(same), output_of(same)


@pytest.mark.slow
def test_tiny_run_lists_no_params_change_and_a_value_reruns_only_its_jobs(tiny_run):
    """`--list-changes params` (recommended by the README) lists nothing after an unchanged run, and
    exactly the bootstrap's outputs after a change of evaluation.n_resamples; that change reruns the
    bootstrap and what reads its tables, never the calibration curves and their figures."""
    unchanged = snakemake(tiny_run, "--list-changes", "params", "--configfile", TINY)
    assert unchanged.returncode == 0, output_of(unchanged)
    assert unchanged.stdout.split() == [], unchanged.stdout
    config = tiny_config("tiny.yaml")
    config["evaluation"]["n_resamples"] += 1
    changed = tiny_run.parent / "tiny_more_resamples.yaml"
    changed.write_text(yaml.safe_dump(config))
    listing = snakemake(tiny_run, "--list-changes", "params", "--configfile", changed)
    assert listing.returncode == 0, output_of(listing)
    expected = {f"results/evaluate/{d}/metrics.{ext}" for d in _datasets(config) for ext in ("parquet", "csv")}
    assert set(listing.stdout.split()) == expected
    dry = snakemake(tiny_run, "-n", "--cores", "2", "--configfile", changed)
    assert dry.returncode == 0, output_of(dry)
    counts = _job_counts(dry.stdout)
    assert counts["bootstrap_metrics"] == len(_datasets(config)) and counts["plot_controlled_differences"] == 8
    rerun_calibration = [r for r in counts if "calibration" in r]
    assert rerun_calibration == [], rerun_calibration


@pytest.mark.slow
def test_report_has_every_figure_with_its_caption_filled_in(tiny_run, tmp_path):
    """`snakemake --report` after a run: every figure with a caption whose every value is filled in."""
    report = tmp_path / "report.html"
    result = snakemake(tiny_run, "--report", report, "--configfile", TINY)
    assert result.returncode == 0, output_of(result)
    text = report.read_text()
    start = text.index("var results = ", text.index('<script id="results">')) + len("var results = ")
    results, _ = json.JSONDecoder().raw_decode(text, start)
    assert sorted(results) == sorted(f"figures/simulation/{figure}.png" for figure in SIMULATION_FIGURES)
    for path, entry in results.items():
        caption = entry["caption"]
        assert caption.startswith("<p>") and len(caption) > 200, (path, caption)
        # an unfilled value renders as "()" (an empty list joined) or leaves template text behind
        for leftover in ("()", "{{", "}}", "snakemake.", "None"):
            assert leftover not in caption, (path, leftover, caption)
        assert Path(path).stem in caption, (path, caption)  # the figure id
    datasets = ", ".join(tiny_config("tiny.yaml")["simulation"]["settings"])
    assert f"columns datasets ({datasets})" in results["figures/simulation/figure_B2.png"]["caption"]
    for figure in ("figure_1", "figure_B9", "figure_B16", "figure_B23", "figure_B1"):
        assert "hollow marker" in results[f"figures/simulation/{figure}.png"]["caption"], figure
    for figure in (f"figure_B{i}" for i in range(18, 25)):
        assert "Caveat for Control: R" in results[f"figures/simulation/{figure}.png"]["caption"], figure


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
def test_coverage_target_runs_end_to_end_and_leaves_out_cells_without_truth(tmp_path):
    """The ``coverage`` target on a tiny config of the setting where the Bayes model ``bayes_x``
    predicts no positive for ``A = 0`` (its population precision, hence ``T_a``, is undefined):
    collect_coverage keeps those cells with the reason and counts none of them (issue 22, item 0;
    it stopped with "no truth for the cell" before)."""
    from disaggregated_eval import coverage

    workdir = make_workdir(tmp_path / "work")
    result = snakemake(workdir, "--cores", "2", "coverage", "--configfile", FIXTURES / "tiny_coverage.yaml")
    assert result.returncode == 0, output_of(result)[-6000:]
    table = pd.read_csv(workdir / "results/tables/coverage.csv", keep_default_na=False, na_values=[""])
    truth = pd.read_parquet(workdir / "results/coverage/complex_anticausal_shift/truth.parquet")
    undefined = truth[truth["truth"].isna()]
    assert len(undefined) > 0  # the case under test exists
    assert set(undefined["model"]) == {"bayes_x"} and set(undefined["metric"]) == {"precision"}
    caveated = table[table["caveat"].fillna("") != ""]
    keys = ["model", "control", "group", "metric"]
    assert set(map(tuple, caveated[keys].to_numpy())) == set(map(tuple, undefined[keys].to_numpy()))
    assert (caveated["caveat"] == coverage.UNDEFINED_TRUTH).all()
    assert caveated["coverage"].isna().all() and not caveated["within_band"].any()
    counted = table[table["caveat"].fillna("") == ""]
    assert counted["coverage"].notna().any()
    summary = pd.read_csv(workdir / "results/tables/coverage_summary.csv")
    overall = summary[(summary["model"] == "all") & (summary["control"] == "all")]
    for source, row in overall.set_index("weight_source").iterrows():  # every counted cell, none other
        n = ((counted["weight_source"] == source) & (counted["n_replicates"] > 0)).sum()
        assert row["n_cells"] == n
    assert (workdir / "figures/simulation/coverage.png").is_file()


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
        n_rows = sum(
            len(pd.read_parquet(workdir / f"results/data/{task}/{split}.parquet")) for split in ("train", "test")
        )
        assert cohort[f"{task}_count"].sum() == n_rows
    assert "ACSIncome" in (workdir / "results/tables/acs_cohort.md").read_text()

    metrics = pd.read_parquet(workdir / "results/tables/acs_metrics.parquet")
    assert list(metrics.columns) == list(TIDY_COLUMNS)
    assert set(DESIGN_COLUMNS) <= set(metrics.columns)
    assert set(metrics["study"]) == {"acs"}
    assert set(metrics["dataset"]) == set(config["tasks"])
    assert set(metrics["model"]) == {"x", "xa", "xa_stratified"}
    assert set(metrics["weight_source"]) == {"none", "estimated"}
    calibration = pd.read_parquet(workdir / "results/tables/acs_calibration.parquet")
    assert list(calibration.columns) == CALIBRATION_COLUMNS
    _check_figures(workdir, "acs", ACS_FIGURES)

    # The user's person file is read, never rewritten or deleted (it is not a Snakemake output).
    assert person_file.read_bytes() == before
    again = snakemake(workdir, "acs", "-n", "--cores", "2", "--configfile", TINY_ACS)
    assert "Nothing to be done" in output_of(again), output_of(again)


# ---------------------------------------------------------------------------------------------
# (f) bad inputs stop the study early, with messages naming the file, task and group
def _dead_pid() -> int:
    """A process id that is not running (a finished child's)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)


def test_rerun_removes_temporaries_of_a_killed_job(tmp_path):
    """A killed job's hidden temporary next to its output is removed when the rule runs again."""
    workdir = make_workdir(tmp_path / "wd")
    folder = workdir / "results" / "data" / "covariate_shift"
    folder.mkdir(parents=True)
    stale = folder / f".train.parquet.{_dead_pid()}-0123abcd.tmp"
    stale.write_bytes(b"half a parquet file")
    other = folder / f".train.parquet.bak.{_dead_pid()}-0123abcd.tmp"  # another target's: kept
    other.write_bytes(b"")
    result = snakemake(workdir, "results/data/covariate_shift/train.parquet", "--cores", "1", "--configfile", TINY)
    assert result.returncode == 0, output_of(result)
    assert not stale.exists()
    assert other.exists()
    assert sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp")) == [other.name]


def _acs_workdir(tmp_path: Path, edit=None) -> tuple[Path, Path]:
    """A working directory with a tiny synthetic person file, optionally edited (a pandas frame of str)."""
    from disaggregated_eval import acs, synthetic_pums

    config = tiny_config("tiny_acs.yaml")["acs"]
    workdir = make_workdir(tmp_path / "acs_wd")
    person_file = acs.person_file_path(
        workdir / config["data_root"], year=config["year"], horizon=config["horizon"], state=config["state"]
    )
    synthetic_pums.write_synthetic_person_file(person_file, n_rows=3000, seed=5, year=config["year"])
    if edit is not None:
        edit(person_file)
    return workdir, person_file


def test_acs_all_zero_weights_stop_at_extraction(tmp_path):
    """PWGTP = 0 everywhere: ACSIncome's filter keeps no row; the extraction says so before any fit."""

    def zero_weights(path: Path) -> None:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        frame["PWGTP"] = "0"
        frame.to_csv(path, index=False)

    workdir, person_file = _acs_workdir(tmp_path, zero_weights)
    result = snakemake(workdir, "acs", "--cores", "1", "--configfile", TINY_ACS)
    assert result.returncode != 0, output_of(result)
    log = (workdir / "logs" / "extract_acs_task" / "acs_income.log").read_text()
    assert "acs_income (folktables ACSIncome): no row of" in log and str(person_file.name) in log
    assert "PWGTP >= 1: 0" in log
    # No model of the task was fit (the other task may have started before the failure stopped the run).
    assert not (workdir / "results" / "models" / "acs_income").exists()


def test_acs_truncated_file_stops_at_validation(tmp_path):
    """A person file cut in its last line fails the validation, naming the file and the line."""

    def truncate(path: Path) -> None:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - 40])

    workdir, person_file = _acs_workdir(tmp_path, truncate)
    result = snakemake(workdir, "acs", "--cores", "1", "--configfile", TINY_ACS)
    assert result.returncode != 0, output_of(result)
    log = (workdir / "logs" / "obtain_pums_file" / "validation.log").read_text()
    relative = person_file.relative_to(workdir)  # the configured data_root is relative to the workdir
    assert f"{relative} looks truncated: its last line (line 3001)" in log, log[-3000:]
    assert not (workdir / "results" / "data").exists()
