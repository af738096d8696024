"""Tests of the workflow's plumbing package (workflow/lib/disaggregated_eval_workflow) that need no
Snakemake run: the import walk behind the rules' code inputs, the audit jobs' code files, the
plumbing kept out of the library and the work-around of Snakemake's params listing."""

from __future__ import annotations

import json
import modulefinder
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from disaggregated_eval import io
from disaggregated_eval_workflow import audit_runs, code_files, timings
from disaggregated_eval_workflow.inputs import read_scores

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "src" / "disaggregated_eval"
WORKFLOW_LIB = REPO / "workflow" / "lib"
PLUMBING = "disaggregated_eval_workflow"
SCRIPTS = sorted((REPO / "workflow" / "scripts").glob("*.py"))


# ---- the import walk ----------------------------------------------------------------------------
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_code_inputs_equal_an_independent_import_analysis(script):
    """The rule's code inputs are exactly the modules of the library and of the plumbing that the
    standard library's ``modulefinder`` (bytecode analysis, an independent implementation) finds from
    the script."""
    finder = modulefinder.ModuleFinder(path=[str(SOURCE.parent), str(WORKFLOW_LIB)])  # only our packages
    finder.run_script(str(script))
    found = {name for name in finder.modules if name.split(".")[0] in code_files.PACKAGES}
    ours = code_files.import_closure(code_files.script_modules(script, root=REPO), root=REPO)
    assert ours == found
    files = code_files.script_files(script, root=REPO)
    assert all((REPO / f).is_file() for f in files) and files == sorted(set(files))
    assert len(files) == len(found)  # one file per module


def test_code_inputs_follow_the_plumbing_into_the_library():
    """A script that reads its scores through the plumbing (``disaggregated_eval_workflow.inputs``)
    lists the plumbing's files and the library modules they import (``io``), so an edit of either
    reruns the rule; a script that does not import the plumbing lists none of its files."""
    plumbing = code_files.source_files(f"{PLUMBING}.inputs", root=REPO)
    assert {
        "src/disaggregated_eval/__init__.py",
        "src/disaggregated_eval/io.py",
        f"workflow/lib/{PLUMBING}/__init__.py",
        f"workflow/lib/{PLUMBING}/inputs.py",
    } <= set(plumbing)
    files = code_files.script_files(REPO / "workflow" / "scripts" / "fit_weight_models.py", root=REPO)
    assert {*plumbing, "src/disaggregated_eval/weight_models.py"} <= set(files)
    plots = code_files.script_files(REPO / "workflow" / "scripts" / "plot_coverage.py", root=REPO)
    assert "src/disaggregated_eval/plots.py" in plots and not [f for f in plots if f.startswith("workflow/")]


