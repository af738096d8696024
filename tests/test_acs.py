"""Tests of ACS PUMS acquisition, extraction, encoding and the cohort table (paper Supplementary A.4).

Everything here is offline: downloads are exercised against a local HTTP server on 127.0.0.1 (the
census URL is redirected there by monkeypatching ``requests.get``), and the end-to-end checks use a
synthetic PUMS-format file. The only skip is the check against the real 2018 5-Year California file,
which needs that file on disk.
"""

from __future__ import annotations

import bz2
import gzip
import http.server
import io
import lzma
import os
import socket
import subprocess
import sys
import threading
import zipfile
from pathlib import Path

import folktables
import numpy as np
import pandas as pd
import pytest
import requests
from sklearn.model_selection import train_test_split

from disaggregated_eval import acs, seeds, vocabulary, weight_models
from disaggregated_eval.synthetic_pums import REQUIRED_COLUMNS, write_synthetic_person_file

REAL_DIR = Path("/work/shared/data/acs_real/acs-pums-explorer_2024_1-Year")
REPO = Path(__file__).resolve().parents[1]
CENSUS = "https://www2.census.gov"


# --------------------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="module")
def synthetic_root(tmp_path_factory) -> Path:
    """A 20,000-row synthetic CA 2018 5-Year file (with some filler columns) in folktables' layout."""
    root = tmp_path_factory.mktemp("acs_synthetic")
    path = acs.person_file_path(root, year=2018, horizon="5-Year", state="CA")
    write_synthetic_person_file(path, n_rows=20_000, seed=7, n_columns=60, chunk_rows=6_000)
    return root


@pytest.fixture(scope="module")
def synthetic_file(synthetic_root) -> Path:
    return acs.person_file_path(synthetic_root, year=2018, horizon="5-Year", state="CA")


@pytest.fixture(scope="module")
def extracted(synthetic_file) -> dict[str, pd.DataFrame]:
    return {d: acs.extract_task(synthetic_file, d, year=2018) for d in acs.TASKS}


@pytest.fixture(scope="module")
def folktables_raw(synthetic_root) -> pd.DataFrame:
    source = folktables.ACSDataSource(
        survey_year="2018", horizon="5-Year", survey="person", root_dir=str(synthetic_root)
    )
    return source.get_data(states=["CA"], download=False)


def _write_variant(src: Path, dst: Path, edit) -> Path:
    df = pd.read_csv(src, dtype=str, keep_default_na=False)
    df = edit(df) if edit is not None else df
    dst.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(dst, index=False)
    return dst


# --------------------------------------------------------------------------------------------------
# Group mapping


def test_group_mapping_every_code():
    rac1p = np.repeat(np.arange(1, 10), 24)
    hisp = np.tile(np.arange(1, 25), 9)
    got = acs.race_ethnicity_group(rac1p, hisp)
    label = {
        1: "White",
        2: "Black",
        3: "Other",
        4: "Other",
        5: "Other",
        6: "Asian",
        7: "Other",
        8: "Other",
        9: "Multiracial",
    }
    expected = [acs.GROUP_LABELS.index("Hispanic" if h != 1 else label[r]) for r, h in zip(rac1p, hisp)]
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.int64
    assert tuple(sorted(acs.GROUP_LABELS)) == acs.GROUP_LABELS  # alphabetical


@pytest.mark.parametrize(
    ("rac1p", "hisp", "message"),
    [
        ([1, 10], [1, 1], r"RAC1P code\(s\) \[10\]"),
        ([1, 2], [1, 25], r"HISP code\(s\) \[25\]"),
        ([0, 1], [1, 1], r"RAC1P code\(s\) \[0\]"),
        ([1, np.nan], [1, 1], r"RAC1P code\(s\) \['missing'\]"),
    ],
)
def test_group_mapping_unknown_code(rac1p, hisp, message):
    with pytest.raises(ValueError, match=message):
        acs.race_ethnicity_group(rac1p, hisp)


# --------------------------------------------------------------------------------------------------
# Real 2024 1-Year extracts (DC, WY)


def _recount_group(frame: pd.DataFrame) -> pd.Series:
    """Group labels (paper Supplementary A.4) straight from RAC1P/HISP with pandas (independent of the library)."""
    race = frame["RAC1P"].map({1: "White", 2: "Black", 6: "Asian", 9: "Multiracial"}).fillna("Other")
    return race.where(frame["HISP"] == 1, "Hispanic")


def _real_with_fill(name: str, tmp_path: Path) -> tuple[Path, pd.DataFrame]:
    """The real extract plus the columns it lacks, in folktables' layout under ``tmp_path``."""
    real = pd.read_csv(REAL_DIR / name, dtype={"SERIALNO": str, "PUMA": str})
    df = real.copy()
    rng = np.random.default_rng(0)
    n = len(df)
    # synthetic: not in the real extract (POBP, RELP for ACSIncome; ESP, MIG, ANC for ACSPublicCoverage)
    df["POBP"] = rng.choice([6, 11, 56, 210, 303], size=n)
    df["RELP"] = rng.integers(0, 18, size=n)
    df["ESP"] = np.where(df["AGEP"] < 16, rng.integers(1, 9, size=n), np.nan)
    df["MIG"] = rng.integers(1, 4, size=n)
    df["ANC"] = rng.choice([1, 2, 3, 4, 8], size=n)
    # The real column STATE is the 2024 name of ST (real values, renamed for folktables).
    df = df.rename(columns={"STATE": "ST"})
    path = tmp_path / "2024" / "1-Year" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False, float_format="%.0f")
    return path, real


