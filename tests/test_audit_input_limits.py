"""The right rows or a clear refusal, and bounded work, on hostile inputs (issue 32, items 1-4 and 6-9).

- Paths are data, never patterns: a Parquet folder named ``exp[12]``, ``log*`` or ``log[1]`` is read as
  that folder, and the rows DuckDB counts equal the rows of the files' footers.
- A folder's walk ends on any folder: a link loop, a link to a folder or a file reached twice is refused.
- Every file the tool or the workflow reads is checked before it is read: a FIFO or a device is refused
  (a FIFO would block forever, ``/dev/zero`` would fill the memory), a file over its stated size too.
- Every check of a user-sized list is linear, and the lists with a cost per item have stated maxima.
- One schema rule for a folder, one frequency-weight rule for every path, margins read as the data.

What would hang or fill the memory on the code before these fixes runs in a subprocess with a bounded
address space (4 GB) and a time limit generous for the linear code (each such check takes a few seconds
here, most of it the interpreter's start; the code it replaces took hours or did not end), so that the
suite fails instead of hanging.
"""

from __future__ import annotations

import dataclasses
import os
import resource
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from disaggregated_eval.audit import audit
from disaggregated_eval.audit.aggregate import AggregationError, aggregate_dask, aggregate_frame, aggregate_parquet
from disaggregated_eval.audit.cli import main
from disaggregated_eval.audit.errors import AuditInputError

REPO = Path(__file__).resolve().parents[1]
COMPAS = REPO / "examples" / "data" / "compas.csv"
COLUMNS = ["y", "pred", "g"]
FAST = dict(n_resamples=200, n_permutations=0, metrics=["accuracy"])
#: Address space and time of a subprocess that runs a hostile input (the linear code needs a few seconds).
_AS_BYTES = 4 * 10**9
_SECONDS = 120


def _log(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"y": rng.integers(0, 2, n), "pred": rng.integers(0, 2, n), "g": rng.choice(["a", "b"], n),
                         "w": rng.integers(1, 4, n)})  # fmt: skip


