"""Reading an audit's input file: every bad file stops with a message naming file and problem.

Each bad input of docs/audit.md ("Bad input") is built in a temporary folder; the test checks the
exception type (InputFileError, exit status 2 in the CLI) and that the message names the file, the
offending line / column / values and what was expected.
"""

from __future__ import annotations

import csv
import gzip
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from disaggregated_eval.audit.loading import InputFileError, load_table, read_header, required_columns

HEADER = "y,score,race,sex\n"
ROWS = "1,0.8,A,F\n0,0.2,B,M\n1,0.6,A,M\n"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def error_of(path: Path, **kwargs) -> str:
    with pytest.raises(InputFileError) as info:
        load_table(path, **kwargs)
    message = str(info.value)
    assert str(path) in message, message  # every message names the file
    assert "\n" not in message  # one line
    return message


# ---- good files ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["t.csv", "t.csv.gz", "t.tsv", "t.parquet"])
def test_reads_every_supported_format_with_the_requested_columns(tmp_path, name):
    frame = pd.DataFrame({"y": [1, 0, 1], "score": [0.8, 0.2, 0.6], "race": ["A", "B", "A"], "sex": ["F", "M", "M"]})
    path = tmp_path / name
    if name.endswith(".parquet"):
        frame.to_parquet(path, index=False)
    elif name.endswith(".csv.gz"):
        with gzip.open(path, "wt") as handle:
            frame.to_csv(handle, index=False)
    else:
        frame.to_csv(path, index=False, sep="\t" if ".tsv" in name else ",")
    got = load_table(path, columns=["sex", "y", "score"])
    assert list(got.columns) == ["sex", "y", "score"]  # requested order
    assert got["y"].tolist() == [1, 0, 1]
    np.testing.assert_array_equal(got["score"].to_numpy(), [0.8, 0.2, 0.6])
    assert got["sex"].tolist() == ["F", "M", "M"]


def test_missing_values_stay_missing_and_blank_lines_are_skipped(tmp_path):
    path = write(tmp_path / "m.csv", HEADER + "1,0.8,,F\n\n0,0.2,B,M\n")
    got = load_table(path)
    assert len(got) == 2
    assert got["race"].isna().tolist() == [True, False]


@pytest.mark.parametrize("name", ["t.csv", "t.parquet"])
def test_pandas_missing_markers_are_levels_in_group_columns_of_either_format(tmp_path, name):
    # F1 of hostile trial round 6: 'NA', 'None', 'NULL' and 'nan' in a CSV's group column were merged into the
    # level 'missing' (a country code NA, a category None), while the same table as Parquet kept them as levels
    levels = ["NA", "None", "NULL", "nan", None, "A"]
    frame = pd.DataFrame({"y": [1, 0, 1, 0, 1, 0], "score": [0.8, None, 0.6, 0.1, 0.3, 0.5], "g": levels})
    path = tmp_path / name
    frame.to_parquet(path, index=False) if name.endswith(".parquet") else frame.to_csv(path, index=False)
    got = load_table(path, level_columns=["g"])
    assert got["g"].tolist()[:4] == ["NA", "None", "NULL", "nan"] and got["g"].isna().tolist()[4:] == [True, False]
    assert got["score"].isna().tolist() == [False, True, False, False, False, False]
    if name.endswith(".csv"):  # in the other columns pandas' markers stay missing (R writes NA in numbers)
        path.write_text("y,score,g\n1,NA,A\n0,0.5,NA\n")
        got = load_table(path, level_columns=["g"])
        assert got["score"].isna().tolist() == [True, False] and got["g"].tolist() == ["A", "NA"]
        assert load_table(path)["g"].isna().tolist() == [False, True]  # without level_columns: pandas' reading


def test_utf8_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + (HEADER + ROWS).encode())
    assert read_header(path) == ["y", "score", "race", "sex"]