@pytest.mark.parametrize("name", ["p_11.csv", "p_56.csv"])
@pytest.mark.parametrize(
    ("dataset", "task_filter"),
    [("acs_income", folktables.adult_filter), ("acs_public_coverage", folktables.public_coverage_filter)],
)
def test_real_extract_groups_and_filters(name, dataset, task_filter, tmp_path):
    path, real = _real_with_fill(name, tmp_path)
    out = acs.extract_task(path, dataset, year=2024)

    # Filter counts: folktables' filter applied directly to the real rows.
    kept = task_filter(real)
    assert len(out) == len(kept) > 100

    # Group counts: a direct pandas recount from RAC1P/HISP of the kept rows.
    expected = _recount_group(kept).value_counts().reindex(acs.GROUP_LABELS, fill_value=0)
    got = pd.Series(np.bincount(out["a"], minlength=6), index=list(acs.GROUP_LABELS))
    pd.testing.assert_series_equal(got, expected, check_names=False, check_dtype=False)

    # Labels and the real (unfilled) features row by row.
    task = getattr(folktables, acs.TASKS[dataset])
    np.testing.assert_array_equal(out["y"], task.target_transform(kept[task.target]).astype(int))
    for feature in ("AGEP", "SCHL", "SEX", "MAR"):
        np.testing.assert_array_equal(out[feature].to_numpy(), kept[feature].to_numpy(dtype=float))
    assert "RAC1P" not in out.columns


@pytest.mark.parametrize("name", ["p_11.csv", "p_56.csv"])
def test_validate_unmodified_real_extract_names_missing_column(name, tmp_path):
    path = REAL_DIR / name
    with pytest.raises(ValueError) as info:
        acs.validate_person_file(path, year=2024)
    message = str(info.value)
    # ACSIncome's features in order: AGEP, COW, SCHL, MAR, OCCP, POBP, ... -> POBP is the first absent.
    assert "'POBP'" in message and str(path) in message and "2024" in message
    with pytest.raises(ValueError, match=r"'ESP' needed by ACSPublicCoverage .*survey year 2024"):
        acs.validate_person_file(path, year=2024, tasks=["acs_public_coverage"])

    # With only POBP added, RELP is next; the message explains the 2019 rename to RELSHIPP.
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df["POBP"] = "6"  # synthetic: not in the real extract
    with_pobp = tmp_path / name
    df.to_csv(with_pobp, index=False)
    with pytest.raises(ValueError, match=r"'RELP'.*survey year 2024.*RELSHIPP"):
        acs.extract_task(with_pobp, "acs_income", year=2024)


def test_validate_report(synthetic_file):
    report = acs.validate_person_file(synthetic_file, year=2018)
    assert report["path"] == str(synthetic_file)
    assert report["bytes"] == synthetic_file.stat().st_size
    assert report["rows"] == 20_000
    assert set(report["columns"]) == set(acs.required_columns("acs_income")) | set(
        acs.required_columns("acs_public_coverage")
    )
    assert set(report) == {"path", "bytes", "rows", "columns"}


def test_validate_empty_and_header_only(tmp_path, synthetic_file):
    header = synthetic_file.open().readline()
    only_header = tmp_path / "psam_p06.csv"
    only_header.write_text(header)
    with pytest.raises(ValueError, match="no data rows"):
        acs.validate_person_file(only_header, year=2018)
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    with pytest.raises(ValueError, match="empty"):
        acs.validate_person_file(empty, year=2018)
    with pytest.raises(FileNotFoundError):
        acs.validate_person_file(tmp_path / "absent.csv", year=2018)


# --------------------------------------------------------------------------------------------------
# Synthetic file end to end


def test_synthetic_file_shape(synthetic_file):
    header = synthetic_file.open().readline().strip().split(",")
    assert len(header) == 60 and set(REQUIRED_COLUMNS) <= set(header)
    raw = pd.read_csv(synthetic_file, usecols=["RAC1P", "HISP", "OCCP", "COW", "AGEP", "ESP", "PINCP"])
    assert set(raw["RAC1P"]) == set(range(1, 10))
    assert set(raw["HISP"]) == set(range(1, 25))
    assert raw["OCCP"].nunique() > 255
    assert raw["COW"].isna().equals(raw["OCCP"].isna())  # blank for people who never worked
    assert raw.loc[raw["AGEP"] >= 16, "ESP"].isna().all()  # ESP only for children
    assert raw.loc[raw["AGEP"] < 15, "PINCP"].isna().all()


def test_synthetic_file_is_seeded(tmp_path):
    a = write_synthetic_person_file(tmp_path / "a.csv", n_rows=500, seed=3, chunk_rows=200)
    b = write_synthetic_person_file(tmp_path / "b.csv", n_rows=500, seed=3, chunk_rows=200)
    c = write_synthetic_person_file(tmp_path / "c.csv", n_rows=500, seed=4, chunk_rows=200)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv", "c.csv"]  # no temp files