def _bounded(code: str, *args: str, timeout: float = _SECONDS) -> subprocess.CompletedProcess:
    """Run ``code`` (or, without code, ``disagg-eval`` with ``args``) in a fresh interpreter with at most
    :data:`_AS_BYTES` of address space; fail the test if it does not end within ``timeout`` seconds."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (_AS_BYTES, _AS_BYTES))

    argv = (
        [sys.executable, "-c", textwrap.dedent(code)]
        if code
        else [sys.executable, "-m", "disaggregated_eval.audit.cli", *args]
    )
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not end within {timeout} s (a read without bound, or a walk or check that does not end)")


def _footer_rows(folder: Path) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(p).num_rows for p in folder.rglob("*.parquet"))


# ----------------------------------------------------------------------------------------------
# Item 1: a path is data, never a pattern; the rows counted are the files' rows
# ----------------------------------------------------------------------------------------------
def test_a_parquet_folder_named_like_a_glob_pattern_is_read_as_that_folder(tmp_path):
    sizes = {"exp1": 100, "exp2": 200, "exp[12]": 30, "log1": 400, "log[1]": 50, "log*": 70, "q?": 20, "qa": 90,
             "b\\[x]*": 40, "bx": 60, "it's": 25}  # fmt: skip
    frames = {}
    for seed, (name, n) in enumerate(sizes.items()):
        folder = tmp_path / name
        folder.mkdir()
        frame = _log(n, seed)
        for k, part in enumerate((frame.iloc[: n // 2], frame.iloc[n // 2 :])):
            part.to_parquet(folder / f"part-{k}.parquet")
        frames[name] = frame
    for name, frame in frames.items():
        got = aggregate_parquet(tmp_path / name, COLUMNS)
        pd.testing.assert_frame_equal(got, aggregate_frame(frame, COLUMNS), obj=name)
        assert int(got["count"].sum()) == _footer_rows(tmp_path / name) == len(frame)


def test_rows_counted_by_duckdb_must_equal_the_rows_of_the_footers(tmp_path):
    from disaggregated_eval.audit.parquet_files import find_parquet

    (tmp_path / "log").mkdir()
    _log(100, 1).to_parquet(tmp_path / "log" / "a.parquet")
    _log(50, 2).to_parquet(tmp_path / "log" / "b.parquet")
    source = find_parquet(tmp_path / "log")
    assert source.n_rows == 150
    first = dataclasses.replace(source.files[0], rows=source.files[0].rows + 1)  # a footer that lies
    tampered = dataclasses.replace(source, files=(first, *source.files[1:]))
    with pytest.raises(AggregationError, match=r"DuckDB read 150 rows, but the files' footers hold 151"):
        aggregate_parquet(tampered, COLUMNS)
    with pytest.raises(AggregationError, match=r"DuckDB read 150 rows, but the files' footers hold 151"):
        aggregate_parquet(tampered, ["g"], frequency_weight="w")


def _corrupt_data_pages(path: Path) -> None:
    """Flip every 97th byte between the magic and the footer: the footer reads, the data pages do not."""
    data = bytearray(path.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    for i in range(4, len(data) - 8 - footer, 97):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("compression", ["snappy", "none"])
def test_a_file_duckdb_cannot_read_is_named_as_the_users_file(tmp_path, compression):
    big = tmp_path / "BIG"
    big.mkdir()
    _log(3000, 1).to_parquet(big / "part-0.parquet")
    _log(3000, 2).to_parquet(big / "part-9.parquet", compression=compression)
    _corrupt_data_pages(big / "part-9.parquet")
    for weight in (None, "w"):
        with pytest.raises(AggregationError) as error:
            aggregate_parquet(big, COLUMNS, frequency_weight=weight)
        message = str(error.value)
        assert message.startswith(f"{big / 'part-9.parquet'}: "), message
        assert f"DuckDB could not aggregate the folder {big} (" in message
        assert "disagg-eval-duckdb" not in message


def test_a_duckdb_error_naming_a_link_of_the_farm_names_the_file_it_links_to(tmp_path, monkeypatch):
    import re

    import duckdb

    from disaggregated_eval.audit import aggregate

    big = tmp_path / "BIG"
    big.mkdir()
    for k in range(11):
        _log(20, k).to_parquet(big / f"part-{k}.parquet")  # part-10 sorts before part-2: link 02 is part-10

    def swapped(connection, query):  # DuckDB's words for a file swapped while it was read (hostile trial 3, CH1-2)
        farm = re.search(r"read_parquet\('([^']*)/\*\.parquet'", query).group(1)
        raise duckdb.IOException(f"IO Error: Prefetch registered for bytes outside file: {farm}/02.parquet, "
                                 f"attempted range: [100, 200), file size: 50")  # fmt: skip

    monkeypatch.setattr(aggregate, "_to_pandas", swapped)
    with pytest.raises(AggregationError) as error:
        aggregate_parquet(big, COLUMNS)
    assert str(error.value) == (
        f"{big / 'part-10.parquet'}: DuckDB could not aggregate the folder {big} ('IO Error: Prefetch registered for bytes "
        f"outside file: {big / 'part-10.parquet'}, attempted range: [100, 200), file size: 50')"
    )

    def out_of_memory(connection, query):
        raise duckdb.OutOfMemoryException("Out of Memory Error: could not allocate block of size 256.0 KiB")

    monkeypatch.setattr(aggregate, "_to_pandas", out_of_memory)
    with pytest.raises(AggregationError) as error:
        aggregate_parquet(big, COLUMNS)
    assert str(error.value) == (
        f"{big}: DuckDB could not aggregate it ('Out of Memory Error: could not allocate block of size 256.0 KiB'); a "
        f"file may be unreadable, but pyarrow read the audited columns of all 11 files without error"
    )


# ----------------------------------------------------------------------------------------------
# Item 2: the folder's walk ends on any folder
# ----------------------------------------------------------------------------------------------
def test_a_link_loop_in_a_parquet_folder_is_refused_at_once(tmp_path):
    (tmp_path / "log" / "day=1").mkdir(parents=True)
    _log(60, 1).to_parquet(tmp_path / "log" / "day=1" / "part-0.parquet")
    os.symlink("..", tmp_path / "log" / "day=1" / "up")  # a loop back to log/
    run = _bounded("", "audit", str(tmp_path / "log"), "--label", "y", "--score", "pred", "--group", "g",
                   "--out", str(tmp_path / "out"))  # fmt: skip
    assert run.returncode == 2, run.stderr[-2000:]
    assert "up: a link to a folder" in run.stderr and "not followed" in run.stderr
    assert not (tmp_path / "out").exists()


def test_a_file_reached_twice_is_refused_and_hidden_or_other_files_are_not_read(tmp_path):
    log = tmp_path / "log"
    (log / "_temporary").mkdir(parents=True)
    frame = _log(80, 3)
    frame.to_parquet(log / "part-0.parquet")
    _log(500, 4).to_parquet(log / "_temporary" / "part-9.parquet")  # a writer's unfinished file
    _log(500, 5).to_parquet(log / ".part-0.parquet.crc.parquet")  # hidden
    (log / "README.txt").write_text("the docs say only .parquet files are read")
    (log / "_SUCCESS").write_text("")
    outside = tmp_path / "elsewhere.parquet"
    other = _log(40, 6)
    other.to_parquet(outside)
    os.symlink(outside, log / "linked.parquet")  # a link to a file is that file
    got = aggregate_parquet(log, COLUMNS)
    pd.testing.assert_frame_equal(got, aggregate_frame(pd.concat([frame, other], ignore_index=True), COLUMNS))
    os.symlink(log / "part-0.parquet", log / "again.parquet")
    with pytest.raises(AggregationError, match=r"the same file as .*\(a link or a hard link\)") as error:
        aggregate_parquet(log, COLUMNS)
    assert "again.parquet" in str(error.value) and "part-0.parquet" in str(error.value)


def test_the_walk_of_a_folder_is_bounded_by_its_stated_maxima(tmp_path, monkeypatch):
    from disaggregated_eval.audit import parquet_files

    log = tmp_path / "log"
    log.mkdir()
    for k in range(3):
        _log(10, k).to_parquet(log / f"part-{k}.parquet")
    for k in range(150):
        (log / f"note-{k:03d}.txt").write_text("not Parquet")
    monkeypatch.setattr(parquet_files, "MAX_PARQUET_FILES", 2, raising=False)
    with pytest.raises(AggregationError, match=r"more than 2 Parquet files"):
        aggregate_parquet(log, COLUMNS)
    monkeypatch.setattr(parquet_files, "MAX_PARQUET_FILES", 10)
    monkeypatch.setattr(parquet_files, "MAX_WALKED_ENTRIES", 100, raising=False)
    with pytest.raises(AggregationError, match=r"more than 100 files and folders below it"):
        aggregate_parquet(log, COLUMNS)
    monkeypatch.setattr(parquet_files, "MAX_WALKED_ENTRIES", 1000)
    found = parquet_files.find_parquet(log)  # ignored files counted, the first 100 named
    assert found.n_ignored == 150 and len(found.ignored) == 100 and found.ignored[0].name == "note-000.txt"


# ----------------------------------------------------------------------------------------------
# Item 3: every read is bounded
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["device", "fifo"])
def test_margins_config_and_data_that_are_not_regular_files_are_refused_before_reading(tmp_path, kind):
    if kind == "device":
        special = tmp_path / "zero.csv"
        os.symlink("/dev/zero", special)
        expected = "is a character device, not a regular file"
    else:
        special = tmp_path / "pipe.csv"
        os.mkfifo(special)
        expected = "is a FIFO (named pipe), not a regular file"
    base = ["audit", str(COMPAS), "--label", "two_year_recid", "--score", "compas_score", "--group", "race",
            "--out", str(tmp_path / "out")]  # fmt: skip
    for argv in (
        [*base, "--population-margins", str(special)],
        [*base, "--config", str(special)],
        ["audit", str(special), "--label", "y", "--score", "p", "--group", "g", "--out", str(tmp_path / "out")],
    ):
        run = _bounded("", *argv)
        assert run.returncode == 2, run.stderr[-2000:]
        assert expected in run.stderr and str(special) in run.stderr
    assert not (tmp_path / "out").exists()


def test_the_workflows_parse_time_reads_are_bounded(tmp_path):
    """What the Snakefile reads when it is parsed (a dry run included): configuration files, a run's
    ``config`` file, its margins file, its data file's header."""
    fifo, data = tmp_path / "pipe.yaml", tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    os.mkfifo(data)
    code = f"""
        import importlib.util, sys
        if importlib.util.find_spec("disaggregated_eval_workflow") is None:  # pytest's pythonpath, not inherited
            sys.path.insert(0, {str(REPO / "workflow" / "lib")!r})
        from disaggregated_eval.audit.errors import UsageError
        from disaggregated_eval_workflow.audit_runs import audit_runs
        from disaggregated_eval_workflow.config import ConfigError, check_config_file
        run = dict(file={str(COMPAS)!r}, label="two_year_recid", scores=["compas_score"], groups=["race"])
        for spec in (dict(run, population_margins="/dev/zero"), dict(run, population_margins={str(fifo)!r}),
                     dict(config={str(fifo)!r}), dict(run, file={str(data)!r})):
            try:
                audit_runs(dict(runs=dict(z=spec)))
            except UsageError as exc:
                print("refused:", exc)
        for path in ("/dev/zero", {str(fifo)!r}):
            try:
                check_config_file(path)
            except ConfigError as exc:
                print("refused:", exc)
    """
    run = _bounded(code)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert len(lines) == 6 and all(line.startswith("refused:") for line in lines), run.stdout
    assert "population_margins '/dev/zero': is a character device" in lines[0]
    assert "audit.runs.z.config" in lines[2] and "FIFO" in lines[2]
    assert "FIFO" in lines[3] and "character device" in lines[4] and "FIFO" in lines[5]


