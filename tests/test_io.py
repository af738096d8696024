"""Atomic writes leave either the complete file or nothing; killed writers' temporaries are cleaned up."""

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from disaggregated_eval.io import (
    atomic_path,
    read_table,
    remove_stale_temporaries,
    temporary_sibling,
    write_json,
    write_table,
)


def test_tables_round_trip_and_are_world_readable(tmp_path):
    df = pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})
    for suffix in (".parquet", ".csv"):
        path = tmp_path / f"t{suffix}"
        write_table(df, path)
        pd.testing.assert_frame_equal(read_table(path), df)
        umask = os.umask(0)
        os.umask(umask)
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask
    write_table(df, tmp_path / "t.md")
    assert (tmp_path / "t.md").read_text().splitlines()[0].replace(" ", "") == "|a|b|"
    write_json({"k": 1}, tmp_path / "j.json")
    assert (tmp_path / "j.json").read_text().strip().startswith("{")


def test_failure_leaves_no_partial_file(tmp_path):
    target = tmp_path / "out.csv"
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_bad_suffix_is_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"\.parquet, \.csv or \.md"):
        write_table(pd.DataFrame({"a": [1]}), tmp_path / "t.xlsx")


# ---------------------------------------------------------------------------------------------
# Temporaries of killed writers


def _dead_pid() -> int:
    """The id of a process that has exited (a finished child's)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(child.stdout)


_WRITER = """
import sys, time
from disaggregated_eval.io import atomic_path
with atomic_path(sys.argv[1]) as tmp:
    tmp.write_text("partial")
    print(tmp, flush=True)
    if sys.argv[2] == "kill":
        import os, signal
        os.kill(os.getpid(), signal.SIGKILL)  # a job killed while writing
    sys.stdin.readline()  # hold the temporary until told to finish
    tmp.write_text("complete")
"""


def _start_writer(target, mode):
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(target), mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    return proc, Path(proc.stdout.readline().strip())


def test_killed_writer_leaves_a_temporary_that_the_next_write_removes(tmp_path):
    target = tmp_path / "metrics.csv"
    proc, tmp = _start_writer(target, "kill")
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert tmp.exists() and tmp.name.startswith(".metrics.csv.") and not target.exists()
    write_table(pd.DataFrame({"a": [1]}), target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.csv"]


def test_stale_temporaries_only_of_the_target_and_of_dead_writers(tmp_path):
    dead = _dead_pid()
    stale = tmp_path / f".out.csv.{dead}-0123abcd.tmp"
    live = tmp_path / f".out.csv.{os.getpid()}-0123abcd.tmp"  # a running writer of the same target
    other_target = tmp_path / f".out.csv.bak.{dead}-0123abcd.tmp"
    not_ours = tmp_path / ".out.csv.swp"
    stale_dir = tmp_path / f".out.csv.{dead}-89abcdef.download"
    for path in (stale, live, other_target, not_ours):
        path.write_text("x")
    stale_dir.mkdir()
    (stale_dir / "part.zip").write_text("x")
    assert remove_stale_temporaries(tmp_path / "out.csv") == [stale]
    assert remove_stale_temporaries(tmp_path / "out.csv", suffix=".download") == [stale_dir]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (live, other_target, not_ours))
    assert remove_stale_temporaries(tmp_path / "absent" / "out.csv") == []


def test_concurrent_writers_keep_each_others_temporaries(tmp_path):
    """A writer of one target never removes a running writer's temporary, of its own or another target."""
    first, first_tmp = _start_writer(tmp_path / "a.csv", "hold")
    try:
        # Other targets, one whose name extends the first target's, and the same target from this process.
        for name in ("a.csv.bak", "b.csv", "a.csv"):
            with atomic_path(tmp_path / name) as tmp:
                tmp.write_text("other")
            assert first_tmp.exists(), name
    finally:
        first.communicate("go\n", timeout=60)
    assert first.returncode == 0
    assert (tmp_path / "a.csv").read_text() == "complete"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "a.csv.bak", "b.csv"]


def test_temporary_sibling_names_and_permissions(tmp_path):
    tmp = temporary_sibling(tmp_path / "sub" / "t.parquet")
    assert tmp.parent == tmp_path / "sub" and tmp.name.startswith(f".t.parquet.{os.getpid()}-") and tmp.suffix == ".tmp"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(tmp.stat().st_mode) == 0o666 & ~umask
    folder = temporary_sibling(tmp_path / "t.csv", suffix=".download", directory=True)
    assert folder.is_dir() and folder.name.endswith(".download")


def test_csv_with_a_carriage_return_in_a_cell_keeps_its_rows(tmp_path):
    """pandas leaves a bare ``\\r`` unquoted and readers split the row there; such tables are quoted."""
    import csv as csv_module

    df = pd.DataFrame({"slice": ["g=M\r=1+2", "g=F"], "estimate": [0.25, 0.5]})
    path = tmp_path / "t.csv"
    write_table(df, path)
    with path.open(newline="") as handle:
        rows = list(csv_module.reader(handle))
    assert rows == [["slice", "estimate"], ["g=M\r=1+2", "0.25"], ["g=F", "0.5"]]
    pd.testing.assert_frame_equal(pd.read_csv(path), df)
    plain = tmp_path / "plain.csv"  # without a carriage return: the usual minimal quoting
    write_table(df.assign(slice=["a", "b"]), plain)
    assert plain.read_text() == "slice,estimate\na,0.25\nb,0.5\n"


def test_read_yaml_unique_keys_names_a_key_given_twice_and_keeps_merges():
    import yaml

    from disaggregated_eval.io import DuplicateKeyError, read_yaml_unique_keys

    with pytest.raises(DuplicateKeyError) as info:
        read_yaml_unique_keys("a: 1\nb:\n  c: 2\n  c: 3\n")
    assert (info.value.key, info.value.first, info.value.second) == ("c", 3, 4)
    # a '<<' merge may be overridden; equal keys in different mappings are fine
    assert read_yaml_unique_keys("base: &b {x: 1}\nother:\n  <<: *b\n  x: 2\n") == {"base": {"x": 1}, "other": {"x": 2}}
    assert yaml.safe_load("a: 1\na: 2\n") == {"a": 2}  # what plain PyYAML does silently
    with pytest.raises(yaml.YAMLError):  # an unhashable key is PyYAML's own error
        read_yaml_unique_keys("? [1, 2]\n: x\n")