@pytest.mark.parametrize("dataset", list(acs.TASKS))
def test_extract_equals_folktables(dataset, extracted, folktables_raw):
    task = getattr(folktables, acs.TASKS[dataset])
    features, target, group = task.df_to_pandas(folktables_raw)
    ours = extracted[dataset]
    assert len(ours) == len(features) > 1000
    np.testing.assert_array_equal(ours["y"].to_numpy(), target.iloc[:, 0].astype(np.int64).to_numpy())
    kept = [f for f in task.features if f != "RAC1P"]
    assert list(ours.columns) == [*kept, "a", "y"]
    # folktables fills missing values with 0.0 (np.nan_to_num(x, -1): -1 is the copy argument).
    np.testing.assert_array_equal(ours[kept].fillna(0.0).to_numpy(), features[kept].to_numpy())
    assert ours[kept].isna().any().any() or dataset == "acs_income"
    # The group, recounted directly from RAC1P/HISP of the rows folktables keeps.
    kept_rows = folktables_raw.loc[task._preprocess(folktables_raw).index]
    np.testing.assert_array_equal(group.iloc[:, 0].to_numpy(), kept_rows["RAC1P"].to_numpy())
    expected = _recount_group(kept_rows).map(acs.GROUP_LABELS.index).to_numpy()
    np.testing.assert_array_equal(ours["a"].to_numpy(), expected)
    assert ours.dtypes[kept].eq(np.float64).all() and ours["a"].dtype == np.int64 and ours["y"].dtype == np.int64


@pytest.mark.parametrize(("column", "value"), [("RAC1P", "10"), ("HISP", "25")])
def test_extract_unknown_code(column, value, synthetic_file, tmp_path):
    def edit(df):
        df.loc[5, column] = value
        return df

    bad = _write_variant(synthetic_file, tmp_path / "psam_p06.csv", edit)
    with pytest.raises(ValueError, match=rf"unknown {column} code\(s\) \[{value}\]"):
        acs.extract_task(bad, "acs_income", year=2018)


def test_extract_missing_column(synthetic_file, tmp_path):
    bad = _write_variant(synthetic_file, tmp_path / "psam_p06.csv", lambda df: df.drop(columns="RELP"))
    with pytest.raises(
        ValueError, match=r"'RELP' needed by ACSIncome is missing from .*psam_p06.csv \(survey year 2018\)"
    ):
        acs.extract_task(bad, "acs_income", year=2018)
    # ACSPublicCoverage does not need RELP.
    assert len(acs.extract_task(bad, "acs_public_coverage", year=2018)) > 0


def test_extract_bad_value_and_dataset(synthetic_file, tmp_path):
    def edit(df):
        df.loc[3, "AGEP"] = "abc"
        return df

    bad = _write_variant(synthetic_file, tmp_path / "psam_p06.csv", edit)
    # Row 3 of the frame is line 5 of the file (line 1 is the header).
    with pytest.raises(ValueError, match=r"column 'AGEP' of .*psam_p06.csv, line 5 .*invalid value 'abc'"):
        acs.extract_task(bad, "acs_income", year=2018)
    with pytest.raises(ValueError, match="dataset must be one of"):
        acs.extract_task(synthetic_file, "acs_employment", year=2018)


# --------------------------------------------------------------------------------------------------
# Split and encoding


def test_encode_and_split_schema_and_types(extracted):
    train, test, schema = acs.encode_and_split(extracted["acs_income"], "acs_income", seed=11)
    assert schema == {
        "dataset": "acs_income",
        "study": "acs",
        "features": ["AGEP", "COW", "SCHL", "MAR", "OCCP", "POBP", "RELP", "WKHP", "SEX"],
        "categorical": ["COW", "SCHL", "MAR", "OCCP", "POBP", "RELP", "SEX"],
        "label": "y",
        "group": "a",
        "group_labels": list(acs.GROUP_LABELS),
    }
    for frame in (train, test):
        assert list(frame.columns) == [*schema["features"], "a", "y"]
        assert frame["a"].dtype == np.int64 and frame["y"].dtype == np.int64
        for c in schema["categorical"]:
            codes = frame[c].dropna()
            assert (codes >= 0).all() and (codes < 255).all() and (codes == codes.round()).all()
    _, _, schema_pc = acs.encode_and_split(extracted["acs_public_coverage"], "acs_public_coverage", seed=11)
    assert set(schema_pc["features"]) - set(schema_pc["categorical"]) == {"AGEP", "PINCP"}


