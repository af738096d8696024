"""Input that passes the checks never ends in a traceback, a silent NaN or a message of megabytes
(issue 22, items 3, 5 and 6).

- YAML in a ``--config`` file: an alias bomb ("billion laughs") is refused by its expanded size before
  anything walks or prints it, a list nested 100,000 deep by its depth; no message is longer than a
  line (values are cut with an ellipsis), and a 20,000-item list is checked in linear time.
- Sample weights are rescaled by a power of two when their scale would overflow or underflow (the
  numbers equal those of the weights at scale 1), and refused when a positive weight is so far below
  the largest that its square underflows.
- Options read as they are meant: ``--pairwise-max-levels none`` is refused as ambiguous, a column
  name with a leading space can be given, ``--positive-label true`` names the positive class of a
  boolean label, levels that look alike get a note, ``detect_gap`` too small for any slice size gets
  a note, and a right-to-left override in the file name is escaped in the report's title.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from disaggregated_eval.audit import AuditInputError, audit, cli

FAST = dict(n_resamples=200, n_permutations=0, max_leaf_nodes=[10], cv_folds=2, crossfit_folds=2)
FAST_CLI = ["--n-resamples", "200", "--n-permutations", "0"]
# A message is one line: the longest one here (an unknown option, with the list of known ones) is
# about 900 characters; a value inside it never takes more than 80.
MAX_MESSAGE = 1_200


def frame(n: int = 400, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    return pd.DataFrame({
        "y": y,
        "s": np.clip(0.3 * y + rng.uniform(0, 0.7, n), 0, 1).round(4),
        "g": rng.choice(["a", "b"], n),
        "w": rng.uniform(1, 2, n),
    })  # fmt: skip


def run(argv, capsys):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err):
    assert code == 2, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err[:2000]
    assert lines[0].startswith("disagg-eval audit: error: "), lines[0][:500]
    assert len(lines[0]) < MAX_MESSAGE, len(lines[0])
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture()
def csv_file(tmp_path):
    path = tmp_path / "data.csv"
    frame().to_csv(path, index=False)
    return path


# ---- YAML in --config (item 3, and the deep and long lists of item 5) ---------------------------
def alias_bomb(levels: int, width: int = 9) -> str:
    """``width ** levels`` scalars in a few hundred bytes: each anchor lists the previous one ``width`` times."""
    lines = ["label: y", "scores: [s]", f"a0: &a0 [{', '.join(['lol'] * width)}]"]
    for k in range(1, levels):
        lines.append(f"a{k}: &a{k} [{', '.join([f'*a{k - 1}'] * width)}]")
    lines.append(f"groups: *a{levels - 1}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [6, 9])  # 531,441 and 387 million items, 357 and 519 bytes
def test_a_yaml_alias_bomb_is_refused_by_its_size_in_one_line(tmp_path, csv_file, capsys, levels):
    config = tmp_path / "bomb.yaml"
    config.write_text(alias_bomb(levels))
    assert config.stat().st_size < 600
    code, _, err = run(["audit", csv_file, "--config", config, "--out", tmp_path / "out"], capsys)
    line = one_line_error(code, err)
    assert f"--config {config} is too large: more than 100,000 items once its YAML aliases" in line
    assert not (tmp_path / "out").exists()


def alias_bomb_in_one_value(levels: int, width: int = 9) -> str:
    """The bomb of :func:`alias_bomb` inside the one value it stands for (no other key names an anchor):
    ``n_resamples: [&a0 [lol, ...], &a1 [*a0, ...], ...]``."""
    anchors = [f"&a0 [{', '.join(['lol'] * width)}]"]
    anchors += [f"&a{k} [{', '.join([f'*a{k - 1}'] * width)}]" for k in range(1, levels)]
    return f"label: y\nscores: [s]\ngroups: [g]\nn_resamples: [{', '.join(anchors)}]\n"


@pytest.mark.parametrize("levels", [6, 8])  # 597,870 and 48 million items, 353 and 455 bytes
def test_a_yaml_alias_bomb_inside_one_value_is_refused_by_its_size_in_one_line(tmp_path, csv_file, capsys, levels):
    """The case of item 3 in an option's own value: the message showed the whole expanded value (6
    levels: a 4.3 MB line; 8 levels: 351 MB of output and a MemoryError traceback at 3 GB of memory).
    Here no unknown key (``a0``) is met first, so the value itself reaches the option's check."""
    config = tmp_path / "bomb.yaml"
    config.write_text(alias_bomb_in_one_value(levels))
    assert config.stat().st_size < 500
    code, _, err = run(["audit", csv_file, "--config", config, "--out", tmp_path / "out"], capsys)
    line = one_line_error(code, err)
    assert f"--config {config} is too large: more than 100,000 items once its YAML aliases" in line
    assert "lol" not in err
    assert not (tmp_path / "out").exists()


