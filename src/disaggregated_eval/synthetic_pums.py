"""Synthetic ACS PUMS person files for offline tests and benchmarks.

:func:`write_synthetic_person_file` writes a CSV in the format of a Census PUMS person file
(``psam_pXX.csv``): real column names in the real order, raw PUMS codes, blank cells for "N/A"
(e.g. ``COW``/``OCCP``/``WKHP`` for people who never worked, ``ESP`` only for children living with
parents, ``FER`` only for women 15-50), zero-padded string codes (``ST``, ``PUMA``, ``OCCP``), rare
categories, more than 255 ``OCCP`` levels and every ``RAC1P`` (1-9) and ``HISP`` (1-24) code.
``PINCP``, ``WKHP`` and ``PUBCOV`` depend on the other columns so that folktables' ``ACSIncome`` and
``ACSPublicCoverage`` are learnable. The distributions are loosely California-shaped; they are not
estimates of anything and the file is no substitute for the real data.

The file is written in chunks (bounded memory), so the full-size benchmark file (about 1.9 million
rows, 286 columns) can be produced on a small machine.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from . import seeds
from .io import atomic_path

__all__ = ["PERSON_COLUMNS", "REQUIRED_COLUMNS", "write_synthetic_person_file"]

_STATE_FIPS = {
    "AL": 1,
    "AK": 2,
    "AZ": 4,
    "AR": 5,
    "CA": 6,
    "CO": 8,
    "CT": 9,
    "DE": 10,
    "FL": 12,
    "GA": 13,
    "HI": 15,
    "ID": 16,
    "IL": 17,
    "IN": 18,
    "IA": 19,
    "KS": 20,
    "KY": 21,
    "LA": 22,
    "ME": 23,
    "MD": 24,
    "MA": 25,
    "MI": 26,
    "MN": 27,
    "MS": 28,
    "MO": 29,
    "MT": 30,
    "NE": 31,
    "NV": 32,
    "NH": 33,
    "NJ": 34,
    "NM": 35,
    "NY": 36,
    "NC": 37,
    "ND": 38,
    "OH": 39,
    "OK": 40,
    "OR": 41,
    "PA": 42,
    "RI": 44,
    "SC": 45,
    "SD": 46,
    "TN": 47,
    "TX": 48,
    "UT": 49,
    "VT": 50,
    "VA": 51,
    "WA": 53,
    "WV": 54,
    "WI": 55,
    "WY": 56,
    "PR": 72,
}

_BASE = (
    "RT SERIALNO DIVISION SPORDER PUMA REGION ST ADJINC PWGTP AGEP CIT CITWP COW DDRS DEAR DEYE DOUT "
    "DPHY DRAT DRATX DREM ENG FER GCL GCM GCR HIMRKS HINS1 HINS2 HINS3 HINS4 HINS5 HINS6 HINS7 INTP "
    "JWMNP JWRIP JWTR LANX MAR MARHD MARHM MARHT MARHW MARHYP MIG MIL MLPA MLPB MLPCD MLPE MLPFG MLPH "
    "MLPI MLPJ MLPK NWAB NWAV NWLA NWLK NWRE OIP PAP RELP RETP SCH SCHG SCHL SEMP SEX SSIP SSP WAGP "
    "WKHP WKL WKW WRK YOEP ANC ANC1P ANC2P DECADE DIS DRIVESP ESP ESR FOD1P FOD2P HICOV HISP INDP JWAP "
    "JWDP LANP MIGPUMA MIGSP MSP NAICSP NATIVITY NOP OC OCCP PAOC PERNP PINCP POBP POVPIP POWPUMA "
    "POWSP PRIVCOV PUBCOV QTRBIR RAC1P RAC2P RAC3P RACAIAN RACASN RACBLK RACNH RACNUM RACPI RACSOR "
    "RACWHT RC SCIENGP SCIENGRLP SFN SFR SOCP VPS WAOB"
).split()
_FLAGS = (
    "FAGEP FANCP FCITP FCITWP FCOWP FDDRSP FDEARP FDEYEP FDISP FDOUTP FDPHYP FDRATP FDRATXP FDREMP "
    "FENGP FESRP FFERP FFODP FGCLP FGCMP FGCRP FHICOVP FHIMRKSP FHINS1P FHINS2P FHINS3P FHINS3C "
    "FHINS4P FHINS4C FHINS5P FHINS5C FHINS6P FHINS7P FHISP FINDP FINTP FJWDP FJWMNP FJWRIP FJWTRP "
    "FLANP FLANXP FMARP FMARHDP FMARHMP FMARHTP FMARHWP FMARHYP FMIGP FMIGSP FMILPP FMILSP FOCCP FOIP "
    "FPAP FPERNP FPINCP FPOBP FPOWSP FPRIVCOVP FPUBCOVP FRACP FRELP FRETP FSCHGP FSCHLP FSCHP FSEMP "
    "FSEXP FSSIP FSSP FWAGP FWKHP FWKLP FWKWP FWRKP FYOEP"
).split()

#: Column names of a 2018 PUMS person file, in file order (the real file has 286 of these).
PERSON_COLUMNS: tuple[str, ...] = tuple(_BASE + _FLAGS + [f"PWGTP{i}" for i in range(1, 81)])

#: Columns always written: identifiers, weight, and every column ACSIncome/ACSPublicCoverage need.
REQUIRED_COLUMNS: tuple[str, ...] = tuple(
    c
    for c in PERSON_COLUMNS
    if c
    in {
        "SERIALNO",
        "SPORDER",
        "PUMA",
        "ST",
        "PWGTP",
        "AGEP",
        "COW",
        "SCHL",
        "MAR",
        "OCCP",
        "POBP",
        "RELP",
        "WKHP",
        "SEX",
        "RAC1P",
        "PINCP",
        "DIS",
        "ESP",
        "CIT",
        "MIG",
        "MIL",
        "ANC",
        "NATIVITY",
        "DEAR",
        "DEYE",
        "DREM",
        "ESR",
        "FER",
        "PUBCOV",
        "HISP",
    }
)

# Loosely California-shaped marginals (not estimates).
_RAC1P_P = np.array([0.56, 0.058, 0.008, 0.0005, 0.003, 0.145, 0.004, 0.17, 0.0515])
_HISP_P = np.r_[
    0.61,
    0.31,
    0.004,
    0.003,
    0.002,
    0.002,
    0.003,
    0.002,
    0.002,
    0.002,
    0.014,
    0.009,
    0.001,
    0.0015,
    0.001,
    0.002,
    0.002,
    0.0008,
    0.001,
    0.0007,
    0.0015,
    0.0006,
    0.0012,
    0.016,
]
_HISP_P = _HISP_P / _HISP_P.sum()
_ANC_P = np.array([0.48, 0.32, 0.03, 0.15, 0.02])  # codes 1, 2, 3, 4, 8
_ANC_CODES = np.array([1, 2, 3, 4, 8])
_RELP_ADULT_P = np.array(
    [0.38, 0.2, 0.12, 0.005, 0.005, 0.04, 0.03, 0.01, 0.005, 0.005, 0.03, 0.06, 0.01, 0.04, 0.002, 0.008, 0.02, 0.03]
)
_RELP_ADULT_P = _RELP_ADULT_P / _RELP_ADULT_P.sum()


def _occp_codes(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """About 530 four-digit OCCP codes with Zipf-like frequencies and an earnings effect each."""
    candidates = np.arange(10, 9840, 10)
    codes = np.sort(rng.choice(candidates, size=530, replace=False))
    weights = 1.0 / np.arange(1, len(codes) + 1) ** 1.1
    weights = rng.permutation(weights)
    weights /= weights.sum()
    effect = rng.normal(0.0, 0.45, size=len(codes)) + 0.25 * (codes < 3600)  # management/professional
    return codes, weights, effect


def _blank(values: np.ndarray, missing: np.ndarray) -> pa.Array:
    return pa.array(values.astype(np.int64), mask=missing)


def _chunk(
    rng: np.random.Generator,
    n: int,
    start: int,
    *,
    year: int,
    fips: int,
    occp: tuple[np.ndarray, np.ndarray, np.ndarray],
    columns: list[str],
) -> pa.Table:
    age = np.minimum(rng.gamma(2.2, 18.0, size=n), 95).astype(np.int64)
    sex = rng.integers(1, 3, size=n)
    rac1p = rng.choice(np.arange(1, 10), size=n, p=_RAC1P_P)
    hisp = rng.choice(np.arange(1, 25), size=n, p=_HISP_P)
    # Hispanic persons report "some other race" (8) or White (1) more often.
    hisp_other = (hisp != 1) & (rng.random(n) < 0.45)
    rac1p = np.where(hisp_other, 8, rac1p)
    if start == 0:  # every code appears at least once, even in a tiny file
        k = min(n, 9)
        rac1p[:k] = np.arange(1, 10)[:k]
        hisp[:k] = 1
        m = min(max(n - 9, 0), 24)
        hisp[9 : 9 + m] = np.arange(1, 25)[:m]

    # Place of birth, nativity, citizenship.
    foreign = rng.random(n) < np.where(rac1p == 6, 0.6, np.where(hisp != 1, 0.35, 0.12)) * (age > 5)
    states = np.array([c for c in _STATE_FIPS.values() if c != 72])
    pobp = np.where(rng.random(n) < 0.75, fips, rng.choice(states, size=n))
    pobp = np.where(rng.random(n) < 0.004, 72, pobp)  # Puerto Rico
    abroad = rng.choice(
        np.r_[np.arange(100, 170), np.arange(200, 255), np.arange(300, 375), [400, 414, 440, 461, 468, 501, 515, 554]],
        size=n,
    )
    pobp = np.where(foreign, abroad, pobp)
    nativity = np.where(foreign, 2, 1)
    cit = np.where(pobp == 72, 2, 1)
    cit = np.where(foreign & (rng.random(n) < 0.04), 3, cit)
    nativity = np.where(cit == 3, 1, nativity)
    cit = np.where(foreign & (cit != 3), np.where(rng.random(n) < 0.5 + 0.004 * age, 4, 5), cit)

    # Education (blank under 3), marital status, relationship.
    schl = np.clip(
        np.round(rng.normal(np.minimum(age, 22) * 0.8 + 2.5, 2.0) + (age >= 22) * rng.normal(1.5, 2.5, size=n)), 1, 24
    ).astype(np.int64)
    schl = np.where((foreign | (hisp != 1)) & (rng.random(n) < 0.2), np.maximum(schl - 6, 1), schl)
    mar = np.where(age < 15, 5, rng.choice([1, 2, 3, 4, 5], size=n, p=[0.48, 0.05, 0.1, 0.02, 0.35]))
    mar = np.where((age >= 15) & (age < 25) & (rng.random(n) < 0.8), 5, mar)
    relp = np.where(
        age < 18,
        rng.choice([2, 3, 4, 7, 8, 9, 10, 11], size=n, p=[0.78, 0.03, 0.02, 0.1, 0.03, 0.01, 0.02, 0.01]),
        rng.choice(np.arange(0, 18), size=n, p=_RELP_ADULT_P),
    )

    # Disability and difficulty items (DREM blank under 5).
    dis_p = 0.03 + 0.004 * np.maximum(age - 30, 0)
    dear = np.where(rng.random(n) < 0.3 * dis_p, 1, 2)
    deye = np.where(rng.random(n) < 0.25 * dis_p, 1, 2)
    drem = np.where(rng.random(n) < 0.4 * dis_p, 1, 2)
    dis = np.where((dear == 1) | (deye == 1) | (drem == 1) | (rng.random(n) < 0.5 * dis_p), 1, 2)

    # Work: COW/OCCP blank for people under 16 or who never worked in the last five years.
    worked = (age >= 16) & (rng.random(n) < np.where(age < 65, 0.82, 0.3) - 0.25 * (dis == 1))
    cow = rng.choice(np.arange(1, 10), size=n, p=[0.66, 0.07, 0.06, 0.05, 0.04, 0.06, 0.05, 0.005, 0.005])
    codes, weights, effect = occp
    occ_idx = rng.choice(len(codes), size=n, p=weights)
    unemployed = worked & (rng.random(n) < 0.04)
    occ_code = np.where(unemployed & (rng.random(n) < 0.3), 9920, codes[occ_idx])
    worked_12m = worked & (rng.random(n) < 0.9)
    wkhp = np.clip(np.round(rng.normal(38, 11, size=n) + 4 * (sex == 1) - 8 * (age > 62)), 1, 99).astype(np.int64)
    esr = np.where(worked_12m & ~unemployed, rng.choice([1, 2], size=n, p=[0.97, 0.03]), np.where(unemployed, 3, 6))
    esr = np.where(worked_12m & (rng.random(n) < 0.01), 4, esr)

    # Income (blank under 15): depends on schooling, hours, age, occupation, sex, nativity.
    log_inc = (
        8.6
        + 0.11 * (schl - 16)
        + 0.75 * np.log(np.where(worked_12m, wkhp, 4) / 40 + 0.1)
        + 0.035 * np.minimum(age - 18, 30)
        + np.where(worked, effect[occ_idx], -0.8)
        + 0.12 * (sex == 1)
        - 0.08 * (cit == 5)
        - 0.3 * (hisp != 1)
        - 0.2 * (rac1p == 2)
        + 0.1 * (rac1p == 6)
        + rng.normal(0, 0.75, size=n)
    )
    pincp = np.round(np.exp(log_inc + 0.8), -1).astype(np.int64)
    pincp = np.where(rng.random(n) < 0.07, 0, pincp)
    pincp = np.where(rng.random(n) < 0.003, -rng.integers(1, 19998, size=n), pincp)
    pincp = np.minimum(pincp, 1_500_000)

    # Public coverage: children, the poor, the disabled, the old, the unemployed.
    logit = (
        -0.9
        + 1.3 * (age < 19)
        + 2.2 * (age >= 65)
        + 1.1 * (dis == 1)
        - 0.00006 * np.maximum(pincp, 0)
        + 0.6 * (esr == 3)
        + 0.5 * (esr == 6) * (age < 65)
        - 0.4 * (cit == 5)
        + 0.15 * (schl < 16)
    )
    pubcov = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), 1, 2)

    esp = rng.choice(np.arange(1, 9), size=n, p=[0.55, 0.1, 0.08, 0.07, 0.1, 0.04, 0.04, 0.02])
    mig = rng.choice([1, 2, 3], size=n, p=[0.87, 0.01, 0.12])
    mil = rng.choice([1, 2, 3, 4], size=n, p=[0.004, 0.045, 0.003, 0.948])
    anc = rng.choice(_ANC_CODES, size=n, p=_ANC_P)
    fer = np.where(rng.random(n) < 0.05, 1, 2)
    pwgtp = np.maximum(np.round(rng.gamma(2.0, 10.0, size=n)), 1).astype(np.int64)

    rows = np.arange(start, start + n)
    household = rows // 3
    prefix = str(year)
    values: dict[str, pa.Array] = {
        "RT": pa.array(np.full(n, "P", dtype=object)),
        "SERIALNO": pa.array(
            np.char.add(
                np.char.add(prefix, np.where(relp >= 16, "GQ", "HU")), np.char.zfill((household + 1).astype(str), 7)
            )
        ),
        "SPORDER": pa.array(rows % 3 + 1),
        "PUMA": pa.array(np.char.zfill(rng.integers(101, 11300, size=n).astype(str), 5)),
        "ST": pa.array(np.full(n, f"{fips:02d}", dtype=object)),
        "PWGTP": pa.array(pwgtp),
        "AGEP": pa.array(age),
        "CIT": pa.array(cit),
        "COW": _blank(cow, ~worked),
        "DEAR": pa.array(dear),
        "DEYE": pa.array(deye),
        "DREM": _blank(drem, age < 5),
        "FER": _blank(fer, (sex != 2) | (age < 15) | (age > 50)),
        "MAR": pa.array(mar),
        "MIG": _blank(mig, age < 1),
        "MIL": _blank(mil, age < 17),
        "RELP": pa.array(relp),
        "SCHL": _blank(schl, age < 3),
        "SEX": pa.array(sex),
        "WKHP": _blank(wkhp, ~worked_12m),
        "ANC": pa.array(anc),
        "DIS": pa.array(dis),
        "ESP": _blank(esp, (age >= 16) | ~np.isin(relp, [2, 3, 4, 7])),
        "ESR": _blank(esr, age < 16),
        "HISP": pa.array(hisp),
        "NATIVITY": pa.array(nativity),
        "OCCP": pa.array(np.char.zfill(occ_code.astype(str), 4), mask=~worked),
        "PINCP": _blank(pincp, age < 15),
        "POBP": pa.array(pobp),
        "PUBCOV": pa.array(pubcov),
        "RAC1P": pa.array(rac1p),
    }
    out = []
    for c in columns:
        if c in values:
            out.append(values[c])
        elif c.startswith("PWGTP"):  # replicate weights around PWGTP
            out.append(pa.array(np.maximum(pwgtp + rng.integers(-8, 9, size=n), 0).astype(np.int32)))
        elif c.startswith("F") and c.endswith(("P", "C")):  # allocation flags
            out.append(pa.array((rng.random(n) < 0.05).astype(np.int8)))
        elif c in ("SOCP", "NAICSP"):
            out.append(
                pa.array(np.char.add(np.char.zfill(rng.integers(11, 55, size=n).astype(str), 2), "XXXX"), mask=~worked)
            )
        elif c == "ADJINC":
            out.append(pa.array(np.full(n, 1013097, dtype=np.int32)))
        else:  # other PUMS item: small code, blank for a share of rows
            out.append(pa.array(rng.integers(1, 6, size=n).astype(np.int16), mask=rng.random(n) < 0.3))
    return pa.table(out, names=columns)


def write_synthetic_person_file(
    path: str | os.PathLike[str],
    *,
    n_rows: int,
    seed: int | np.random.SeedSequence,
    year: int = 2018,
    state: str = "CA",
    n_columns: int | None = None,
    chunk_rows: int = 100_000,
) -> Path:
    """Write a synthetic PUMS person CSV with real column names and realistic codes.

    Parameters
    ----------
    path : path-like
        Output CSV (for folktables' layout use :func:`disaggregated_eval.acs.person_file_path`).
        Written atomically: a temporary file next to it is renamed at the end.
    n_rows : int
        Number of person rows (>= 33, so that every RAC1P and HISP code appears).
    seed : int or numpy.random.SeedSequence
        Root seed; draws come from ``seeds.generator(seed, "synthetic_pums", state, year)``.
    year : int, default 2018
        Survey year, used in ``SERIALNO``.
    state : str, default "CA"
        Two-letter postal code; ``ST`` holds its FIPS code.
    n_columns : int, optional
        Total number of columns. ``None`` writes only :data:`REQUIRED_COLUMNS`; a larger value adds
        filler columns named like real PUMS columns (``RT``, ``DIVISION``, allocation flags ``F*P``,
        replicate weights ``PWGTP1..80``, ...) in their real order, e.g. 286 for a full-size file.
    chunk_rows : int, default 100_000
        Rows generated and written per chunk (bounds memory).

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    ValueError
        If ``n_rows``, ``n_columns``, ``chunk_rows`` or ``state`` is invalid.
    """
    if isinstance(n_rows, bool) or not isinstance(n_rows, (int, np.integer)) or n_rows < 33:
        raise ValueError(f"n_rows must be an integer >= 33 (to hold every RAC1P and HISP code); got {n_rows!r}")
    if state not in _STATE_FIPS:
        raise ValueError(f"state must be a two-letter postal code; got {state!r}")
    if chunk_rows < 33:
        raise ValueError(f"chunk_rows must be >= 33; got {chunk_rows!r}")
    required = set(REQUIRED_COLUMNS)
    if n_columns is None:
        columns = list(REQUIRED_COLUMNS)
    else:
        if not len(REQUIRED_COLUMNS) <= n_columns <= len(PERSON_COLUMNS):
            raise ValueError(
                f"n_columns must be between {len(REQUIRED_COLUMNS)} and {len(PERSON_COLUMNS)}; got {n_columns!r}"
            )
        extra = [c for c in PERSON_COLUMNS if c not in required][: n_columns - len(REQUIRED_COLUMNS)]
        keep = required | set(extra)
        columns = [c for c in PERSON_COLUMNS if c in keep]
    rng = seeds.generator(seed, "synthetic_pums", state, int(year))
    occp = _occp_codes(rng)
    fips = _STATE_FIPS[state]
    target = Path(path)
    options = pacsv.WriteOptions(include_header=False, quoting_style="none")
    with atomic_path(target) as tmp, open(tmp, "wb") as sink:
        sink.write((",".join(columns) + "\n").encode("ascii"))  # unquoted, as in Census files
        writer = None
        try:
            for start in range(0, int(n_rows), int(chunk_rows)):
                n = min(int(chunk_rows), int(n_rows) - start)
                table = _chunk(rng, n, start, year=int(year), fips=fips, occp=occp, columns=columns)
                if writer is None:
                    writer = pacsv.CSVWriter(sink, table.schema, write_options=options)
                writer.write_table(table)
        finally:
            if writer is not None:
                writer.close()
    return target