def test_split_stratified_and_seeded(extracted):
    df = extracted["acs_public_coverage"]
    train, test, _ = acs.encode_and_split(df, "acs_public_coverage", seed=5)
    assert len(train) + len(test) == len(df)
    # Stratified: each group x label stratum is split 80/20 up to rounding (one row per stratum).
    for (a, y), n in df.groupby(["a", "y"]).size().items():
        n_test = int(((test["a"] == a) & (test["y"] == y)).sum())
        assert abs(n_test - 0.2 * n) <= 1, (a, y, n, n_test)
    # Seeded through seeds.sklearn_seed(seed, "acs_split", dataset).
    _, idx_test = train_test_split(
        np.arange(len(df)),
        test_size=0.2,
        stratify=df["a"] * 2 + df["y"],
        random_state=seeds.sklearn_seed(5, "acs_split", "acs_public_coverage"),
    )
    np.testing.assert_array_equal(test["AGEP"].to_numpy(), df["AGEP"].to_numpy()[idx_test])
    again, _, _ = acs.encode_and_split(df, "acs_public_coverage", seed=5)
    pd.testing.assert_frame_equal(train, again)
    other, _, _ = acs.encode_and_split(df, "acs_public_coverage", seed=6)
    assert not train["AGEP"].equals(other["AGEP"])


def test_many_levels_learned_on_train(extracted):
    df = extracted["acs_income"]
    raw_train, raw_test = _raw_split(df, "acs_income", seed=2)
    train, test, _ = acs.encode_and_split(df, "acs_income", seed=2)
    counts = raw_train["OCCP"].value_counts()
    assert len(counts) > 255
    # The 254 most frequent training levels keep their own codes 0..253 (ascending raw value).
    order = counts.reset_index().sort_values(["count", "OCCP"], ascending=[False, True])
    kept = np.sort(order["OCCP"].to_numpy()[:254])
    expected_train = np.where(np.isin(raw_train["OCCP"], kept), np.searchsorted(kept, raw_train["OCCP"]), 254)
    np.testing.assert_array_equal(train["OCCP"].to_numpy(), expected_train)
    expected_test = np.where(np.isin(raw_test["OCCP"], kept), np.searchsorted(kept, raw_test["OCCP"]), 254)
    np.testing.assert_array_equal(test["OCCP"].to_numpy(), expected_test)
    assert train["OCCP"].max() == 254


def _raw_split(df, dataset, seed):
    idx_train, idx_test = train_test_split(
        np.arange(len(df)),
        test_size=0.2,
        stratify=df["a"] * 2 + df["y"],
        random_state=seeds.sklearn_seed(seed, "acs_split", dataset),
    )
    return df.iloc[idx_train].reset_index(drop=True), df.iloc[idx_test].reset_index(drop=True)


