"""The workflow's documents say what the code does: cheap checks of the lists, names and commands in
README.md, config/README.md, profiles/README.md, docs/design.md and the figure captions against the
Snakefile, the rule files and pyproject.toml (no Snakemake run)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
DOCS = {
    name: (REPO / name).read_text()
    for name in ("README.md", "config/README.md", "profiles/README.md", "docs/design.md", "docs/method.md")
}
RULE_FILES = [REPO / "Snakefile", REPO / "workflow" / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
RULE_TEXT = "\n".join(p.read_text() for p in RULE_FILES)


def rule_blocks() -> dict[str, str]:
    """Rule name -> the text of its definition."""
    parts = re.split(r"(?m)^rule (\w+):\n", RULE_TEXT)
    return {parts[i]: parts[i + 1].split("\n\n\n")[0] for i in range(1, len(parts), 2)}


RULES = rule_blocks()


def local_rules() -> set[str]:
    names = set()
    for block in re.findall(r"(?m)^localrules:\n((?:    \w+,\n)+)", RULE_TEXT):
        names |= set(re.findall(r"(\w+),", block))
    return names


def test_profiles_readme_lists_the_local_rules_of_the_snakefile():
    text = DOCS["profiles/README.md"]
    sentence = text[text.index("Local rules, run on the node") :].split(".\n")[0]
    listed = set(re.findall(r"`(\w+)`", sentence)) - {"localrules", "Snakefile"}
    assert listed == local_rules()
    assert local_rules() <= set(RULES)


def test_commands_and_rules_named_in_the_docs_exist():
    """Every rule named after --forcerun / -R, or as "rule `x`", is a rule of the workflow."""
    named = set()
    for text in DOCS.values():
        named |= set(re.findall(r"(?:--forcerun|\s-R) ([a-z_]+)\b", text)) - {"is"}  # "-R is short for ..."
        named |= set(re.findall(r"[Rr]ule `(\w+)`", text)) - {"params"}  # "rule `params`": the directive
    assert named, "the pattern found nothing: the check would be empty"
    assert sorted(named - set(RULES)) == []


def test_readme_commands_install_extras_that_exist():
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    used = set()
    for spec in re.findall(r'pip install -e "\.\[([\w,]+)\]"', "\n".join(DOCS.values())):
        used |= set(spec.split(","))
    assert {"workflow", "test", "cluster"} <= used
    assert used <= extras
    first, second = README.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()[:2]
    assert first == 'pip install -e ".[workflow]" && snakemake --cores 2'  # the pipeline, with its tools
    assert second == 'pip install -e ".[test,cluster]" && python -m pytest -n 2'  # checked verbatim by .ci/run


def test_test_and_cluster_extras_bring_the_workflow_extra():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert "disaggregated-eval[workflow]" in extras["test"] and "disaggregated-eval[workflow]" in extras["cluster"]
    # the lint tools are pinned (a new release must not fail CI on unchanged code)
    assert [d for d in extras["test"] if d.startswith(("ruff", "snakefmt"))] == [
        d for d in extras["test"] if re.match(r"(ruff|snakefmt)==\d", d)
    ]


def test_readme_states_no_test_count_that_can_go_stale():
    """A count of tests goes stale with the next test; the README says how to list them instead."""
    assert not re.search(r"\b\d[\d,]* tests\b", README)
    assert "--collect-only" in README


@pytest.mark.parametrize("caption", sorted((REPO / "workflow" / "report").glob("*.rst")), ids=lambda p: p.stem)
def test_caption_params_exist_in_the_rules_that_use_the_caption(caption):
    """A caption may only use params its rule has (``settings`` of the calibration figures used to render
    as "columns settings ()")."""
    users = [name for name, block in RULES.items() if f"../report/{caption.name}" in block]
    assert users, f"no rule uses {caption.name}"
    used = set(re.findall(r"snakemake\.params\.(\w+)", caption.read_text()))
    for name in users:
        params = re.search(r"(?m)^    params:\n((?:        .*\n)+)", RULES[name] + "\n")
        have = set(re.findall(r"(?m)^        (\w+)=", params.group(1))) if params else set()
        assert used <= have, (name, sorted(used - have))


def test_readme_outputs_are_outputs_of_rules():
    """Each file the README's output table lists is written by some rule (patterns with wildcards)."""
    patterns = set(re.findall(r'"((?:results|figures)/[^"]+)"', RULE_TEXT))
    regexes = [re.compile("^" + re.sub(r"\\\{\w+\\\}", r"[^/]+", re.escape(p)) + "$") for p in patterns]
    table = README.split("## What the main job produces", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"`((?:results|figures)/[^`]+)`", table)
    files = []
    for entry in listed:
        stem, _, exts = entry.partition(".")
        if "{" in exts:
            files += [f"{stem}.{e}" for e in exts.strip("{}").split(",")]
        elif exts:
            files += [f"{stem}.{e}" for e in exts.replace("|", ",").split(",")]
        elif "figure_B" in stem or "figure_1" in stem:
            files += [f"{stem}.png", f"{stem}.pdf"]
    assert len(files) > 10
    assert [f for f in files if not any(r.match(f) for r in regexes)] == []


