"""Tests of the configuration check (disaggregated_eval_workflow.config, in workflow/lib): schema
defaults first, then the schema and the cross-key rules; every message names the key path and the
bad value."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from disaggregated_eval import vocabulary
from disaggregated_eval_workflow.config import (
    ConfigError,
    check_config_file,
    check_output_folders,
    load_schema,
    validate_config,
)

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"
SHIPPED = yaml.safe_load((REPO / "config" / "config.yaml").read_text())


def shipped() -> dict:
    config = copy.deepcopy(SHIPPED)
    validate_config(config)  # the shipped config is valid
    return copy.deepcopy(SHIPPED)


def with_value(config: dict, path: str, value) -> dict:
    node = config
    *parents, leaf = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    return config


def problems(config: dict) -> str:
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    return str(info.value)


def deep_merge(base: dict, override: dict) -> dict:
    """Snakemake's merge of a --configfile over the configfile: nested mappings merge, values replace."""
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            deep_merge(base[key], value)
        else:
            base[key] = value
    return base


# ---------------------------------------------------------------------------------------------
# Shipped configurations


@pytest.mark.parametrize("name", ["tiny.yaml", "tiny_acs.yaml"])
def test_tiny_configs_are_valid(name):
    validate_config(deep_merge(shipped(), yaml.safe_load((FIXTURES / name).read_text())))


def test_quick_config_is_valid():
    validate_config(deep_merge(shipped(), yaml.safe_load((REPO / "config" / "quick.yaml").read_text())))


def test_empty_config_gets_every_default():
    config = validate_config({})
    schema = load_schema()
    assert set(config) == set(schema["properties"])
    assert config["simulation"]["settings"] == list(vocabulary.MAIN_SETTINGS)
    assert config["models"]["cv_folds"] == schema["properties"]["models"]["properties"]["cv_folds"]["default"]
    assert config["resources"]["acs"]["bootstrap"]["threads"] >= 1
    # A partial mapping keeps its values and gets the defaults of its other keys.
    config = validate_config({"evaluation": {"n_resamples": 7}})
    assert config["evaluation"]["n_resamples"] == 7 and config["evaluation"]["confidence"] == 0.95


# ---------------------------------------------------------------------------------------------
# One message per bad value, naming the key path and the value


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("simulation.n_train", -5, "simulation.n_train must be a positive integer; got -5"),
        ("simulation.n_test", 40, "simulation.n_test must be at least 10 x models.cv_folds x models.crossfit_folds"),
        ("simulation.n_trian", 10, "simulation.n_trian is not a known key"),
        ("simulation.oracle", {"n_bins": 10}, "simulation.oracle is not a known key"),  # removed: exact oracle
        ("calibration.n_bins", 1, "calibration.n_bins must be an integer >= 2; got 1"),
        ("simulation.settings", ["covariate_shift", "nope"], "simulation.settings contains unknown name(s) 'nope'"),
        ("models.cv_folds", 1, "models.cv_folds must be an integer >= 2; got 1"),
        ("models.max_leaf_nodes", [10, -1], "models.max_leaf_nodes must be a non-empty list of distinct integers"),
        ("models.max_leaf_nodes", [10, True], "got [10, True] (bad entries: True)"),
        ("models.max_leaf_nodes", [], "models.max_leaf_nodes must be a non-empty list"),
        ("models.max_leaf_nodes", [10, 10], "models.max_leaf_nodes lists 10 more than once; got [10, 10]"),
        ("evaluation.n_resamples", 0, "evaluation.n_resamples must be a positive integer; got 0"),
        ("evaluation.confidence", 1.5, "evaluation.confidence must be a number strictly between 0 and 1; got 1.5"),
        ("evaluation.batch_size", 0, "evaluation.batch_size must be null or a positive integer; got 0"),
        ("acs.horizon", "3-Year", "acs.horizon must be one of 1-Year, 5-Year; got '3-Year'"),
        ("acs.state", "XX", "acs.state must be one of AL, AK"),
        ("acs.download", "yes", "acs.download must be true or false; got 'yes'"),
        ("acs.tasks", ["acs_income", "acs_employment"], "acs.tasks contains unknown name(s) 'acs_employment'"),
        ("resources.simulation.bootstrap.threads", 0, "resources.simulation.bootstrap.threads must be a positive"),
        ("resources.acs.models", 4, "resources.acs.models must be a mapping; got 4"),
        ("seed", -1, "seed must be a non-negative integer; got -1"),
    ],
)
def test_bad_value_names_key_and_value(path, value, expected):
    assert expected in problems(with_value(shipped(), path, value))