def test_required_columns_keeps_order_and_drops_repeats():
    options = {"label": "y", "scores": ["a", "b"], "groups": ["race", "sex"], "features": ["x", "race"],
               "sample_weight": "w"}  # fmt: skip
    assert required_columns(**options) == ["y", "a", "b", "race", "sex", "x", "w"]
    assert required_columns(label="y", scores=["a"], groups=["g"], sample_weight=None) == ["y", "a", "g"]
    with pytest.raises(TypeError, match="groups must be a list of column names, not a single string; got 'race'"):
        required_columns(label="y", scores=["a"], groups="race")


# ---- bad files (docs/audit.md "Bad input") ---------------------------------------------------------
def test_missing_file_names_the_file_and_similar_names(tmp_path):
    write(tmp_path / "scores.csv", HEADER + ROWS)
    message = error_of(tmp_path / "score.csv")
    assert "no such file" in message and "scores.csv" in message


def test_gzipped_file_under_a_csv_name(tmp_path):
    path = tmp_path / "data.csv"
    path.write_bytes(gzip.compress((HEADER + ROWS).encode()))
    message = error_of(path)
    assert "gzip-compressed" in message and "data.csv.gz" in message


def test_gz_name_without_gzip_content(tmp_path):
    message = error_of(write(tmp_path / "data.csv.gz", HEADER + ROWS))
    assert "not gzip-compressed" in message


def test_truncated_last_line(tmp_path):
    path = write(tmp_path / "cut.csv", HEADER + ROWS + "0,0.3")  # cut off mid-row, no newline
    message = error_of(path)
    assert "last line (line 5) is truncated" in message
    assert "2 of 4 fields" in message


def test_truncated_gzip_stream(tmp_path):
    data = gzip.compress((HEADER + ROWS * 200).encode())
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(data[: len(data) // 2])
    message = error_of(path)
    assert "damaged or truncated" in message


def test_rows_with_a_wrong_number_of_fields_are_listed(tmp_path):
    path = write(tmp_path / "ragged.csv", HEADER + "1,0.8,A\n" + ROWS + "1,0.1,A,F,extra\n")
    message = error_of(path)
    assert "expected 4 fields on every line" in message
    assert "line 2: 3 fields" in message and "line 6: 5 fields" in message


def test_unclosed_quote(tmp_path):
    message = error_of(write(tmp_path / "quote.csv", HEADER + '1,0.8,"A,F\n'))
    assert "malformed CSV" in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (bytes(range(256)) * 4, "not UTF-8 text"),  # binary file named .csv
        (b"PAR1" + b"\x00" * 64, "is a parquet file"),  # parquet under a .csv name
        (b"PK\x03\x04" + b"\x00" * 64, "zip archive"),
    ],
)
def test_not_a_csv(tmp_path, content, expected):
    path = tmp_path / "binary.csv"
    path.write_bytes(content)
    assert expected in error_of(path)


def test_text_that_is_not_a_table_names_the_single_column(tmp_path):
    path = write(tmp_path / "semicolons.csv", "y;score;race\n1;0.8;A\n")
    message = error_of(path, columns=["y", "score", "race"])
    assert "no column(s) 'y', 'score', 'race'" in message
    assert "single column" in message


def test_parquet_name_without_parquet_content(tmp_path):
    message = error_of(write(tmp_path / "t.parquet", HEADER + ROWS))
    assert "no parquet magic bytes" in message


def test_duplicated_column_names_are_detected_from_the_header(tmp_path):
    # pandas would read this silently, renaming the second 'score' to 'score.1'.
    path = write(tmp_path / "dup.csv", "y,score,race,score\n1,0.8,A,0.7\n")
    message = error_of(path)
    assert "duplicated column names" in message and "'score' (columns 2, 4)" in message


def test_duplicated_column_names_in_parquet(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table([pa.array([1, 0]), pa.array([0.1, 0.2]), pa.array([0.3, 0.4])], names=["y", "s", "s"])
    pq.write_table(table, tmp_path / "dup.parquet")
    assert "'s' (columns 2, 3)" in error_of(tmp_path / "dup.parquet")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", "the file is empty"), (HEADER, "no data rows"), ("\n" + ROWS, "header) is empty")],
)
def test_empty_file_header_only_and_empty_header(tmp_path, text, expected):
    assert expected in error_of(write(tmp_path / "e.csv", text))


