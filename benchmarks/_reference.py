"""Today's code as a reference in the same benchmark run: a pinned commit's package in a subprocess.

Speed goals are ratios against the code before a change, measured in the same run (never a number
from another day). :func:`reference_tree` extracts ``src/`` of a commit (``git archive``) once into
``benchmarks/output/reference-<commit>/`` and :func:`run_reference` runs a Python snippet there in a
subprocess (``PYTHONPATH`` pointing at that tree, numba's cache in it), returning what the snippet
prints as JSON on its last line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

__all__ = ["REFERENCE_COMMIT", "reference_tree", "run_reference"]

#: The commit before the one-engine change (issue of the engine): "today's code" of the benchmarks.
REFERENCE_COMMIT = "b24421a"
_ROOT = Path(__file__).resolve().parents[1]


def reference_tree(commit: str = REFERENCE_COMMIT) -> Path:
    """The ``src`` folder of ``commit`` (extracted once with ``git archive``), as a path to put on PYTHONPATH."""
    target = _ROOT / "benchmarks" / "output" / f"reference-{commit}"
    src = target / "src"
    if (src / "disaggregated_eval" / "__init__.py").is_file():
        return src
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target) as tmp:
        archive = Path(tmp) / "src.tar"
        subprocess.run(
            ["git", "-C", str(_ROOT), "archive", "--format=tar", "-o", str(archive), commit, "src"], check=True
        )
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        os.replace(Path(tmp) / "src", src)
    return src


def run_reference(code: str, *, commit: str = REFERENCE_COMMIT, timeout: float | None = None) -> dict:
    """Run ``code`` with the package of ``commit`` importable; return the JSON of its last output line."""
    env = dict(os.environ, PYTHONPATH=str(reference_tree(commit)))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"reference run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