# JSON schema's range keywords let NaN through (every comparison with NaN is false); a NaN used to pass
# the check and fail in the first bootstrap job, after every model fit, Snakemake having deleted the
# previous metrics table. A regression test per key of type number, and infinities for good measure.
@pytest.mark.parametrize(
    "path",
    ["evaluation.confidence", "evaluation.threshold", "evaluation.preference_threshold", "acs.test_size"],
)
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_number_is_rejected(path, value):
    message = problems(with_value(shipped(), path, value))
    assert f"{path} must be a number strictly between 0 and 1; got {value!r}" in message
    assert "1 problem(s)" in message


def test_every_number_key_is_checked_for_nan():
    """Every key of type number in the schema is among the keys tested above (no key left unchecked)."""

    def number_keys(node, path=()):
        for key, sub in node.get("properties", {}).items():
            kinds = sub.get("type", [])
            if "number" in ([kinds] if isinstance(kinds, str) else kinds):
                yield ".".join((*path, key))
            yield from number_keys(sub, (*path, key))

    found = sorted(number_keys(load_schema()))
    assert found == sorted(["evaluation.confidence", "evaluation.threshold", "evaluation.preference_threshold",
                            "acs.test_size"])  # fmt: skip
    for key in found:  # and the check itself walks the schema, whatever the key
        assert f"{key} must be" in problems(with_value(shipped(), key, float("nan")))


def test_every_problem_is_listed():
    config = with_value(with_value(shipped(), "seed", -1), "evaluation.confidence", 2.0)
    message = problems(config)
    assert "2 problem(s)" in message and "seed" in message and "evaluation.confidence" in message


def test_strings_from_config_option_get_a_hint():
    # `--config evaluation='{n_resamples: 5}'` style values arrive as strings.
    message = problems(with_value(shipped(), "evaluation.n_resamples", "500"))
    assert "evaluation.n_resamples must be a positive integer; got '500'" in message
    assert "Snakemake passes values nested inside --config as strings" in message
    # `--config evaluation.n_resamples=5` makes a top-level key with a dot.
    config = shipped()
    config["evaluation.n_resamples"] = 5
    message = problems(config)
    assert "evaluation.n_resamples is not a known key" in message and "--config sets only top-level keys" in message


# ---------------------------------------------------------------------------------------------
# Cross-key checks, on the filled configuration


def test_cross_key_checks_run_when_keys_are_absent():
    """The fold check uses the default folds when only n_test is given (it used to be skipped)."""
    message = problems({"simulation": {"n_test": 40}})
    assert "simulation.n_test must be at least 10 x models.cv_folds x models.crossfit_folds = 250" in message
    assert "got 40" in message
    message = problems({"simulation": {"n_train": 50}})
    assert "simulation.n_train must be at least 20 x models.cv_folds = 100; got 50" in message


def test_setting_in_both_lists_is_rejected():
    config = with_value(shipped(), "simulation.selection_settings", ["selection_x", "covariate_shift"])
    message = problems(config)
    assert "simulation.settings and simulation.selection_settings both list 'covariate_shift'" in message


@pytest.mark.parametrize("key", ["simulation.settings", "simulation.selection_settings", "acs.tasks"])
def test_duplicate_within_a_list_is_rejected(key):
    names = {"simulation.settings": "outcome_shift", "simulation.selection_settings": "selection_y"}
    name = names.get(key, "acs_income")
    message = problems(with_value(shipped(), key, [name, name]))
    assert f"{key} lists {name!r} more than once" in message


def test_survey_year_without_a_needed_column_is_rejected():
    """PUMS renamed RELP to RELSHIPP from 2019 on; folktables' ACSIncome needs RELP."""
    message = problems(with_value(shipped(), "acs.year", 2019))
    assert "acs.year must be at most 2018 for the task acs_income" in message
    assert "RELP" in message and "RELSHIPP" in message and "got 2019" in message
    # ACSPublicCoverage does not read RELP: 2019 is fine for it alone.
    config = with_value(with_value(shipped(), "acs.year", 2019), "acs.tasks", ["acs_public_coverage"])
    validate_config(config)
    validate_config(with_value(shipped(), "acs.year", 2018))


def test_bootstrap_that_cannot_fit_in_its_job_memory_is_rejected():
    """1e9 resamples used to fail after all model fitting ("Unable to allocate 7.86 TiB"): now beyond the
    stated maximum; 900,000 (below it) beyond the jobs' memory."""
    message = problems(with_value(shipped(), "evaluation.n_resamples", 1_000_000_000))
    assert "evaluation.n_resamples must be a positive integer at most 1,000,000; got 1000000000" in message
    message = problems(with_value(shipped(), "evaluation.n_resamples", 900_000))
    assert "evaluation.n_resamples = 900,000 needs about" in message
    assert "more than resources.simulation.bootstrap.mem_mb = 4000 MB" in message
    assert "more than resources.acs.bootstrap.mem_mb = 6000 MB" in message
    # The limit is the job's own mem_mb: the paper's 10,000 resamples fit, and fail in a 100 MB job.
    validate_config(shipped())
    message = problems(with_value(shipped(), "resources.acs.bootstrap.mem_mb", 100))
    assert "evaluation.n_resamples = 10,000" in message and "resources.acs.bootstrap.mem_mb = 100 MB" in message
    assert "resources.simulation" not in message