def test_unknown_extension(tmp_path):
    message = error_of(write(tmp_path / "data.xlsx", HEADER))
    assert "unknown file type" in message and ".csv" in message


def test_folder_instead_of_file(tmp_path):
    (tmp_path / "d.csv").mkdir()
    assert "is a folder" in error_of(tmp_path / "d.csv")


def test_missing_column_suggests_close_names(tmp_path):
    path = write(tmp_path / "t.csv", HEADER + ROWS)
    message = error_of(path, columns=["y", "scores", "Race"])
    assert "no column(s) 'scores', 'Race'" in message
    assert re.search(r"'scores' -> did you mean 'score'", message)
    assert re.search(r"'Race' -> did you mean 'race'", message)
    assert "['y', 'score', 'race', 'sex']" in message  # what the file has


# ---- fields of any size in unused columns; only the used columns are kept (hostile input, item 9) ----------
def test_a_field_over_128_kib_in_an_unused_column_is_fine(tmp_path):
    import csv

    huge = "x" * (300 * 1024)  # the csv module refuses fields over 128 KiB unless its limit is lifted
    path = write(tmp_path / "big.csv", f'y,score,race,notes\n1,0.8,A,"{huge}"\n0,0.2,B,short\n')
    limit = csv.field_size_limit()
    got = load_table(path, columns=["y", "score", "race"])
    assert got["race"].tolist() == ["A", "B"]
    assert csv.field_size_limit() == limit  # the process-wide limit is restored
    assert load_table(path)["notes"].str.len().tolist() == [len(huge), 5]  # also when it is read


def test_only_the_requested_columns_are_parsed_with_pandas_types(tmp_path):
    # the used columns are copied into a compact CSV for pandas: types, missing values, quotes and
    # line breaks inside fields come out as pandas reads the original file
    text = 'y,score,race,unused,"a, b"\n1,0.8,"A\nA",zzz,1\n0,,B,"q""uote",NA\n1,1e-3,,x,3\n'
    path = write(tmp_path / "types.csv", text)
    got = load_table(path, columns=["a, b", "score", "race", "y"])
    expected = pd.read_csv(path)[["a, b", "score", "race", "y"]]
    pd.testing.assert_frame_equal(got, expected)
    assert list(got.columns) == ["a, b", "score", "race", "y"]
    assert got["race"].tolist()[0] == "A\nA" and got["race"].isna().tolist() == [False, False, True]


@pytest.mark.parametrize("breaks", ["\r", "\n", "\r\n"])
def test_a_quoted_line_break_in_a_used_column_is_read_as_pandas_reads_it(tmp_path, breaks):
    """A valid CSV whose quoted fields hold a bare carriage return (or a line feed) in a used column: 200
    rows, as pandas reads the same file (issue 22, item 4: the bare CR made 310 rows before, and the
    error blamed the label column)."""
    rng = np.random.default_rng(4)
    n = 200
    frame = pd.DataFrame({
        "y": rng.integers(0, 2, n),
        "score": rng.uniform(size=n).round(6),
        "group": np.where(np.arange(n) % 3 == 0, f"north{breaks}east", "south"),
        "unused": np.where(np.arange(n) % 5 == 0, f"a{breaks}b", "c"),
    })  # fmt: skip
    path = tmp_path / "breaks.csv"
    frame.to_csv(path, index=False, lineterminator="\n", quoting=csv.QUOTE_NONNUMERIC)  # text fields quoted
    assert f'"north{breaks}east"'.encode() in path.read_bytes()
    read = load_table(path, columns=["y", "score", "group"])
    expected = pd.read_csv(path, usecols=["y", "score", "group"])[["y", "score", "group"]]
    assert len(read) == n
    pd.testing.assert_frame_equal(read, expected)
    assert (read["group"] == f"north{breaks}east").sum() == len(range(0, n, 3))