def _declared(extra_names: tuple[str, ...]) -> set[str]:
    """Distribution names (normalised) that ``pip install -e ".[<extras>]"`` installs by its own declaration."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras, todo, names = project["optional-dependencies"], list(extra_names), set()
    requirements = list(project["dependencies"])
    while todo:
        extra = todo.pop()
        for spec in extras[extra]:
            inner = re.fullmatch(r"disaggregated-eval\[([\w,]+)\]", spec)
            if inner:
                todo += inner.group(1).split(",")
            else:
                requirements.append(spec)
    for spec in requirements:
        names.add(re.split(r"[<>=!~\[; ]", spec, maxsplit=1)[0].lower().replace("_", "-"))
        # a package's extras declare packages too: "dask[distributed]" brings distributed (read from the
        # installed package's metadata, as pip would)
        package, _, extras = re.split(r"[<>=!~; ]", spec, maxsplit=1)[0].partition("[")
        for extra in filter(None, extras.rstrip("]").split(",")):
            for requirement in importlib.metadata.requires(package) or []:
                if re.search(rf"""extra == ["']{re.escape(extra)}["']""", requirement):
                    names.add(re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-"))
    return names


def test_every_package_the_tests_import_comes_with_the_readme_test_command():
    """The README's test command (``pip install -e ".[test,cluster]"``) installs every third-party package a
    test imports, so none is skipped on a fresh clone for want of it (issue 22, item 10: the fairlearn test
    module was skipped, fairlearn being only in the bench extra)."""
    import ast
    import importlib.metadata
    import sys

    to_distributions = importlib.metadata.packages_distributions()
    modules: set[str] = set()
    for path in sorted((REPO / "tests").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules.add(node.module.split(".")[0])
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "importorskip" and node.args
                  and isinstance(node.args[0], ast.Constant)):  # fmt: skip
                modules.add(str(node.args[0].value).split(".")[0])
    local = {p.stem for folder in ("tests", "benchmarks") for p in (REPO / folder).rglob("*.py")}
    local |= {"disaggregated_eval", "conftest"}
    local |= {p.parent.name for p in (REPO / "workflow" / "lib").glob("*/__init__.py")}  # the workflow's plumbing
    third_party = sorted(m for m in modules - local if m not in sys.stdlib_module_names)
    declared = _declared(("test", "cluster"))
    missing = {}
    for module in third_party:
        distributions = {d.lower().replace("_", "-") for d in to_distributions.get(module, [])}
        if not distributions & declared:
            missing[module] = sorted(distributions) or "not installed"
    assert not missing, f"imported by the tests but not installed by the README's test command: {missing}"


def test_quick_config_states_the_readmes_measured_cost():
    """config/quick.yaml, config/README.md and README.md give the same CPU-minutes of the first look (issue
    22, item 11: 4.4 in quick.yaml, 5.7 in the README)."""
    readme = re.search(r"configfile config/quick\.yaml\n```\n\nIt took [^.]+? and ([\d.]+) CPU-minutes", README)
    assert readme, "README.md no longer states the first look's CPU-minutes"
    quick = re.search(r"every simulation target in ([\d.]+) CPU-minutes", (REPO / "config/quick.yaml").read_text())
    table = re.search(
        r"`quick.yaml` \| a first look at every simulation target: ([\d.]+) CPU-minutes", DOCS["config/README.md"]
    )
    assert quick and table
    assert quick.group(1) == table.group(1) == readme.group(1)


def test_readme_says_what_is_skipped_without_chromium_and_ci_installs_it_and_runs_the_slurm_check():
    """A newcomer who runs the README's test command alone learns which tests need Chromium and how to get
    it, and CI runs the real SLURM check of the cluster profile (issue 22, items 8 and 9)."""
    ci = (REPO / ".ci" / "run").read_text()
    using = sorted(p.name for p in (REPO / "tests").glob("test_*.py")
                   if re.search(r"(?m)^\s+exe = chromium\(\)", p.read_text()))  # fmt: skip
    assert using, "no test opens the report in Chromium any more: update this test and the README"
    text = " ".join(README.split())
    assert "apt-get install chromium" in text and "skipped" in text
    for name in using:
        assert f"tests/{name}" in text, name
    assert "chromium" in ci and "fonts-droid-fallback" in ci and "fonts-droid-fallback" in text
    runs = [
        line.strip() for line in ci.splitlines() if "run_slurm_check.sh" in line and not line.lstrip().startswith("#")
    ]
    assert runs == ["bash tests/slurm/run_slurm_check.sh"], runs
    assert "tests/slurm/run_slurm_check.sh" in text