def _write_packages(root: Path, files: dict[str, str]) -> None:
    """Source files of the library (``lib/...``) and of the plumbing (``plumbing/...``) under ``root``,
    laid out as in the repository."""
    folders = {"lib": root / "src" / "disaggregated_eval", "plumbing": root / "workflow" / "lib" / PLUMBING}
    for name, text in files.items():
        where, _, rest = name.partition("/")
        path = folders[where] / rest
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_import_walk_follows_every_kind_of_package_import(tmp_path):
    _write_packages(
        tmp_path,
        {
            "lib/__init__.py": "",
            "lib/top.py": "from .engine import intervals\nimport numpy\n",
            "lib/engine/__init__.py": "from .sums import total\n",
            "lib/engine/sums.py": "def total():\n    from ..vocab import NAMES  # a lazy import counts\n",
            "lib/engine/intervals.py": "from disaggregated_eval.engine import sums\nfrom . import missing_name\n",
            "lib/vocab.py": "NAMES = ()\n",
            "lib/audit/__init__.py": "",
            "lib/audit/deep/__init__.py": "",
            "lib/audit/deep/leaf.py": "from ... import vocab\nfrom ...engine.sums import total\nimport disaggregated_eval.unused\n",
            "lib/unused.py": "",
            "lib/lonely.py": "",
            "plumbing/__init__.py": "",
            "plumbing/inputs.py": "from disaggregated_eval import vocab\nfrom . import helpers\nfrom .. import beyond\n",
            "plumbing/helpers.py": "",
        },
    )
    lib = "disaggregated_eval"
    closure = code_files.import_closure([f"{lib}.top"], root=tmp_path)
    assert closure == {lib, *(f"{lib}.{m}" for m in ("top", "engine", "engine.intervals", "engine.sums", "vocab"))}
    leaf = code_files.import_closure([f"{lib}.audit.deep.leaf"], root=tmp_path)
    # the packages on the way run first (audit, audit.deep); absolute, relative and lazy imports all count
    assert leaf == {
        lib, *(f"{lib}.{m}" for m in ("audit", "audit.deep", "audit.deep.leaf", "vocab", "engine", "engine.sums", "unused"))
    }  # fmt: skip
    assert code_files.source_files(f"{lib}.audit.deep.leaf", root=tmp_path) == [
        "src/disaggregated_eval/__init__.py",
        "src/disaggregated_eval/audit/__init__.py",
        "src/disaggregated_eval/audit/deep/__init__.py",
        "src/disaggregated_eval/audit/deep/leaf.py",
        "src/disaggregated_eval/engine/__init__.py",
        "src/disaggregated_eval/engine/sums.py",
        "src/disaggregated_eval/unused.py",
        "src/disaggregated_eval/vocab.py",
    ]
    # from the plumbing into the library; a relative import above the top-level package is not ours
    assert code_files.source_files(f"{PLUMBING}.inputs", root=tmp_path) == [
        "src/disaggregated_eval/__init__.py",
        "src/disaggregated_eval/vocab.py",
        f"workflow/lib/{PLUMBING}/__init__.py",
        f"workflow/lib/{PLUMBING}/helpers.py",
        f"workflow/lib/{PLUMBING}/inputs.py",
    ]
    script = tmp_path / "rule_script.py"
    script.write_text(
        f"from disaggregated_eval import top, vocab\nfrom {PLUMBING}.inputs import x\nfrom . import not_ours\n"
        "import pandas\nimport disaggregated_evaluation\n"
    )
    assert code_files.script_modules(script, root=tmp_path) == {
        lib,
        f"{lib}.top",
        f"{lib}.vocab",
        PLUMBING,
        f"{PLUMBING}.inputs",
    }
    assert f"workflow/lib/{PLUMBING}/helpers.py" in code_files.script_files(script, root=tmp_path)
    with pytest.raises(ValueError, match=r"no module 'disaggregated_eval\.nothing'"):
        code_files.source_files(f"{lib}.nothing", root=tmp_path)


# ---- the audit jobs' code files -----------------------------------------------------------------
def test_audit_code_files_are_the_import_walk_of_the_audit_script():
    files = audit_runs.audit_code_files(REPO)
    script = REPO / audit_runs.AUDIT_SCRIPT
    expected = code_files.source_files(*code_files.script_modules(script, root=REPO), root=REPO)
    assert files == expected
    # the module the hand-written list missed, and the audit's own modules
    assert "src/disaggregated_eval/memory.py" in files
    assert {"src/disaggregated_eval/audit/core.py", "src/disaggregated_eval/audit/outputs.py"} <= set(files)
    # workflow plumbing is not audit code: editing it reruns no audit
    assert not [f for f in files if not f.startswith("src/disaggregated_eval/")]