def test_levels_small_example_unseen_test_level():
    """Hand-made frame: max_levels=4 keeps 3 levels; a test-only level goes to the merged level."""
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({f: rng.integers(1, 3, size=n).astype(float) for f in acs.NUMERIC_FEATURES["acs_income"]})
    # COW: level 1 x150, 2 x100, 3 x60, 4 x40, 5 x30, NaN x20 -> keep 1,2,3; merge 4,5.
    df["COW"] = np.repeat([1.0, 2.0, 3.0, 4.0, 5.0, np.nan], [150, 100, 60, 40, 30, 20])
    for f in ["SCHL", "MAR", "OCCP", "POBP", "RELP", "SEX"]:
        df[f] = rng.integers(1, 3, size=n).astype(float)
    df["a"] = np.arange(n) % 6
    df["y"] = (np.arange(n) // 6) % 2
    df = df[["AGEP", "COW", "SCHL", "MAR", "OCCP", "POBP", "RELP", "WKHP", "SEX", "a", "y"]]
    train, test, _ = acs.encode_and_split(df, "acs_income", seed=0, max_levels=4)
    raw_train, raw_test = _raw_split(df, "acs_income", seed=0)
    mapping = {1.0: 0.0, 2.0: 1.0, 3.0: 2.0, 4.0: 3.0, 5.0: 3.0}
    np.testing.assert_array_equal(train["COW"].to_numpy(), raw_train["COW"].map(mapping).to_numpy())
    np.testing.assert_array_equal(test["COW"].to_numpy(), raw_test["COW"].map(mapping).to_numpy())
    assert train["COW"].isna().sum() + test["COW"].isna().sum() == 20

    # A level seen only in test: merged level when the column is merged, NaN otherwise.
    # The split depends only on (a, y), so editing features keeps the same rows in test.
    _, idx_test = train_test_split(
        np.arange(n),
        test_size=0.2,
        stratify=df["a"] * 2 + df["y"],
        random_state=seeds.sklearn_seed(0, "acs_split", "acs_income"),
    )
    df2 = df.copy()
    df2.loc[idx_test[0], ["COW", "SEX"]] = [99.0, 7.0]
    _, test2, _ = acs.encode_and_split(df2, "acs_income", seed=0, max_levels=4)
    assert test2.loc[0, "COW"] == 3.0  # merged level of COW
    assert np.isnan(test2.loc[0, "SEX"])  # SEX is not merged: unseen level -> missing


def test_encode_and_split_errors(extracted):
    df = extracted["acs_income"]
    with pytest.raises(ValueError, match="lacks column"):
        acs.encode_and_split(df.drop(columns="OCCP"), "acs_income", seed=0)
    with pytest.raises(ValueError, match="y must be 0/1; got values \\[2\\]"):
        acs.encode_and_split(df.assign(y=df["y"] * 2), "acs_income", seed=0)
    with pytest.raises(ValueError, match="max_levels"):
        acs.encode_and_split(df, "acs_income", seed=0, max_levels=256)
    with pytest.raises(ValueError, match="single row"):
        acs.encode_and_split(df.iloc[:1], "acs_income", seed=0)


# --------------------------------------------------------------------------------------------------
# Cohort table


def test_cohort_table(extracted):
    table = acs.cohort_table(extracted)
    assert list(table["group"]) == list(acs.GROUP_LABELS)
    assert list(table.columns) == [
        "group",
        "acs_income_count",
        "acs_income_prevalence",
        "acs_public_coverage_count",
        "acs_public_coverage_prevalence",
    ]
    for dataset, df in extracted.items():
        assert table[f"{dataset}_count"].sum() == len(df)
        assert np.isclose((table[f"{dataset}_count"] * table[f"{dataset}_prevalence"]).sum(), df["y"].sum())
        np.testing.assert_allclose(table[f"{dataset}_prevalence"], df.groupby("a")["y"].mean().reindex(range(6)))
    md = acs.cohort_markdown(table)
    assert md.splitlines()[0] == (
        "| group | ACSIncome count | ACSIncome prevalence | ACSPublicCoverage count | ACSPublicCoverage prevalence |"
    )
    first = table.iloc[0]
    assert f"| Asian | {first['acs_income_count']:,} | {first['acs_income_prevalence']:.3f} |" in md


def test_cohort_markdown_format():
    frame = pd.DataFrame(
        {"a": np.repeat([0, 5], [151_163, 3]), "y": np.r_[np.ones(1000, int), np.zeros(150_163, int), 1, 1, 0]}
    )
    md = acs.cohort_markdown(acs.cohort_table({"acs_income": frame}))
    assert "| Asian | 151,163 | 0.007 |" in md and "| White | 3 | 0.667 |" in md and "| Black | 0 |  |" in md


# --------------------------------------------------------------------------------------------------
# Acquisition


def test_person_file_path_layout(tmp_path):
    assert acs.person_file_path(tmp_path) == tmp_path / "2018" / "5-Year" / "psam_p06.csv"
    assert (
        acs.person_file_path(tmp_path, year=2021, horizon="1-Year", state="WY")
        == tmp_path / "2021" / "1-Year" / "psam_p56.csv"
    )
    assert acs.person_file_url() == f"{CENSUS}/programs-surveys/acs/data/pums/2018/5-Year/csv_pca.zip"
    with pytest.raises(ValueError, match="horizon"):
        acs.person_file_path(tmp_path, horizon="3-Year")
    with pytest.raises(ValueError, match="'XX'"):
        acs.person_file_path(tmp_path, state="XX")


@pytest.fixture
def no_network(monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(requests, "get", fail)
    monkeypatch.setattr(requests.Session, "request", fail)
    monkeypatch.setattr(socket, "create_connection", fail)


def test_present_file_uses_no_network(synthetic_root, synthetic_file, no_network):
    assert acs.obtain_person_file(synthetic_root, year=2018, horizon="5-Year", state="CA") == synthetic_file
    assert (
        acs.obtain_person_file(synthetic_root, year=2018, horizon="5-Year", state="CA", download=False)
        == synthetic_file
    )


def test_missing_file_without_download(tmp_path, no_network):
    expected = tmp_path / "2018" / "5-Year" / "psam_p06.csv"
    with pytest.raises(FileNotFoundError) as info:
        acs.obtain_person_file(tmp_path, year=2018, horizon="5-Year", state="CA", download=False)
    assert str(expected) in str(info.value) and "csv_pca.zip" in str(info.value) and "download=True" in str(info.value)


class _Handler(http.server.BaseHTTPRequestHandler):
    payload: bytes | None = None  # zip bytes to serve; None -> 404

    def do_GET(self):  # http.server API name
        if self.payload is None:
            self.send_error(404, "Not Found")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.payload)))
        self.end_headers()
        self.wfile.write(self.payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def local_census(monkeypatch):
    """A 127.0.0.1 HTTP server; census URLs requested through requests.get are redirected to it."""
    handler = type("Handler", (_Handler,), {"payload": None})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    real_get = requests.get
    requested = []

    def redirected_get(url, *args, **kwargs):
        requested.append(url)
        return real_get(url.replace(CENSUS, f"http://127.0.0.1:{server.server_port}"), *args, timeout=10, **kwargs)

    monkeypatch.setattr(requests, "get", redirected_get)
    yield handler, requested
    server.shutdown()
    server.server_close()


def test_failed_download_404(tmp_path, local_census, capsys):
    _, requested = local_census
    target = tmp_path / "2018" / "5-Year" / "psam_p06.csv"
    with pytest.raises(acs.PumsDownloadError) as info:
        acs.obtain_person_file(tmp_path, year=2018, horizon="5-Year", state="CA")
    err = info.value
    url = f"{CENSUS}/programs-surveys/acs/data/pums/2018/5-Year/csv_pca.zip"
    assert requested == [url]  # folktables asked for the URL we report
    assert err.url == url and err.status == 404 and err.path == target
    assert url in str(err) and "HTTP status 404" in str(err) and str(target) in str(err)
    assert list(target.parent.iterdir()) == []  # no partial csv, zip or temp folder
    assert capsys.readouterr().out == ""  # folktables' prints are captured, not shown


def test_failed_download_network_error(tmp_path, monkeypatch):
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    real_get = requests.get
    monkeypatch.setattr(
        requests, "get", lambda url, *a, **k: real_get(url.replace(CENSUS, f"http://127.0.0.1:{port}"), timeout=5)
    )
    with pytest.raises(acs.PumsDownloadError) as info:
        acs.obtain_person_file(tmp_path, year=2018, horizon="1-Year", state="WY")
    assert info.value.status is None and "network error" in str(info.value)
    assert "csv_pwy.zip" in str(info.value) and str(tmp_path / "2018" / "1-Year" / "psam_p56.csv") in str(info.value)
    assert list((tmp_path / "2018" / "1-Year").iterdir()) == []


def test_successful_download_through_folktables(tmp_path, local_census, synthetic_file):
    handler, _ = local_census
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.write(synthetic_file, "psam_p06.csv")
        z.writestr("ACS2014-2018_PUMS_README.pdf", b"readme")
    handler.payload = buffer.getvalue()
    # A download folder of an earlier, killed attempt (its process no longer runs).
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / "2018" / "5-Year" / f".psam_p06.csv.{int(child.stdout)}-0123abcd.download"
    stale.mkdir(parents=True)
    (stale / "csv_pca.zip").write_bytes(b"half a zip")
    path = acs.obtain_person_file(tmp_path, year=2018, horizon="5-Year", state="CA")
    assert path == tmp_path / "2018" / "5-Year" / "psam_p06.csv"
    assert path.read_bytes() == synthetic_file.read_bytes()
    assert [p.name for p in path.parent.iterdir()] == ["psam_p06.csv"]  # zip, temp and stale folders removed


def test_download_zip_without_csv(tmp_path, local_census):
    handler, _ = local_census
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        z.writestr("other.csv", b"a,b\n1,2\n")
    handler.payload = buffer.getvalue()
    with pytest.raises(acs.PumsDownloadError, match="HTTP status 200, but the response was not a usable zip"):
        acs.obtain_person_file(tmp_path, year=2018, horizon="5-Year", state="CA")
    assert list((tmp_path / "2018" / "5-Year").iterdir()) == []


# --------------------------------------------------------------------------------------------------
# The real 2018 5-Year California file (only when present)

PAPER_COHORT = {  # paper Table B4
    "Asian": (151_163, 0.449, 104_642, 0.286),
    "Black": (40_764, 0.327, 41_090, 0.507),
    "Hispanic": (313_007, 0.200, 317_534, 0.393),
    "Multiracial": (23_781, 0.374, 20_734, 0.323),
    "Other": (8_910, 0.304, 8_590, 0.397),
    "White": (412_572, 0.504, 236_842, 0.299),
}


def test_real_california_2018_cohort_matches_paper():
    root = Path(os.environ.get("DISAGG_ACS_ROOT", REPO / "data" / "acs"))
    path = acs.person_file_path(root, year=2018, horizon="5-Year", state="CA")
    if not path.is_file():
        pytest.skip(
            f"the real ACS PUMS 2018 5-Year California person file is not at {path} (set DISAGG_ACS_ROOT "
            "or place it under data/acs); it cannot be downloaded on this offline machine"
        )
    acs.validate_person_file(path, year=2018)
    table = acs.cohort_table({d: acs.extract_task(path, d, year=2018) for d in acs.TASKS}).set_index("group")
    for group, (n_inc, p_inc, n_pc, p_pc) in PAPER_COHORT.items():
        row = table.loc[group]
        assert row["acs_income_count"] == n_inc and round(row["acs_income_prevalence"], 3) == p_inc
        assert row["acs_public_coverage_count"] == n_pc and round(row["acs_public_coverage_prevalence"], 3) == p_pc


# --------------------------------------------------------------------------------------------------
# One home for names, and folktables' filters written out


def test_vocabulary_matches_folktables():
    assert acs.TASKS is vocabulary.TASKS and acs.GROUP_LABELS is vocabulary.ACS_GROUP_LABELS
    assert list(vocabulary.STATES) == list(folktables.state_list)
    assert set(vocabulary.STATES) <= set(acs._fl_load._STATE_CODES)
    assert all(hasattr(folktables, name) for name in vocabulary.TASKS.values())


def test_filter_conditions_equal_folktables_filters(folktables_raw):
    """FILTER_CONDITIONS (used for column lists and messages) keep exactly folktables' rows, also at
    the boundary values of every condition."""
    grid = pd.MultiIndex.from_product(
        [[15, 16, 17, 64, 65, 66], [99, 100, 101, 30000, 30001], [-1, 0, 1], [0, 1, 2]],
        names=["AGEP", "PINCP", "WKHP", "PWGTP"],
    ).to_frame(index=False)
    for name, task_filter in (
        ("ACSIncome", folktables.adult_filter),
        ("ACSPublicCoverage", folktables.public_coverage_filter),
    ):
        for frame in (grid, folktables_raw):
            keep = np.ones(len(frame), dtype=bool)
            for column, op, value in acs.FILTER_CONDITIONS[name]:
                keep &= acs._OPERATORS[op](frame[column].to_numpy(), value)
            np.testing.assert_array_equal(np.flatnonzero(keep), frame.index.get_indexer(task_filter(frame).index))
    assert acs.filter_text("acs_income") == "AGEP > 16 and PINCP > 100 and WKHP > 0 and PWGTP >= 1"


# --------------------------------------------------------------------------------------------------
# Bad person files: compressed, truncated, empty filter


def test_gzipped_file_under_csv_name(synthetic_file, tmp_path):
    packed = tmp_path / "psam_p06.csv"
    packed.write_bytes(gzip.compress(synthetic_file.read_bytes()[:50_000]))
    for call in (acs.validate_person_file, lambda p, **k: acs.extract_task(p, "acs_income", **k)):
        with pytest.raises(ValueError, match=rf"{packed} is a gzip-compressed file, not a CSV text file .*gunzip -c"):
            call(packed, year=2018)
    assert packed.read_bytes()[:2] == b"\x1f\x8b"  # the checks read the file, never change it
    zipped = tmp_path / "zipped.csv"
    with zipfile.ZipFile(zipped, "w") as z:
        z.writestr("psam_p06.csv", "a,b\n1,2\n")
    with pytest.raises(ValueError, match=rf"{zipped} is a zip archive"):
        acs.validate_person_file(zipped, year=2018)


@pytest.mark.parametrize(
    ("name", "compress"),
    [
        ("psam_p06.csv", gzip.compress),  # a gzipped file under the CSV's own name: the harmful case
        ("psam_p06.csv.gz", gzip.compress),
        ("psam_p06.csv", bz2.compress),
        ("psam_p06.csv", lzma.compress),
    ],
)
def test_decompression_advice_cannot_truncate_the_file(synthetic_file, tmp_path, name, compress):
    """The suggested command, run as given in a shell, leaves the CSV at the path the workflow reads;
    the old advice `gunzip -c psam_p06.csv > psam_p06.csv` truncated the user's file to 0 bytes."""
    folder = tmp_path / "my data"  # a space in the path: the command quotes it
    folder.mkdir()
    original = synthetic_file.read_bytes()[:50_000]
    packed = folder / name
    packed.write_bytes(compress(original))
    with pytest.raises(ValueError) as info:
        acs.validate_person_file(packed, year=2018)
    command = str(info.value).split("only if that worked: ", 1)[1]
    source, _, target = command.split("&&")[0].partition(">")  # never a redirection into the file it reads
    assert target.strip() != source.split()[-1].strip()
    subprocess.run(["bash", "-c", command], check=True, cwd=tmp_path)
    assert (folder / "psam_p06.csv").read_bytes() == original
    assert sorted(p.name for p in folder.iterdir()) == sorted({"psam_p06.csv", name})
    # A failing decompression (a corrupt file) leaves the user's file as it was.
    broken = folder / "psam_p36.csv"
    broken.write_bytes(compress(original)[:40])
    with pytest.raises(ValueError) as info:
        acs.validate_person_file(broken, year=2018)
    command = str(info.value).split("only if that worked: ", 1)[1]
    before = broken.read_bytes()
    assert subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True).returncode != 0
    assert broken.read_bytes() == before