def test_a_list_nested_100000_deep_is_refused_in_one_line(tmp_path, csv_file, capsys):
    config = tmp_path / "deep.yaml"
    config.write_text("label: y\nscores: [s]\ngroups: " + "[" * 100_000 + "]" * 100_000 + "\n")
    code, _, err = run(["audit", csv_file, "--config", config], capsys)
    line = one_line_error(code, err)
    assert f"--config {config}" in line and "nested" in line


def test_a_20000_item_list_with_repeats_gives_a_short_message(tmp_path, csv_file, capsys):
    items = [f"column_{i}" for i in range(20_000)] * 2  # every item twice
    config = tmp_path / "long.yaml"
    config.write_text(json.dumps({"label": "y", "scores": ["s"], "groups": items}))
    code, _, err = run(["audit", csv_file, "--config", config], capsys)
    line = one_line_error(code, err)
    assert "groups lists column_0, column_1" in line and "and 19995 more more than once" in line


def test_a_long_value_is_cut_with_an_ellipsis(tmp_path, csv_file, capsys):
    config = tmp_path / "long_value.yaml"
    config.write_text(json.dumps({"label": "y", "scores": ["s"], "groups": ["g"], "n_resamples": "x" * 100_000}))
    code, _, err = run(["audit", csv_file, "--config", config], capsys)
    line = one_line_error(code, err)
    assert "n_resamples must be an integer; got 'xxxx" in line and line.endswith("\u2026")


# ---- sample weights (item 5) --------------------------------------------------------------------
@pytest.fixture(scope="module")
def unscaled():
    return audit(frame(), label="y", scores=["s"], groups=["g"], sample_weight="w", **FAST)


@pytest.mark.parametrize("scale", [1e-200, 2.0**-700, 1e200, 2.0**700])
def test_weights_of_any_scale_give_the_numbers_of_scale_one(unscaled, scale):
    """Weights times 1e-200 ended in a SystemError of the numba kernel (w squared underflows), times
    1e200 in NaN AUCs and intervals. A power of two gives the very same bits; 1e-200 and 1e200 round
    each weight (relative 1e-16), so the numbers agree to 1e-12 (relative)."""
    data = frame().assign(w=lambda d: d["w"] * scale)
    result = audit(data, label="y", scores=["s"], groups=["g"], sample_weight="w", **FAST)
    assert any("weights rescaled by 2^" in note for note in result.notes), result.notes
    for column in ("estimate", "ci_low", "ci_high"):
        got, want = result.slices[column].to_numpy(float), unscaled.slices[column].to_numpy(float)
        assert np.isfinite(want).sum() > 0
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        if np.log2(scale).is_integer():
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


def test_a_weight_whose_square_underflows_beside_the_others_is_refused():
    data = frame()
    data.loc[3, "w"] = 5e-324  # a denormal beside weights of 1 to 2
    with pytest.raises(AuditInputError, match=r"sample_weight column 'w' has positive weights below 1e-150 of the "
                                              r"largest .*\{5e-324\} in 1 row \(first at row 4\).*set such weights to 0"):  # fmt: skip
        audit(data, label="y", scores=["s"], groups=["g"], sample_weight="w", **FAST)


@pytest.mark.parametrize("tiny", [1e-200, 5e-324])
def test_a_slice_whose_weights_square_to_zero_beside_weights_of_1_is_refused(tiny):
    """The case of item 5 that ended in ``SystemError`` from the numba kernel: every weight of one slice
    (``g = b``) 1e-200 or the denormal 5e-324, the others 1, so that the slice's sum of squared weights
    underflows to 0. Refused before any work, naming the column, the value, its rows and the remedy."""
    data = frame()
    data["w"] = np.where(data["g"] == "b", tiny, 1.0)
    rows = np.flatnonzero(data["g"] == "b")
    assert np.sum(data.loc[data["g"] == "b", "w"].to_numpy() ** 2) == 0.0  # the case under test
    message = (rf"sample_weight column 'w' has positive weights below 1e-150 of the largest \(1\): \{{{tiny!r}\}} "
               rf"in {len(rows)} rows \(first at row {rows[0] + 1}\).*set such weights to 0")  # fmt: skip
    with pytest.raises(AuditInputError, match=message):
        audit(data, label="y", scores=["s"], groups=["g"], sample_weight="w", **FAST)