@pytest.mark.slow
def test_audit_code_files_hold_every_module_an_audit_job_runs(tmp_path):
    """Run what rule run_audit runs (a small COMPAS audit, outputs written) in a fresh interpreter:
    every package module it has loaded at the end is among the rule's code inputs."""
    code = textwrap.dedent(
        f"""
        import json, sys
        import pandas as pd
        from disaggregated_eval.audit import audit
        from disaggregated_eval.audit.outputs import write_outputs
        data = pd.read_csv({str(REPO / "examples" / "data" / "compas.csv")!r}).head(600)
        data.to_csv("compas.csv", index=False)
        result = audit(data, label="two_year_recid", scores=["compas_score"], groups=["race"],
                       metrics=["false_positive_rate", "auc"], controls=["none", "R"], n_resamples=200,
                       n_permutations=20, max_leaf_nodes=[10], cv_folds=2, crossfit_folds=2, seed=1)
        write_outputs(result, {str(tmp_path / "out")!r}, input_path="compas.csv")
        print(json.dumps(sorted(getattr(m, "__file__", None) or "" for n, m in sys.modules.items()
                                if n == "disaggregated_eval" or n.startswith("disaggregated_eval."))))
        """
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-4000:]
    loaded = {Path(f).resolve() for f in json.loads(run.stdout.splitlines()[-1]) if f}
    listed = {(REPO / f).resolve() for f in audit_runs.audit_code_files(REPO)}
    assert loaded and not sorted(str(p) for p in loaded - listed)


def test_the_library_never_imports_the_plumbing():
    """Every module of the installed package, followed through all its imports (lazy ones too), stays
    inside the package: the plumbing is not installed, so an import of it would fail for a practitioner."""
    modules = [
        ".".join(("disaggregated_eval", *path.relative_to(SOURCE).with_suffix("").parts)).removesuffix(".__init__")
        for path in sorted(SOURCE.rglob("*.py"))
    ]
    assert len(modules) > 50 and "disaggregated_eval.audit.cli" in modules
    closure = code_files.import_closure(modules, root=REPO)  # the modules and all they import
    assert not sorted(closure - set(modules))  # e.g. disaggregated_eval_workflow.config


# ---- Snakemake's params listing -----------------------------------------------------------------
def test_params_listing_fix_lists_changes_only():
    """With the work-around, a ``ParamsChange`` that is no change lists no file and a change still lists
    its files, whether or not the installed Snakemake has the bug (then the work-around does nothing)."""
    code = textwrap.dedent(
        f"""
        import json, sys
        sys.path.insert(0, {str(WORKFLOW_LIB)!r})
        from disaggregated_eval_workflow import snakemake_compat
        from snakemake.persistence import ParamsChange
        buggy = snakemake_compat.params_change_listing_is_buggy()
        patched = snakemake_compat.fix_params_change_listing()
        unchanged = ParamsChange() | ParamsChange(files={{"a.txt"}})
        changed = ParamsChange(only_new={{"'x'"}}, files={{"b.txt"}}) | ParamsChange(files={{"c.txt"}})
        print(json.dumps([buggy, patched, list(unchanged), sorted(changed),
                          snakemake_compat.params_change_listing_is_buggy(),
                          snakemake_compat.fix_params_change_listing()]))
        """
    )
    buggy, patched, unchanged, changed, still_buggy, patched_again = json.loads(
        subprocess.check_output([sys.executable, "-c", code], text=True)
    )
    assert patched == buggy  # patched exactly when needed
    assert unchanged == [] and changed == ["b.txt"]
    assert not still_buggy and not patched_again  # idempotent


# ---- score files checked against the test set ---------------------------------------------------
def test_read_scores_names_the_file_and_both_row_counts(tmp_path):
    scores = tmp_path / "scores.parquet"
    bayes = tmp_path / "bayes_scores.parquet"
    io.write_table(pd.DataFrame({"x": [0.1, 0.2, 0.3], "xa": [0.3, 0.2, 0.1]}), scores)
    io.write_table(pd.DataFrame({"bayes_x": [0.5, 0.5]}), bayes)  # shortened, but a valid parquet file
    both = read_scores([scores], n_rows=3, test_path="test.parquet", models=["xa", "x"])
    assert list(both.columns) == ["xa", "x"] and both["x"].tolist() == [0.1, 0.2, 0.3]
    with pytest.raises(ValueError, match=rf"score file {bayes} has 2 rows but the test set test.parquet has 3"):
        read_scores([scores, bayes], n_rows=3, test_path="test.parquet")
    with pytest.raises(ValueError, match=r"lack the model columns \['bayes_xa'\]"):
        read_scores([scores], n_rows=3, test_path="test.parquet", models=["x", "bayes_xa"])


