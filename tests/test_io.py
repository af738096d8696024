"""Atomic writes leave either the complete file or nothing."""

import os
import stat

import pandas as pd
import pytest

from disaggregated_eval.io import atomic_path, read_table, write_json, write_table


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
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_bad_suffix_is_rejected(tmp_path):
    with pytest.raises(ValueError, match=r"\.parquet, \.csv or \.md"):
        write_table(pd.DataFrame({"a": [1]}), tmp_path / "t.xlsx")