def test_non_utf8_file(tmp_path):
    bad = tmp_path / "psam_p06.csv"
    bad.write_bytes(b"RT,SERIALNO\xff,AGEP\nP,1,30\n")
    with pytest.raises(ValueError, match=rf"{bad} is not a UTF-8 CSV text file .*line 1 has the byte 0xff at byte 12"):
        acs.validate_person_file(bad, year=2018)


def test_truncated_last_line(synthetic_file, tmp_path):
    data = synthetic_file.read_bytes()
    header_fields = data[: data.index(b"\n")].count(b",") + 1
    cut = tmp_path / "psam_p06.csv"
    cut.write_bytes(data[: len(data) - 120])  # an interrupted copy: the last line lost its end
    last = data[: len(data) - 120].rsplit(b"\n", 1)[-1]
    fields = last.count(b",") + 1
    assert fields < header_fields
    with pytest.raises(ValueError) as info:
        acs.validate_person_file(cut, year=2018)
    assert (
        f"{cut} looks truncated: its last line (line 20001) has {fields} fields but the header has {header_fields}"
        in str(info.value)
    )
    # Extraction reports the line too, not a "numeric PUMS code" problem.
    with pytest.raises(
        ValueError, match=rf"line 20001 of {cut} has {fields} fields but the header has {header_fields}"
    ):
        acs.extract_task(cut, "acs_income", year=2018)
    # A complete file without a final line break is fine.
    unterminated = tmp_path / "unterminated.csv"
    unterminated.write_bytes(data.rstrip(b"\n"))
    assert acs.validate_person_file(unterminated, year=2018)["rows"] == 20_000