@pytest.mark.parametrize("tiny", [1e-12, 1e-60, 1e-100])
def test_a_slice_that_holds_all_the_weight_gets_no_interval_of_width_0(tiny):
    """One slice's weights negligible beside the rest's (accepted: above 1e-150 of the largest): the other
    slice is practically the whole population, so its difference from overall is 0 by construction. Before,
    it was reported with an interval of width 0 (a rate: [-0.000, -0.000], 'within tolerance') or NaN (the
    AUC), and its T_a at control none likewise with reported=True and no reason; now the comparison is
    'degenerate' without an interval or verdict, and the T_a is withheld with the reason."""
    data = frame()
    data["w"] = np.where(data["g"] == "a", tiny, 1.0)
    result = audit(data, label="y", scores=["s"], groups=["g"], sample_weight="w",
                   metrics=["false_positive_rate", "auc"], **FAST)  # fmt: skip
    c = result.comparisons
    whole = c[(c["kind"] == "vs_overall") & (c["slice"] == "g=b")]
    assert len(whole) == 2 and (whole["caveat"] == "degenerate").all()
    assert whole[["ci_low", "ci_high"]].isna().all().all() and (whole["verdict"] == "").all()
    other = c[(c["kind"] == "vs_overall") & (c["slice"] == "g=a")]
    assert (other["caveat"] == "").all() and (other["ci_high"] - other["ci_low"] > 0.01).all()
    reported = c[c["ci_low"].notna()]
    assert (reported["ci_high"] - reported["ci_low"] > 0).all()  # no interval of width 0 anywhere
    t = result.controlled[(result.controlled["control"] == "none") & (result.controlled["slice"] == "g=b")]
    assert len(t) == 2 and not t["reported"].any() and t["T_a"].isna().all()
    assert t["reason"].str.startswith("slice - overall has no interval").all()


# ---- options read as they are meant (item 6) -----------------------------------------------------
def test_pairwise_max_levels_none_is_refused_as_ambiguous(csv_file, capsys, tmp_path):
    code, _, err = run(["audit", csv_file, "--label", "y", "--score", "s", "--group", "g", "--pairwise-max-levels",
                        "none", "--out", tmp_path / "out"], capsys)  # fmt: skip
    line = one_line_error(code, err)
    assert "--pairwise-max-levels" in line and "'none', which could mean no limit or nothing: give all" in line


def test_a_column_name_with_surrounding_spaces_can_be_given(tmp_path, capsys):
    path = tmp_path / "spaces.csv"
    frame().rename(columns={"g": " group "}).to_csv(path, index=False)
    out = tmp_path / "out"
    code, _, err = run(["audit", path, "--label", "y", "--score", "s", "--group", " group ", *FAST_CLI, "--out",
                        out], capsys)  # fmt: skip
    assert code == 0, err
    assert set(pd.read_parquet(out / "slices.parquet")["slice"]) >= {" group =a", " group =b"}


def test_positive_label_true_names_the_positive_class_of_a_boolean_label():
    data = frame().assign(y=lambda d: d["y"] == 1)  # a boolean label
    expected = audit(frame(), label="y", scores=["s"], groups=["g"], **FAST).slices
    for spelled in ("true", "True", "yes", "1"):
        got = audit(data, label="y", scores=["s"], groups=["g"], positive_label=spelled, **FAST).slices
        np.testing.assert_array_equal(got["estimate"].to_numpy(float), expected["estimate"].to_numpy(float))
    flipped = audit(data, label="y", scores=["s"], groups=["g"], positive_label="false", **FAST).slices
    base = expected.set_index(["slice", "metric"])["estimate"]
    rate = flipped.set_index(["slice", "metric"])["estimate"]
    assert rate[("overall", "label_rate")] == pytest.approx(1 - base[("overall", "label_rate")], abs=1e-15)
    with pytest.raises(AuditInputError, match=r"label column 'y' is boolean \(True/False\); give positive_label true "
                                              r"or false; got 'maybe'"):  # fmt: skip
        audit(data, label="y", scores=["s"], groups=["g"], positive_label="maybe", **FAST)


