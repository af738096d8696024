"""docs/audit.md and the examples stay in step with the code (options, defaults, columns, files)."""

from __future__ import annotations

import re
from dataclasses import MISSING, fields
from pathlib import Path

import pytest
import yaml

from disaggregated_eval import vocabulary
from disaggregated_eval.audit import cli
from disaggregated_eval.audit.options import AuditOptions
from disaggregated_eval.audit.outputs import file_sha256

REPO = Path(__file__).resolve().parents[1]
DOC = (REPO / "docs" / "audit.md").read_text(encoding="utf-8")


def doc_table(heading_text: str) -> list[list[str]]:
    """Rows of the first Markdown table after the line containing ``heading_text``."""
    lines = DOC[DOC.index(heading_text) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
    return rows


def _default(field):
    return field.default if field.default is not MISSING else field.default_factory()


def _expected_default(field) -> str:
    value = _default(field)
    if field.name in ("label", "scores", "groups"):
        return "required"
    if field.name == "metrics":  # the default list: every metric but those offered through --metrics only
        others = [m for m in vocabulary.METRICS if m not in vocabulary.AUDIT_METRICS]
        return f"all but {', '.join(others)}" if others else f"all {len(vocabulary.METRICS)}"
    if field.name == "intersections":
        return "all attributes"
    if field.name == "preference_threshold":
        return "the threshold"
    if value is None or value == []:
        return "none"
    if field.name == "controls":
        return ",".join(value)
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, int) and field.name.startswith("n_"):
        return f"{value:,}"
    return str(value)


def test_options_table_lists_every_option_with_its_flag_and_default():
    rows = {row[0].strip("`"): row for row in doc_table("| option (YAML key) |")}
    assert list(rows) == [f.name for f in fields(AuditOptions)]
    for field in fields(AuditOptions):
        _, flag, default, meaning = rows[field.name]
        assert flag.strip("`").split()[0] == cli.flag_of(field.name), field.name
        assert default == _expected_default(field), field.name
        assert meaning


def test_column_tables_match_the_result_constants():
    from disaggregated_eval.audit.columns import (
        ANALYSIS_TABLES,
        COMPARISON_COLUMNS,
        CONTROLLED_COLUMNS,
        WEIGHTED_SLICE_COLUMNS,
    )

    tables = [
        ("`slices`:", WEIGHTED_SLICE_COLUMNS),  # n_effective: only with sample weights, its row says so
        ("`comparisons`:", COMPARISON_COLUMNS),
        ("`controlled`:", CONTROLLED_COLUMNS),
    ]
    tables += [(f"`{name}`:", columns) for name, columns in ANALYSIS_TABLES.items()]
    for heading, columns in tables:
        documented = []
        for row in doc_table(heading):
            documented += re.findall(r"`([A-Za-z_]+)`", row[0])
        assert documented == list(columns), heading


def test_metric_names_in_the_docs_are_the_vocabulary():
    section = DOC[DOC.index("Metric names (`--metrics`)") :].split("\n\n")[0]
    assert re.findall(r"`([a-z_]+)`", section) == list(vocabulary.METRICS)


@pytest.mark.parametrize("name", ["compas.yaml", "adult.yaml"])
def test_example_config_files_are_valid_cli_configs(name):
    options = cli.read_config_file(REPO / "examples" / name)
    assert {"file", "label", "scores", "groups", "controls"} <= set(options)


def test_provenance_records_the_shipped_files_checksums():
    text = (REPO / "examples" / "PROVENANCE.md").read_text(encoding="utf-8")
    for name in ("compas.csv", "adult.csv.gz"):
        digest = file_sha256(REPO / "examples" / "data" / name)
        assert f"SHA-256 of `data/{name}`: `{digest}`" in text


def test_compas_copy_is_propublicas_analysis_sample():
    import pandas as pd

    data = pd.read_csv(REPO / "examples" / "data" / "compas.csv")
    assert len(data) == 6172  # ProPublica's filtered rows
    assert data["two_year_recid"].isin([0, 1]).all()
    assert (data["compas_score"] == data["decile_score"] / 10).all()
    higher_risk = data["score_text"].isin(["Medium", "High"])
    assert ((data["compas_score"] >= 0.5) == higher_risk).all()
    assert data["race"].value_counts().to_dict() == {
        "African-American": 3175, "Caucasian": 2103, "Hispanic": 509, "Other": 343, "Asian": 31,
        "Native American": 11,
    }  # fmt: skip


def test_workflow_example_config_is_valid():
    from disaggregated_eval_workflow.audit_runs import audit_runs

    section = yaml.safe_load((REPO / "examples" / "audit_compas.yaml").read_text())["audit"]
    jobs = audit_runs(section)
    assert sorted(jobs) == ["compas_age_sex/compas_score", "compas_race_sex/compas_score"]
