"""The workflow deployed the way Snakemake users deploy workflows (issue 36, item 1): named as a module by
another workflow, with that workflow's own configuration, from a checkout of this repository; and the
layout of the Snakemake Workflow Catalog's standardized usage.

The other workflow's ``Snakefile`` is the one config/README.md shows ("Using the workflow as a module"),
with ``<checkout>`` replaced by this repository's path, so the documented usage is what runs. It lives in
a temporary folder of its own (no link to the repository's files), which is its working directory.
"""

from __future__ import annotations

import os
import re
import tomllib

import pandas as pd
import pytest
import yaml

from test_workflow import REPO, SIMULATION_FIGURES, TINY, output_of, snakemake, tiny_config

CONFIG_README = (REPO / "config" / "README.md").read_text()

# A rule of the other workflow's own that uses an output of the module.
OWN_RULE = """

rule count_metric_rows:
    input:
        "results/tables/simulation_metrics.csv",
    output:
        "summary/metric_rows.txt",
    run:
        import pandas as pd

        with open(output[0], "w") as handle:
            handle.write(str(len(pd.read_csv(input[0]))))
"""


def documented_snakefile() -> str:
    """The other workflow's ``Snakefile`` of config/README.md, naming this checkout."""
    section = CONFIG_README.split("## Using the workflow as a module", 1)[1].split("\n## ", 1)[0]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert '"<checkout>/workflow/Snakefile"' in code
    return code.replace("<checkout>", str(REPO))


def other_workflow(folder, snakefile: str, config_text: str):
    (folder / "config").mkdir(parents=True)
    (folder / "config" / "config.yaml").write_text(config_text)
    (folder / "Snakefile").write_text(snakefile)
    return folder


def test_catalog_layout():
    """The standardized usage's files: workflow/Snakefile, config/README.md, the catalog's file, LICENSE."""
    assert 'include: "workflow/Snakefile"' in (REPO / "Snakefile").read_text()  # the root one stays a thin include
    assert "rule all:" in (REPO / "workflow" / "Snakefile").read_text()
    assert "## Using the workflow as a module" in CONFIG_README
    catalog = yaml.safe_load((REPO / ".snakemake-workflow-catalog.yml").read_text())
    assert catalog["usage"]["software-stack-deployment"] == {"conda": True, "apptainer": True, "apptainer+conda": False}
    assert catalog["usage"]["report"] is True
    license_text = (REPO / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"] == {"text": "Apache-2.0"}


def test_module_dry_run_with_renamed_rules_and_a_relative_path(tmp_path):
    """``use rule * from ... as dis_*`` (renamed rules) and a checkout path relative to the Snakefile."""
    folder = tmp_path / "other"
    snakefile = documented_snakefile().replace(str(REPO), os.path.relpath(REPO, folder))
    snakefile = snakefile.replace("use rule * from disaggregated_eval", "use rule * from disaggregated_eval as dis_*")
    other_workflow(folder, snakefile, TINY.read_text())
    result = snakemake(folder, "--dry-run", "--cores", "2", "dis_acs")
    text = output_of(result)
    assert result.returncode == 0, text
    tasks = len(yaml.safe_load((REPO / "config" / "config.yaml").read_text())["acs"]["tasks"])  # tiny.yaml keeps them
    assert re.search(rf"(?m)^dis_extract_acs_task\s+{tasks}$", text), text
    assert re.search(r"(?m)^dis_acs\s+1$", text), text


@pytest.mark.slow
def test_another_workflow_runs_this_one_as_a_module_with_its_own_config(tmp_path):
    """The tiny configuration end to end through the module, in the other workflow's folder."""
    folder = other_workflow(tmp_path / "other", documented_snakefile() + OWN_RULE, TINY.read_text())
    result = snakemake(folder, "--cores", "2", "all", "summary/metric_rows.txt")
    assert result.returncode == 0, output_of(result)[-8000:]

    config = tiny_config("tiny.yaml")
    metrics = pd.read_parquet(folder / "results" / "tables" / "simulation_metrics.parquet")
    datasets = config["simulation"]["settings"] + config["simulation"]["selection_settings"]
    assert sorted(metrics["dataset"].unique()) == sorted(datasets)
    # the other workflow's configuration reached the rules: tiny.yaml's 30 resamples, not the paper's 10,000
    assert metrics["n_resamples"].dropna().unique().tolist() == [config["evaluation"]["n_resamples"]]
    for figure in SIMULATION_FIGURES:
        assert (folder / "figures" / "simulation" / f"{figure}.png").stat().st_size > 1000, figure
    assert (folder / "results" / "tables" / "theory_coverage.csv").is_file()
    assert (folder / "logs" / "simulate_setting").is_dir() and (folder / "benchmarks" / "output").is_dir()
    # the other workflow's own rule read the module's output
    rows = len(pd.read_csv(folder / "results" / "tables" / "simulation_metrics.csv"))
    assert rows == len(metrics) > 0
    assert (folder / "summary" / "metric_rows.txt").read_text() == str(rows)
    # up to date afterwards: the code inputs (absolute paths into the checkout) are stable
    again = snakemake(folder, "--dry-run", "--cores", "2", "all", "summary/metric_rows.txt")
    assert again.returncode == 0 and "Nothing to be done" in output_of(again), output_of(again)[-3000:]