def test_files_over_their_stated_size_or_line_length_are_refused_before_reading(tmp_path, monkeypatch):
    from disaggregated_eval.audit import loading, options

    margins = tmp_path / "margins.csv"
    margins.write_text("race,share\n" + "".join(f"L{i},0.0001\n" for i in range(10_000)))
    monkeypatch.setattr(options, "MAX_MARGINS_BYTES", 1000, raising=False)
    with pytest.raises(AuditInputError, match=r"margins\.csv': is [\d,]+ bytes, more than the limit of 1,000 bytes"):
        audit(pd.read_csv(COMPAS).head(300), label="two_year_recid", scores=["compas_score"], groups=["race"],
              population_margins=str(margins), **FAST)  # fmt: skip
    monkeypatch.setattr(loading, "MAX_LINE_CHARS", 1000, raising=False)
    long = tmp_path / "long.csv"
    long.write_text("y,p,g\n" + "1,0.5," + "x" * 5000 + "\n")
    with pytest.raises(loading.InputFileError, match="line 2 is longer than 1,000 characters"):
        loading.load_table(long)


def test_a_compressed_file_that_expands_beyond_the_memory_limit_is_refused_as_it_is_read(tmp_path):
    import gzip

    from disaggregated_eval.audit.loading import InputFileError, load_input

    bomb = tmp_path / "log.csv.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as handle:  # 9 KB that expand to 1.6 MB
        handle.write(b"y,p,g\n" + b"0,0.5,a\n1,0.5,b\n" * 100_000)
    with pytest.raises(InputFileError, match=r"the columns read hold more than 250,000 characters by line"):
        load_input(bomb, ["y", "p", "g"], memory_limit_mb=1)
    assert len(load_input(bomb, ["y", "p", "g"], memory_limit_mb=100)[0]) == 200_000


