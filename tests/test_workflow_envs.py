"""The rules' software environments (issue 36, item 1): pinned conda environment files per kind of job
(workflow/envs/*.yaml), and the container image definitions that install the same pins.

conda and mamba are not needed: the files are checked against the rules' imports and the package's
declared ranges here, and the pins are resolved by pip against the package index (the environments'
packages come from their ``pip:`` lists; the conda part is only the interpreter).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import subprocess
import sys
import tomllib

import pytest
from packaging.requirements import Requirement

from disaggregated_eval_workflow import code_files
from disaggregated_eval_workflow.envs import env_pins, union_pins
from test_workflow_docs import REPO, RULES

ENVS = REPO / "workflow" / "envs"
ENV_FILES = sorted(ENVS.glob("*.yaml"))


def rule_env(block: str) -> str | None:
    found = re.search(r'(?m)^    conda:\n        "\.\./envs/([\w.-]+)"', block)
    return found.group(1) if found else None


def rule_script(block: str) -> str | None:
    found = re.search(r'(?m)^    script:\n        "\.\./scripts/([\w.-]+)"', block)
    return found.group(1) if found else None


def third_party_imports(path) -> set[str]:
    """Top-level names of the modules outside the project that a file imports (at any depth)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {n for n in names - set(code_files.PACKAGES) - {"snakemake"} if n not in sys.stdlib_module_names}


def test_the_environment_files_are_found():
    assert [p.name for p in ENV_FILES] == ["acs.yaml", "audit.yaml", "compute.yaml", "figures.yaml"]


def test_every_job_rule_names_an_environment_file_and_every_file_is_used():
    used = {}
    for name, block in RULES.items():
        if rule_script(block) is not None:  # a job (target rules have no script and no environment)
            env = rule_env(block)
            assert env is not None, f"rule {name} has a script but no conda: environment"
            assert (ENVS / env).is_file(), (name, env)
            used.setdefault(env, []).append(name)
    assert sorted(used) == [p.name for p in ENV_FILES]
    assert sorted(used["audit.yaml"]) == ["run_audit"]
    assert sorted(used["acs.yaml"]) == ["extract_acs_task", "obtain_pums_file", "tabulate_acs_cohort"]


def test_every_package_is_pinned_once_for_python_3_11():
    import yaml

    for path in ENV_FILES:
        content = yaml.safe_load(path.read_text())
        # conda gives the interpreter only; no editable or relative install (`-e ../..` worked only from the root)
        assert [d for d in content["dependencies"] if not isinstance(d, dict)] == ["python=3.11", "pip"], path.name
        assert env_pins(path), path.name  # every pip entry is name==version (env_pins raises otherwise)
    union = union_pins(ENV_FILES)  # one version of a package in every file (union_pins raises otherwise)
    assert {"numpy", "pandas", "scikit-learn", "matplotlib", "folktables", "duckdb"} <= set(union)


def test_each_environment_has_what_its_rules_import():
    """The third-party modules a rule's script imports, directly or through the library (the import walk of
    the rules' code inputs), are pinned in the rule's environment. pandas reads and writes Parquet through
    pyarrow and writes Markdown through tabulate without an import statement: those are listed by hand."""
    to_distributions = importlib.metadata.packages_distributions()
    implicit = {"pyarrow"}  # every job reads or writes Parquet files
    implicit_acs = {"tabulate", "requests"}  # DataFrame.to_markdown (cohort table); folktables' download
    checked = 0
    for name, block in RULES.items():
        script, env = rule_script(block), rule_env(block)
        if script is None:
            continue
        script_path = REPO / "workflow" / "scripts" / script
        files = [script_path, *(REPO / f for f in code_files.script_files(script_path, root=REPO))]
        modules = set().union(*(third_party_imports(f) for f in files)) - {"dask", "polars"}  # optional inputs
        pins = env_pins(ENVS / env)
        needed = set(implicit) | (implicit_acs if env == "acs.yaml" else set())
        for module in modules:
            distributions = {re.sub(r"[-_.]+", "-", d).lower() for d in to_distributions.get(module, [])}
            assert distributions, f"{module} (imported by rule {name}) is not installed here: cannot check its pin"
            needed.add(sorted(distributions)[0] if len(distributions) == 1 else (distributions & set(pins)).pop())
        missing = sorted(needed - set(pins) - {"pillow"})  # pillow comes with matplotlib
        assert not missing, f"rule {name} ({env}) imports {missing}, which its environment does not pin"
        checked += 1
    assert checked >= 25


def test_pins_are_within_the_ranges_the_package_declares():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = {}
    for spec in [*project["dependencies"], *project["optional-dependencies"]["workflow"]]:
        requirement = Requirement(spec)
        declared[re.sub(r"[-_.]+", "-", requirement.name).lower()] = requirement.specifier
    union = union_pins(ENV_FILES)
    outside = {name: (version, str(declared[name])) for name, version in union.items()
               if name in declared and not declared[name].contains(version)}  # fmt: skip
    assert not outside
    assert len(set(union) & set(declared)) >= 12


def test_the_container_definitions_install_every_environment_file():
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "COPY workflow/envs/*.yaml" in dockerfile and "envs.py /opt/disaggregated-eval/envs/*.yaml" in dockerfile
    definition = (ENVS / "container.def").read_text()
    listed = re.findall(r"(?m)^    workflow/envs/([\w.-]+\.yaml) ", definition)
    assert listed == [p.name for p in ENV_FILES]
    # the same base image in both
    assert re.search(r"(?m)^FROM (\S+)$", dockerfile).group(1) == re.search(r"(?m)^From: (\S+)$", definition).group(1)


def test_the_union_of_the_pins_prints_as_a_requirements_file():
    script = REPO / "workflow" / "lib" / "disaggregated_eval_workflow" / "envs.py"
    result = subprocess.run([sys.executable, script, *ENV_FILES], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [f"{n}=={v}" for n, v in union_pins(ENV_FILES).items()]


@pytest.mark.slow
def test_the_pins_resolve_against_the_package_index(tmp_path):
    """``pip install --dry-run`` of the union of the pins (every environment's packages together, so each
    environment's too) resolves against the package index, for this Python; skipped without the index."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("".join(f"{n}=={v}\n" for n, v in union_pins(ENV_FILES).items()))
    report = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
           "--report", str(report), "-r", str(requirements)]  # fmt: skip
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if result.returncode != 0 and re.search(r"(?i)connection|network is unreachable|name resolution", result.stderr):
        pytest.skip(f"the package index is not reachable: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stderr[-3000:]
    import json

    resolved = {
        re.sub(r"[-_.]+", "-", item["metadata"]["name"]).lower(): item["metadata"]["version"]
        for item in json.loads(report.read_text())["install"]
    }
    assert {name: resolved.get(name) for name in union_pins(ENV_FILES)} == union_pins(ENV_FILES)