def test_all_zero_weights_leave_no_income_rows(synthetic_file, tmp_path):
    def edit(df):
        df["PWGTP"] = "0"
        return df

    bad = _write_variant(synthetic_file, tmp_path / "psam_p06.csv", edit)
    with pytest.raises(ValueError) as info:
        acs.extract_task(bad, "acs_income", year=2018)
    message = str(info.value)
    assert f"acs_income (folktables ACSIncome): no row of {bad} (survey year 2018) passes the task's filter" in message
    assert "AGEP > 16 and PINCP > 100 and WKHP > 0 and PWGTP >= 1" in message
    assert "PWGTP >= 1: 0;" not in message and message.rstrip().endswith("PWGTP >= 1: 0 (of 20,000)")
    assert len(acs.extract_task(bad, "acs_public_coverage", year=2018)) > 0  # does not use PWGTP


# --------------------------------------------------------------------------------------------------
# The filtered cohort must be large enough for the model stage's folds


@pytest.mark.parametrize(
    ("cv", "crossfit", "test_size"), [(5, 5, 0.2), (2, 2, 0.2), (3, 4, 0.3), (5, 2, 0.5), (10, 3, 0.1)]
)
def test_cohort_minimum_is_enough_for_the_folds(cv, crossfit, test_size):
    """A cohort with exactly the minimum rows (per group, and per label within groups) splits so that
    every fold check of the model stage passes: training rows per group and label for the stratified
    CV, a test row of each label per group, and test rows per group outside every outer cross-fitting
    fold for the inner CV."""
    need = acs.cohort_minimum(cv_folds=cv, crossfit_folds=crossfit, test_size=test_size)
    rng = np.random.default_rng(cv * 100 + crossfit)
    # Groups 0 and 1 at the minimum (one label at the per-label minimum), the others larger.
    sizes = [need.per_group - need.per_label, need.per_label, need.per_label, need.per_group - need.per_label]
    sizes += list(need.per_group + rng.integers(0, 3 * need.per_group, 8))
    a = np.repeat(np.arange(6), 2).repeat(sizes)
    y = np.tile([0, 1], 6).repeat(sizes)
    df = pd.DataFrame({f: rng.integers(1, 3, size=len(a)).astype(float) for f in _INCOME_FEATURES})
    df["a"], df["y"] = a, y
    acs.check_cohort(df, "acs_income", cv_folds=cv, crossfit_folds=crossfit, test_size=test_size)
    for seed in range(5):
        train, test, _ = acs.encode_and_split(df, "acs_income", seed=seed, test_size=test_size)
        train_counts = train.groupby(["a", "y"]).size()
        assert len(train_counts) == 12 and train_counts.min() >= cv
        assert test.groupby(["a", "y"]).size().min() >= 1 and len(test.groupby(["a", "y"])) == 12
        folds = weight_models.crossfit_fold_ids(test["a"], crossfit_folds=crossfit, random_state=seed)
        for k in range(crossfit):
            outside = np.bincount(test["a"][folds != k], minlength=6)
            assert outside.min() >= cv, (seed, k, outside)
    # The paper's folds (5, 5) and the tiny test configuration's (2, 2), with test_size 0.2.
    expected = {(5, 5, 0.2): (10, 45, 7), (2, 2, 0.2): (10, 30, 4)}
    assert tuple(need) == expected.get((cv, crossfit, test_size), tuple(need))