@pytest.mark.slow
def test_shortened_score_file_stops_the_weight_models_with_a_clear_message(tmp_path):
    """A valid but shortened scores.parquet used to end in a message about NaN inside the weight
    models' fit; now the job stops at once, naming the file and both row counts."""
    workdir = tmp_path / "wd"
    workdir.mkdir()
    for name in ("Snakefile", "workflow", "config", "src", "profiles"):
        (workdir / name).symlink_to(REPO / name)
    tiny = REPO / "tests" / "fixtures" / "tiny.yaml"

    def snakemake(*args):
        cmd = [sys.executable, "-m", "snakemake", *args, "--cores", "1", "--configfile", str(tiny)]
        return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)

    scores = workdir / "results" / "models" / "covariate_shift" / "scores.parquet"
    first = snakemake(str(scores.relative_to(workdir)))
    assert first.returncode == 0, first.stderr[-3000:]
    frame = io.read_table(scores)
    io.write_table(frame.iloc[:-7], scores)
    weights = "results/weights/covariate_shift/weights_estimated.parquet"
    second = snakemake(weights)
    assert second.returncode != 0
    log = (workdir / "logs" / "fit_weight_models" / "covariate_shift.log").read_text()
    n_test = len(pd.read_parquet(workdir / "results" / "data" / "covariate_shift" / "test.parquet"))
    expected = (
        f"score file results/models/covariate_shift/scores.parquet has {n_test - 7} rows but the test set "
        f"results/data/covariate_shift/test.parquet has {n_test}"
    )
    assert expected in log, log[-3000:]
    assert "NaN" not in log


# ---- the run's time per rule --------------------------------------------------------------------
def test_rule_times_add_up_the_jobs_benchmarks(tmp_path, capsys):
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    files = {"fit_weight_models/a.tsv": (120.0, 100.0, 300.0), "fit_weight_models/b.tsv": (60.0, 50.0, 500.0),
             "plot_controlled_differences/simulation/figure_1.tsv": (6.0, 3.0, 200.0)}  # fmt: skip
    for name, (wall, cpu, rss) in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(header + f"{wall}\t0:00:00\t{rss}\t0\t0\t0\t0\t0\t50\t{cpu}\n")
    table = timings.rule_times(timings.job_times(tmp_path)).set_index("rule")
    assert list(table.index) == ["fit_weight_models", "plot_controlled_differences", "total"]
    assert table.loc["fit_weight_models", "jobs"] == 2 and table.loc["fit_weight_models", "job_minutes"] == 3.0
    assert table.loc["fit_weight_models", "cpu_minutes"] == 2.5 and table.loc["fit_weight_models", "max_rss_mb"] == 500
    assert table.loc["total", "job_minutes"] == 3.1 and table.loc["total", "jobs"] == 3
    assert timings.main([str(tmp_path)]) == 0 and "fit_weight_models" in capsys.readouterr().out
    assert timings.main([str(tmp_path / "nothing")]) == 1


def test_every_rule_writes_a_benchmark():
    """The README's split of a run's time comes from the benchmark files: every rule that does work
    must write one (the target rules all, acs, paper, audit, coverage do none)."""
    text = "\n".join(p.read_text() for p in sorted((REPO / "workflow" / "rules").glob("*.smk")))
    rules = re.split(r"(?m)^rule ", text)[1:]
    without = [r.split(":")[0] for r in rules if "script:" in r and "benchmark:" not in r]
    assert without == []