def test_cross_key_checks_skip_keys_the_schema_rejected():
    message = problems(with_value(shipped(), "models.cv_folds", "5"))
    assert "models.cv_folds must be an integer >= 2; got '5'" in message
    assert "n_test must be at least" not in message  # no TypeError, no follow-up message


# ---------------------------------------------------------------------------------------------
# One source of truth


def test_name_lists_come_from_the_vocabulary():
    text = (REPO / "workflow" / "schemas" / "config.schema.yaml").read_text()
    assert "enum" not in text and "1-Year" not in text  # no second copy of a name list
    schema = load_schema()
    acs = schema["properties"]["acs"]["properties"]
    assert acs["horizon"]["enum"] == list(vocabulary.HORIZONS)
    assert acs["state"]["enum"] == list(vocabulary.STATES)
    assert acs["tasks"]["items"]["enum"] == list(vocabulary.TASKS)
    assert schema["properties"]["simulation"]["properties"]["settings"]["items"]["enum"] == list(vocabulary.SETTINGS)


def test_a_key_added_to_the_schema_needs_no_code():
    """config.py holds no second structure: a new schema section is filled and checked as is."""
    schema = load_schema()
    schema["properties"]["extra"] = {
        "type": "object",
        "default": {},
        "additionalProperties": False,
        "properties": {"level": {"type": "integer", "minimum": 3, "default": 4}},
    }
    assert validate_config({}, schema=schema)["extra"] == {"level": 4}
    with pytest.raises(ConfigError, match=r"extra.level must be an integer >= 3; got 2"):
        validate_config({"extra": {"level": 2}}, schema=schema)
    with pytest.raises(ConfigError, match=r"extra.color is not a known key \(allowed here: level\)"):
        validate_config({"extra": {"color": 1}}, schema=schema)


# ---------------------------------------------------------------------------------------------
# Configuration files


@pytest.mark.parametrize("content", ["", "# only a comment\n", "\n\n"])
def test_empty_config_file_is_named(tmp_path, content):
    path = tmp_path / "my.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=rf"configuration file {path} is empty"):
        check_config_file(path)


def test_config_file_that_is_not_a_mapping_is_named(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- seed\n- 1\n")
    with pytest.raises(ConfigError, match=rf"configuration file {path} must map configuration keys.*got a list"):
        check_config_file(path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("seed: 1\nmodels: [1, 2\n")
    with pytest.raises(ConfigError, match=rf"configuration file {bad} is not valid YAML at line 3"):
        check_config_file(bad)
    assert check_config_file(REPO / "config" / "config.yaml") == SHIPPED


def test_key_given_twice_is_refused_naming_file_key_and_lines(tmp_path):
    """Plain YAML keeps the last of two values silently; a configuration file may give a key once."""
    path = tmp_path / "twice.yaml"
    path.write_text("evaluation:\n  n_resamples: 100\n  confidence: 0.9\n  n_resamples: 200\n")
    with pytest.raises(
        ConfigError, match=rf"configuration file {path} gives the key 'n_resamples' twice \(lines 2 and 4\)"
    ):
        check_config_file(path)
    path.write_text("seed: 1\naudit:\n  runs:\n    a: {file: x.csv, label: y, label: z}\n")
    with pytest.raises(ConfigError, match="gives the key 'label' twice"):
        check_config_file(path)
    path.write_text("seed: 1\nmodels: {cv_folds: 3}\nsimulation: {n_train: 600}\n")  # same key, other mappings
    assert check_config_file(path)["models"] == {"cv_folds": 3}


def test_files_where_output_folders_belong_are_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    check_output_folders(["results", "benchmarks/output"])  # nothing there yet: fine
    (tmp_path / "results").write_text("not a folder")
    with pytest.raises(ConfigError, match=r"^results exists and is not a folder: the workflow writes its outputs"):
        check_output_folders(["figures", "results"])
    (tmp_path / "benchmarks").write_text("")
    with pytest.raises(ConfigError, match=r"^benchmarks exists and is not a folder.*under benchmarks/output/"):
        check_output_folders(["benchmarks/output"])
    (tmp_path / "logs").mkdir()
    check_output_folders(["logs", "logs/deeper"])
