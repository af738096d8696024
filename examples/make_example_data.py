"""Build the compact example files in ``examples/data/`` from the original public files.

    python examples/make_example_data.py COMPAS_FILE ADULT_FILE

``COMPAS_FILE`` is ProPublica's ``compas-scores-two-years.csv`` (``compas-analysis`` repository;
the copy without the direct identifiers works too) and ``ADULT_FILE`` the UCI Adult training file
``adult.data``. The script checks each original against the SHA-256 recorded in
``examples/PROVENANCE.md``, keeps what the examples need, and writes byte-identical outputs on every
run (fixed column order, fixed float format, gzip without a time stamp). See ``examples/PROVENANCE.md``
for what is changed and why.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
#: SHA-256 of the input files this script was written for (examples/PROVENANCE.md).
KNOWN_SHA256 = {
    # ProPublica's file without the direct identifiers (name, first, last, dob, case numbers).
    "compas": {
        "3bbc3288b268942fe3166bb6bfc0b6dbde3f31ed839ea636fffa1a6457d2c9f4",
        # the unmodified original
        "c451db85908b2f7fef1d83203bedf6b71ecda0d5af468d82ae62178f91d0cc7d",
    },
    "adult": {"5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"},
}
COMPAS_COLUMNS = [
    "id", "sex", "age", "age_cat", "race", "juv_fel_count", "juv_misd_count", "juv_other_count",
    "priors_count", "c_charge_degree", "decile_score", "score_text", "two_year_recid",
]  # fmt: skip
ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
    "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week",
    "native_country", "income",
]  # fmt: skip


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_source(path: Path, key: str) -> None:
    found = sha256(path)
    if found not in KNOWN_SHA256[key]:
        sys.exit(f"{path}: SHA-256 {found} is not one of the recorded {key} files; see examples/PROVENANCE.md")


def compas(path: Path) -> pd.DataFrame:
    """ProPublica's analysis rows, the columns the examples use, and the score ``decile_score / 10``."""
    raw = pd.read_csv(path)
    keep = (
        raw["days_b_screening_arrest"].between(-30, 30)
        & (raw["is_recid"] != -1)
        & (raw["c_charge_degree"] != "O")
        & (raw["score_text"] != "N/A")
    )
    out = raw.loc[keep, COMPAS_COLUMNS].copy()
    # decile_score >= 5 is ProPublica's "higher risk" (score_text Medium or High): score >= 0.5.
    assert ((out["decile_score"] >= 5) == out["score_text"].isin(["Medium", "High"])).all()
    out["compas_score"] = out["decile_score"] / 10
    return out.reset_index(drop=True)


def adult(path: Path) -> pd.DataFrame:
    """The UCI file with a header, spaces after the commas removed, '?' as missing, label 0/1."""
    raw = pd.read_csv(path, header=None, names=ADULT_COLUMNS, skipinitialspace=True, na_values=["?"])
    raw["income"] = raw["income"].str.strip()
    bad = sorted(set(raw["income"]) - {"<=50K", ">50K"})
    if bad:
        sys.exit(f"{path}: unexpected income values {bad[:5]}")
    raw.insert(len(raw.columns), "high_income", (raw["income"] == ">50K").astype("int64"))
    return raw.drop(columns="income")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("compas", type=Path, help="compas-scores-two-years.csv")
    parser.add_argument("adult", type=Path, help="adult.data")
    parser.add_argument("--out", type=Path, default=HERE / "data", help="output folder (default examples/data)")
    args = parser.parse_args()
    check_source(args.compas, "compas")
    check_source(args.adult, "adult")
    args.out.mkdir(parents=True, exist_ok=True)
    compas(args.compas).to_csv(args.out / "compas.csv", index=False, lineterminator="\n")
    with gzip.GzipFile(args.out / "adult.csv.gz", "wb", mtime=0) as handle:
        handle.write(adult(args.adult).to_csv(index=False, lineterminator="\n").encode())
    for name in ("compas.csv", "adult.csv.gz"):
        print(f"{args.out / name}  sha256 {sha256(args.out / name)}")


if __name__ == "__main__":
    main()