def test_a_compressed_margins_file_that_expands_beyond_its_limit_is_refused_as_it_is_read(tmp_path, monkeypatch):
    """The margins file's size limit holds for what is read, not only for its size on disk (hostile trial,
    round 3: a 4 MB ``.csv.gz`` of 3 GB ran past 100 s and 850 MB, growing; so did a file appended to
    while it was read)."""
    import gzip

    from disaggregated_eval.audit import options

    bomb = tmp_path / "margins.csv.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as handle:  # 3 KB that expand to 1.6 MB
        handle.write(b"race,share\nAfrican-American,0.5\nCaucasian,0.5\n" + b"Other,0.0001\n" * 120_000)
    assert bomb.stat().st_size < 5000
    monkeypatch.setattr(options, "MAX_MARGINS_BYTES", 5000, raising=False)
    with pytest.raises(AuditInputError, match=r"margins\.csv\.gz': holds more than 5,000 characters \(by line 385\)"):
        audit(pd.read_csv(COMPAS).head(300), label="two_year_recid", scores=["compas_score"], groups=["race"],
              population_margins=str(bomb), **FAST)  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Item 4: linear checks, stated maxima
# ----------------------------------------------------------------------------------------------
def test_checks_of_user_sized_lists_are_linear(tmp_path):
    """300,000 margins rows, metrics, features and levels, and 40 group columns: each checked in about a
    second (the quadratic checks took about 30 minutes for the margins, hours for the rest)."""
    margins = tmp_path / "margins.csv"
    n = 300_000
    margins.write_text("race,share\n" + "".join(f"L{i},{1 / n!r}\n" for i in range(n)))
    code = f"""
        import numpy as np, pandas as pd
        from disaggregated_eval.audit import audit
        from disaggregated_eval.audit.errors import AuditInputError
        from disaggregated_eval.audit.loading import required_columns
        from disaggregated_eval.audit.options import read_margins
        print("margins rows", len(read_margins({str(margins)!r}, ["race"])))
        print("columns", len(required_columns(label="y", scores=["p"], features=[f"f{{i}}" for i in range({n})])))
        frame = pd.DataFrame({{"y": np.arange({n}) % 2, "p": (np.arange({n}) % 3) / 3,
                               "g": [f"L{{i}}" for i in range({n})]}})
        for groups, options in ((["g"], dict(metrics=["accuracy"] * {n})), (["g"], {{}})):
            try:
                audit(frame, label="y", scores=["p"], groups=groups, n_resamples=200, **options)
            except AuditInputError as exc:
                print("refused:", str(exc)[:300])
        wide = pd.DataFrame({{"y": np.arange(200) % 2, "p": np.linspace(0, 1, 200)}})
        for i in range(40):
            wide[f"a{{i}}"] = np.where(np.arange(200) % (i + 2) == 0, "x", "z")
        try:
            audit(wide, label="y", scores=["p"], groups=[f"a{{i}}" for i in range(40)], n_resamples=200)
        except AuditInputError as exc:
            print("refused:", str(exc)[:300])
    """
    run = _bounded(code)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert lines[:2] == [f"margins rows {n}", f"columns {n + 2}"]
    assert "metrics must be distinct" in lines[2]
    assert f"gives {n + 1:,} slices" in lines[3] and "'g' has 300,000 levels" in lines[3]
    assert "intersections=40 of 40 attributes" in lines[4] and "--intersections 2" in lines[4]