_INCOME_FEATURES = ["AGEP", "COW", "SCHL", "MAR", "OCCP", "POBP", "RELP", "WKHP", "SEX"]


def test_check_cohort_counts(extracted):
    df = extracted["acs_income"]
    counts = acs.check_cohort(df, "acs_income", cv_folds=2, crossfit_folds=2, test_size=0.2)
    expected = df.groupby(["a", "y"]).size().reindex(pd.MultiIndex.from_product([range(6), [0, 1]]), fill_value=0)
    assert list(counts.columns) == ["a", "y", "n"] and len(counts) == 12
    np.testing.assert_array_equal(counts["n"].to_numpy(), expected.to_numpy())


def test_check_cohort_empty_group(extracted):
    df = extracted["acs_income"]
    without_other = df[df["a"] != acs.GROUP_LABELS.index("Other")]
    with pytest.raises(ValueError) as info:
        acs.check_cohort(without_other, "acs_income", cv_folds=5, crossfit_folds=5, test_size=0.2)
    message = str(info.value)
    assert message.startswith(
        "acs_income (folktables ACSIncome, filter AGEP > 16 and PINCP > 100 and WKHP > 0 and PWGTP >= 1)"
    )
    assert "group(s) 'Other' have no rows after the filter" in message
    assert "every group needs at least 45 rows and 10 of each label" in message
    assert "cv_folds=5, crossfit_folds=5, test_size=0.2" in message


def test_check_cohort_thin_group_and_label(extracted):
    df = extracted["acs_public_coverage"]
    black = acs.GROUP_LABELS.index("Black")
    positives = df.index[(df["a"] == black) & (df["y"] == 1)]
    thin = df.drop(positives[8:])
    with pytest.raises(ValueError, match=r"too few rows after the filter: 'Black' has 8 with y = 1; every group needs"):
        acs.check_cohort(thin, "acs_public_coverage", cv_folds=2, crossfit_folds=2, test_size=0.2)
    other = acs.GROUP_LABELS.index("Other")
    small = df.drop(df.index[df["a"] == other][25:])  # 25 rows left, fewer than 30
    with pytest.raises(ValueError, match=r"'Other' has 25 rows"):
        acs.check_cohort(small, "acs_public_coverage", cv_folds=2, crossfit_folds=2, test_size=0.2)
    acs.check_cohort(df, "acs_public_coverage", cv_folds=2, crossfit_folds=2, test_size=0.2)  # all rows: fine