def test_positive_label_names_a_numeric_label_by_its_number(tmp_path, capsys):
    """A label read as 0.0/1.0 with --positive-label 1 (issue 32, item 10): equal numbers name the class
    (before, "1" was compared as text with "1.0" and refused as never occurring)."""
    data = frame().assign(y=lambda d: d["y"].astype(float))
    expected = audit(frame(), label="y", scores=["s"], groups=["g"], **FAST).slices
    for spelled in ("1", 1.0, " 1 "):
        got = audit(data, label="y", scores=["s"], groups=["g"], positive_label=spelled, **FAST).slices
        np.testing.assert_array_equal(got["estimate"].to_numpy(float), expected["estimate"].to_numpy(float))
    flipped = audit(data, label="y", scores=["s"], groups=["g"], positive_label="0", **FAST).slices
    rate = flipped.set_index(["slice", "metric"])["estimate"][("overall", "label_rate")]
    assert rate == pytest.approx(1 - expected.set_index(["slice", "metric"])["estimate"][("overall", "label_rate")])
    for absent in ("2", "yes", "nan"):
        with pytest.raises(AuditInputError, match=rf"positive_label '{absent}' does not occur in label column 'y'; "
                                                  r"its values are \{0\.0, 1\.0\}"):  # fmt: skip
            audit(data, label="y", scores=["s"], groups=["g"], positive_label=absent, **FAST)
    csv_file = tmp_path / "float_label.csv"
    data.to_csv(csv_file, index=False)  # written as 0.0/1.0
    code, _, err = run(["audit", csv_file, "--label", "y", "--score", "s", "--group", "g", "--positive-label", "1",
                        *FAST_CLI, "--out", tmp_path / "out", "--quiet"], capsys)  # fmt: skip
    assert code == 0, err


def test_levels_that_look_alike_are_separate_slices_with_a_note():
    data = frame()
    level = np.array(["A", "A\u200b", "\u00e9", "e\u0301"])[np.arange(len(data)) % 4]  # ZWSP; NFC and NFD e-acute
    result = audit(data.assign(g=level), label="y", scores=["s"], groups=["g"], **FAST)
    assert len({s for s in result.slices["slice"] if s.startswith("g=")}) == 4
    note = [n for n in result.notes if "look the same but are different text" in n]
    assert note, result.notes
    assert "'A' and 'A\\u200b'" in note[0] and "'e\\u0301' and '\\xe9'" in note[0]


def test_a_detect_gap_too_small_for_any_slice_size_gets_a_note():
    result = audit(frame(), label="y", scores=["s"], groups=["g"], detect_gap=1e-300, **FAST)
    table = result.detectability
    assert table["rows_needed"][table["reported"]].isna().all()
    note = [n for n in result.notes if n.startswith("detect_gap 1e-300: rows_needed is empty")]
    assert note and "no slice of up to 1e+09 rows" in note[0], result.notes
    # Each row's reason, only the reasons that hold (issue 32, item 10: before, "or a rate 1e-300 away would
    # leave [0, 1]" was said of every gap).
    assert note[0].endswith(f"{table['reported'].sum()} because no slice of up to 1e+09 rows (the rest of the file "
                            "unchanged) would detect a gap this small with power 0.8"), note[0]  # fmt: skip
    wide = audit(frame(), label="y", scores=["s"], groups=["g"], detect_gap=0.95, **FAST)
    empty = wide.detectability["reported"] & wide.detectability["rows_needed"].isna()
    rates = wide.detectability["method"] == "two-proportion normal"
    assert empty.sum() == (empty & rates).sum() > 0  # every rate, none of the bootstrap rows
    note = [n for n in wide.notes if n.startswith("detect_gap 0.95")]
    assert note and note[0].endswith(f"{empty.sum()} because a rate 0.95 away from overall would leave [0, 1] in "
                                     "either direction"), note  # fmt: skip
    fine = audit(frame(), label="y", scores=["s"], groups=["g"], detect_gap=0.2, **FAST)
    assert not any(n.startswith("detect_gap") for n in fine.notes)


def test_a_right_to_left_override_in_the_file_name_is_escaped_in_the_title(tmp_path, capsys):
    path = tmp_path / "risk\u202ecsv.exe.csv"
    frame().to_csv(path, index=False)
    out = tmp_path / "out"
    code, _, err = run(["audit", path, "--label", "y", "--score", "s", "--group", "g", *FAST_CLI, "--out", out], capsys)
    assert code == 0, err
    page = (out / "report.html").read_text(encoding="utf-8")
    title = page[page.index("<title>") : page.index("</title>")]
    assert "\u202e" not in title and "risk\\u202ecsv.exe.csv" in title
    assert "\u202e" not in page[page.index("<h1>") : page.index("</h1>")]