def test_the_workflow_configurations_lists_are_checked_for_repeats_in_linear_time():
    """jsonschema checks ``uniqueItems`` pair by pair (a list of 20,000 items of mixed types: about 10
    minutes); the configuration check does it in one pass, with the same message."""
    code = f"""
        import importlib.util, sys
        if importlib.util.find_spec("disaggregated_eval_workflow") is None:
            sys.path.insert(0, {str(REPO / "workflow" / "lib")!r})
        from disaggregated_eval_workflow.config import ConfigError, validate_config
        for settings in ([k if k % 2 else f"s{{k}}" for k in range(20_000)], ["covariate_shift", "covariate_shift"]):
            try:
                validate_config(dict(simulation=dict(settings=settings)))
            except ConfigError as exc:
                print(str(exc).splitlines()[1][:200])
    """
    run = _bounded(code)
    assert run.returncode == 0, run.stderr[-2000:]
    first, second = run.stdout.splitlines()
    assert "simulation.settings contains unknown name(s) 's0', 1, 's10', 's100', 's1000'" in first
    assert "simulation.settings lists 'covariate_shift' more than once" in second


def test_option_lists_with_a_cost_per_value_have_stated_maxima(capsys):
    from disaggregated_eval.audit.options import resolve_options

    base = dict(label="y", scores=["p"], groups=["g"])
    with pytest.raises(AuditInputError, match="selection_sensitivity gives 21 values, more than the limit of 20"):
        resolve_options(None, dict(base, selection_sensitivity=[1 + k / 10 for k in range(21)]))
    with pytest.raises(AuditInputError, match="max_leaf_nodes gives 21 values, more than the limit of 20"):
        resolve_options(None, dict(base, max_leaf_nodes=list(range(2, 23))))
    assert resolve_options(
        None, dict(base, selection_sensitivity=[1 + k / 10 for k in range(20)])
    ).selection_sensitivity
    assert main(["audit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert text.count("at most 20 values") == 2


# ----------------------------------------------------------------------------------------------
# Item 6: one schema rule for a folder
# ----------------------------------------------------------------------------------------------
def _folder(root: Path, parts: dict[str, pd.DataFrame]) -> Path:
    for sub, frame in parts.items():
        (root / sub).mkdir(parents=True, exist_ok=True)
        frame.to_parquet(root / sub / "part-0.parquet")
    return root


def test_every_file_of_a_folder_must_hold_every_audited_column_and_is_named(tmp_path):
    full, lacking = _log(50, 1), _log(50, 2).drop(columns="g")
    second = _folder(tmp_path / "second", {"d=1": full, "d=2": lacking})
    first = _folder(tmp_path / "first", {"d=1": lacking, "d=2": full})
    label = _folder(tmp_path / "label", {"d=1": full, "d=2": _log(50, 3).drop(columns="y")})
    for folder, bad, good in ((second, "d=2", "d=1"), (first, "d=1", "d=2"), (label, "d=2", "d=1")):
        column = "y" if folder == label else "g"
        with pytest.raises(AggregationError) as error:
            aggregate_parquet(folder, COLUMNS)
        message = str(error.value)
        assert message.startswith(f"{folder / bad / 'part-0.parquet'}: has no column {column!r}"), message
        assert f"which {folder / good / 'part-0.parquet'} has" in message
    text = _log(50, 4).astype({"g": "category"})
    numbers = _log(50, 5).assign(g=lambda f: (f["g"] == "a").astype(int))
    kinds = _folder(tmp_path / "kinds", {"d=1": text, "d=2": numbers})
    with pytest.raises(AggregationError, match=r"d=2/part-0\.parquet: the column 'g' holds numbers, but text in"):
        aggregate_parquet(kinds, COLUMNS)
    both = _folder(tmp_path / "both", {"g=a": _log(50, 6)})
    with pytest.raises(AggregationError, match=r"the column 'g' is both in the file and a partition folder"):
        aggregate_parquet(both, COLUMNS)


def test_partition_values_are_read_as_a_csv_field_is(tmp_path, capsys):
    parts = {"k=a=b": _log(30, 1), "k=c%3Dd": _log(40, 2), "k=": _log(50, 3), "k=__HIVE_DEFAULT_PARTITION__": _log(5, 4),
             "k=2026-01-01": _log(60, 5), "k=2026-1-1": _log(70, 6)}  # fmt: skip
    folder = _folder(tmp_path / "log", parts)
    (folder / "README.txt").write_text("only .parquet files are read")
    got = aggregate_parquet(folder, ["k"])
    assert got["k"].tolist()[:-1] == ["2026-01-01", "2026-1-1", "a=b", "c=d"]
    assert pd.isna(got["k"].iloc[-1])  # an empty value is missing, as an empty CSV field
    assert got["count"].tolist() == [60, 70, 30, 40, 55]
    numbers = _folder(tmp_path / "hours", {"hour=9": _log(10, 7), "hour=10": _log(20, 8)})
    hours = aggregate_parquet(numbers, ["hour"])
    assert hours["hour"].tolist() == [9, 10] and hours["count"].tolist() == [10, 20]  # numbers, as in a CSV
    common = ["--label", "y", "--score", "pred", "--group", "k", "--n-resamples", "200", "--n-permutations", "0"]
    assert main(["audit", str(folder), "--out", str(tmp_path / "out"), *common]) == 0
    err = capsys.readouterr().err
    assert "6 Parquet files (1 other file(s) or folder(s) ignored: README.txt), 255 rows" in err


# ----------------------------------------------------------------------------------------------
# Item 7: one frequency-weight rule for every path
# ----------------------------------------------------------------------------------------------
def test_frequency_weights_follow_one_rule_on_the_csv_parquet_frame_and_dask_paths(tmp_path):
    import dask.dataframe as dd

    frame = _log(60, 7).assign(w=lambda f: f["w"].astype(str) + ".0")  # text that reads as whole numbers
    csv, parquet = tmp_path / "log.csv", tmp_path / "log.parquet"
    frame.to_csv(csv, index=False)
    frame.to_parquet(parquet)
    expected = aggregate_frame(frame, ["g"], frequency_weight="w")
    pd.testing.assert_frame_equal(aggregate_parquet(parquet, ["g"], frequency_weight="w"), expected)
    pd.testing.assert_frame_equal(aggregate_dask(dd.from_pandas(frame, npartitions=2), ["g"], frequency_weight="w"),
                                  expected, check_dtype=False)  # fmt: skip
    common = ["--label", "y", "--score", "pred", "--group", "g", "--frequency-weight", "w", "--n-resamples", "200",
              "--n-permutations", "0", "--quiet"]  # fmt: skip
    assert main(["audit", str(csv), "--out", str(tmp_path / "csv"), *common]) == 0
    assert main(["audit", str(parquet), "--aggregate", "yes", "--out", str(tmp_path / "pq"), *common]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "csv" / "slices.parquet"),
                                  pd.read_parquet(tmp_path / "pq" / "slices.parquet"))  # fmt: skip
    for bad, shown in (
        ("inf", "{'inf'}"),
        ("x", "{'x'}"),
        ("-1", "{'-1'}"),
        ("2.5", "{'2.5'}"),
        ("1_000", "{'1_000'}"),
    ):
        broken = frame.copy()
        broken.loc[7, "w"] = bad
        broken.to_parquet(parquet)
        rule = (
            r"frequency_weight column 'w' must hold whole numbers >= 0 \(how many identical rows each row stands for\)"
        )
        with pytest.raises(AggregationError, match=rule) as error:
            aggregate_parquet(parquet, ["g"], frequency_weight="w")
        assert f"got values {shown} in 1 row (first at row 8 of {parquet})" in str(error.value)
        with pytest.raises(AuditInputError, match=rule):  # the frame's path: the same rule and message
            audit(broken, label="y", scores=["pred"], groups=["g"], frequency_weight="w", **FAST)
    numeric = _log(60, 8).astype({"w": float})
    numeric.loc[3, "w"] = np.inf
    numeric.to_parquet(parquet)
    with pytest.raises(AggregationError, match=r"got values \{inf\} in 1 row \(first at row 4 of"):
        aggregate_parquet(parquet, ["g"], frequency_weight="w")


# ----------------------------------------------------------------------------------------------
# Item 8: margins read as the data are
# ----------------------------------------------------------------------------------------------
def _compas_audit(margins: Path, **options):
    compas = pd.read_csv(COMPAS)
    return audit(compas, label="two_year_recid", scores=["compas_score"], groups=["race"],
                 population_margins=str(margins), **FAST, **options)  # fmt: skip


def test_margins_levels_shares_and_header_are_checked_as_the_data_are(tmp_path):
    shares = {"African-American": 0.40, "Asian": 0.01, "Caucasian": 0.45, "Hispanic": 0.09, "Native American": 0.01,
              "Other": 0.04}  # fmt: skip
    plain, spaced, tiny, header = (tmp_path / f"{n}.csv" for n in ("plain", "spaced", "tiny", "header"))
    plain.write_text("race,share\n" + "".join(f"{k},{v}\n" for k, v in shares.items()))
    spaced.write_text("race,share\n" + "".join(f" {k} ,{v}\n" for k, v in shares.items()))
    tiny.write_text(plain.read_text().replace("Asian,0.01", "Asian,1e-300").replace("Other,0.04", "Other,0.05"))
    header.write_text("race,share,share\n" + "".join(f"{k},{v},{v}\n" for k, v in shares.items()))
    pd.testing.assert_frame_equal(_compas_audit(spaced).selection, _compas_audit(plain).selection)
    with pytest.raises(AuditInputError) as error:
        _compas_audit(spaced, strip_levels=False)
    assert "the file gives 'race= African-American '" in str(error.value)
    with pytest.raises(AuditInputError, match=r"the share of race=Asian is 1e-300; every share must be at least 1e-12"):
        _compas_audit(tiny)
    with pytest.raises(AuditInputError, match=r"duplicated column names in the header: 'share' \(columns 2, 3\)"):
        _compas_audit(header)
    twice = tmp_path / "twice.csv"
    twice.write_text(plain.read_text() + " Asian,0.01\n")
    with pytest.raises(
        AuditInputError, match=r"gives race=Asian more than once \(rows 2, 7: race=Asian and 'race= Asian'\)"
    ):
        _compas_audit(twice)


# ----------------------------------------------------------------------------------------------
# Item 9: the Dask path's arguments and the memory limit
# ----------------------------------------------------------------------------------------------
def test_dask_and_frame_counts_refuse_a_bare_string_and_split_out_0_and_memory_limit_has_a_minimum():
    import dask.dataframe as dd

    frame = _log(40, 9)
    lazy = dd.from_pandas(frame, npartitions=2)
    for call in (lambda: aggregate_dask(lazy, "g"), lambda: aggregate_frame(frame, "g")):
        with pytest.raises(TypeError, match=r"not a single string .* got 'g': give \['g'\]"):
            call()
    with pytest.raises(ValueError, match="split_out must be an integer >= 1; got 0"):
        aggregate_dask(lazy, ["g"], split_out=0)
    with pytest.raises(
        AuditInputError, match=r"memory_limit_mb must be at least 1 MB \(no audit fits in less\); got 1e-300"
    ):
        audit(frame, label="y", scores=["pred"], groups=["g"], memory_limit_mb=1e-300, **FAST)


@pytest.mark.parametrize("limit", ["1e308", "1e30"])
def test_a_memory_limit_beyond_2_to_the_63_bytes_is_refused_before_any_work(tmp_path, capsys, limit):
    # 1e308 MB is infinitely many bytes: the read's text bound became NaN and the audit failed with a traceback
    path = tmp_path / "log.csv"
    _log(40, 9).to_csv(path, index=False)
    args = ["audit", str(path), "--label", "y", "--score", "pred", "--group", "g", "--out", str(tmp_path / "out"),
            "--n-resamples", "200", "--n-permutations", "0", "--metrics", "accuracy", "--memory-limit-mb", limit]  # fmt: skip
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"memory_limit_mb must be at most 8,796,093,022,208 MB (2^63 bytes); got {float(limit):g}" in err, err
    assert not (tmp_path / "out").exists()


def test_comparison_percentiles_hold_no_copy_of_every_replicate(monkeypatch):
    """The comparisons' percentile part copied the replicates of every quantity's metrics at once
    (``replicates[:, :, columns]``): at 10^6 resamples 1.4 GB beside their 2.4 GB, beyond the peak the memory
    limit is checked against. It now gathers each chunk's quantities only: its peak follows the chunk."""
    import tracemalloc

    from disaggregated_eval.audit import comparisons
    from disaggregated_eval.derived import Replicated

    monkeypatch.setattr(comparisons, "_CHUNK_VALUES", 2**16)
    rng = np.random.default_rng(0)
    n_res, n_out, n_q = 20_000, 60, 10
    base = Replicated(point=rng.random((n_out, n_q)), replicates=rng.random((n_res, n_out, n_q)))
    plus, minus = np.arange(1, n_out), np.zeros(n_out - 1, dtype=np.int64)
    rows, columns = np.arange(n_out - 1), np.arange(n_q - 1)
    out = [np.full((n_out - 1, n_q), np.nan) for _ in range(3)]
    undefined, caveat = np.zeros((n_out - 1, n_q), dtype=np.int64), np.empty((n_out - 1, n_q), dtype=object)
    tracemalloc.start()
    comparisons._percentile_part(base, plus, minus, rows, columns, 0.95, *out, undefined, caveat)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 0.2 * base.replicates.nbytes, (peak, base.replicates.nbytes)
    # the values are the differences' own: slice 1 minus overall, metric 0
    difference = base.replicates[:, 1, 0] - base.replicates[:, 0, 0]
    assert out[0][0, 0] == base.point[1, 0] - base.point[0, 0]
    assert out[1][0, 0] == pytest.approx(np.percentile(difference, 2.5), abs=0.02)


# ----------------------------------------------------------------------------------------------
# Signals during a read: DuckDB's own error in place of Ctrl-C or SIGTERM
# ----------------------------------------------------------------------------------------------
def test_an_interrupted_duckdb_query_unwinds_as_the_signal_does(tmp_path, monkeypatch):
    from disaggregated_eval.audit import aggregate, signals

    _log(50, 10).to_parquet(tmp_path / "log.parquet")

    def interrupted(connection, query):
        raise RuntimeError("Query interrupted")  # what DuckDB raises when Ctrl-C or SIGTERM arrives in a query

    monkeypatch.setattr(aggregate, "_to_pandas", interrupted)
    monkeypatch.setattr(signals, "_received", None)  # no signal yet: Ctrl-C's exception
    with pytest.raises(KeyboardInterrupt):
        aggregate_parquet(tmp_path / "log.parquet", COLUMNS)
    monkeypatch.setattr(signals, "_received", signal.SIGTERM)
    with pytest.raises(signals.Terminated):
        aggregate_parquet(tmp_path / "log.parquet", COLUMNS)


def test_a_bootstrap_too_large_names_the_resamples_that_fit(monkeypatch):
    """The refusal of a bootstrap whose replicates exceed the bound names the most resamples that fit (at
    1ee08dc it said only 'give fewer n_resamples, ...'), or, when even the fewest sensible resamples do not
    fit, the other options."""
    from disaggregated_eval.audit import core

    rng = np.random.default_rng(3)
    data = pd.DataFrame({"g": rng.integers(0, 3, 300).astype(str), "y": rng.integers(0, 2, 300)})
    data["p"] = rng.uniform(size=300)
    metrics = ["predicted_positive_rate", "false_positive_rate", "sensitivity"]  # the fairness summary's own
    kwargs = dict(label="y", scores=["p"], groups=["g"], metrics=metrics, n_permutations=0)
    outputs = 1 + 2 * 3  # overall, and each of the 3 slices with its rest
    monkeypatch.setattr(core, "MAX_REPLICATE_BYTES", 8 * outputs * 3 * 1_000 + 7)
    with pytest.raises(AuditInputError, match=r"give n_resamples 1,000 or fewer \(--n-resamples 1000\)"):
        audit(data, n_resamples=1_001, **kwargs)
    assert len(audit(data, n_resamples=1_000, **kwargs).slices) == 4 * 3  # exactly the advised number runs
    monkeypatch.setattr(core, "MAX_REPLICATE_BYTES", 8 * outputs * 3 * 100)
    with pytest.raises(AuditInputError, match=r"even 200 resamples \(the fewest for 0.95 intervals\) would not fit"):
        audit(data, n_resamples=1_000, **kwargs)
