"""Names in any alphabet: an audit whose group levels and column names are CJK, emoji, fullwidth
signs, private-use characters or letters of a script no installed font has finishes with every table
and figure (issue 22, item 1).

matplotlib's default font has no CJK glyph: measuring such a label with ``FT2Font.load_char`` raised
``RuntimeError: No glyphs have been loaded`` after all the work. Now every character is measured
with the font that draws it (the house fonts, then the installed fonts of
``figure_layout.FALLBACK_FONTS``), one that no installed font has by an estimate; and a figure that fails
for any reason is left out with a note, never failing the audit: the tables are written.
"""

from __future__ import annotations

import json
import unicodedata

import numpy as np
import pandas as pd
import pytest

from disaggregated_eval.audit import cli, figure_layout, figure_rendering
from disaggregated_eval.audit.text import terminal_text

CITY = "都市"  # a CJK column name
# CJK, emoji, U+FF1D, a private-use character (drawn escaped, as the terminal shows it: issue 32, item 10) and
# an Egyptian hieroglyph (a letter that no installed font has).
LEVELS = ["東京", "大阪", "😀 emoji", "＝ fullwidth", "\ue000 private", "\U00013000 hieroglyph"]
FAST = ["--n-resamples", "200", "--n-permutations", "0", "--max-leaf-nodes", "10", "--cv-folds", "2",
        "--crossfit-folds", "2"]  # fmt: skip


def world_frame(n: int = 500, seed: int = 22) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    city = np.array(LEVELS)[np.arange(n) % len(LEVELS)]
    y = rng.integers(0, 2, n)
    score = np.clip(0.3 * y + rng.uniform(0, 0.7, n), 0, 1).round(4)
    return pd.DataFrame({"y": y, "リスク": score, CITY: city})


@pytest.fixture(scope="module")
def world_audit(tmp_path_factory):
    root = tmp_path_factory.mktemp("world")
    path = root / "world.csv"
    world_frame().to_csv(path, index=False)
    out = root / "out"
    return path, out


def test_an_audit_of_cjk_emoji_fullwidth_and_private_use_names_finishes(world_audit, capsys):
    path, out = world_audit
    code = cli.main(["audit", str(path), "--label", "y", "--score", "リスク", "--group", CITY, "--control", "none,Y",
                     *FAST, "--out", str(out)])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 0, err
    assert "Traceback" not in err
    slices = pd.read_parquet(out / "slices.parquet")
    assert {f"{CITY}={level}" for level in LEVELS} <= set(slices["slice"])
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert "forest_auc.png" in figures and "controlled_Y.svg" in figures, figures
    svg = (out / "figures" / "forest_auc.svg").read_text(encoding="utf-8")
    for level in LEVELS:  # the SVG keeps text as text: every label is there, as the terminal shows it
        assert f"{CITY}={terminal_text(level)}" in svg
    assert "\ue000" not in svg and "\\ue000 private" in svg
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    # The hieroglyph is in no font: the note names it (a box is drawn in its place). Where the CJK letters have no
    # font either (a machine without fonts-droid-fallback, which CI installs), the note names the first five
    # characters and counts the others: the hieroglyph is then among those counted.
    missing = figure_layout.missing_glyphs([CITY, *LEVELS])
    assert "\U00013000" in missing
    named = "U+13000" if len(missing) <= 5 else "more; the figures draw a box in its place"
    assert any("no installed font has a glyph" in note and named in note for note in manifest["notes"])
    assert named in err  # and the warning says so on standard error


@pytest.mark.parametrize("text", ["東京", "＝", "\ue000", "😀", "A\u200bB", "e\u0301"])
def test_text_width_of_any_character_is_measured_without_error(text):
    import matplotlib as mpl

    with mpl.rc_context(figure_layout.audit_style()):
        width = figure_layout.text_width(text, 10.0)
    assert width > 0
    # A wide East Asian character (CJK, fullwidth) is about one em wide, drawn or estimated:
    # 10 pt = 10/72 inch per character, within 15% (Droid Sans Fallback's advance is exactly 1 em).
    wide = sum(unicodedata.east_asian_width(ch) in ("W", "F") for ch in text)
    if wide == len(text):
        assert width == pytest.approx(len(text) * 10 / 72, rel=0.15)


def test_missing_glyphs_names_only_characters_that_no_font_has():
    missing = figure_layout.missing_glyphs(["abc \ue000 x", "\ue000\U000f0000"])
    assert missing == ["\ue000", "\U000f0000"]  # private use (BMP, plane 15): in no installed font
    assert figure_layout.missing_glyphs(["overall (n=1,234) & ñ"]) == []


def test_a_figure_that_fails_leaves_the_tables_and_the_other_figures(world_audit, tmp_path, monkeypatch, capsys):
    """Any error while drawing a figure (here one raised on purpose) leaves that figure out, with a
    note in the manifest and on standard error; the audit exits 0 with every table."""
    path, _ = world_audit
    real = figure_rendering._render

    def failing(data, rc):
        if data.title.startswith("AUC"):
            raise RuntimeError("drawing failed on purpose")
        return real(data, rc)

    monkeypatch.setattr(figure_rendering, "_render", failing)
    monkeypatch.setattr(figure_rendering, "_renderers", lambda n, n_jobs: 1)  # in this process, so the patch applies
    out = tmp_path / "out"
    code = cli.main(["audit", str(path), "--label", "y", "--score", "リスク", "--group", CITY, *FAST,
                     "--out", str(out)])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 0, err
    for table in ("slices", "comparisons", "controlled", "fairness", "calibration"):
        assert (out / f"{table}.parquet").is_file() and (out / f"{table}.csv").is_file()
    figures = {p.name for p in (out / "figures").iterdir()}
    assert "forest_auc.png" not in figures and "forest_accuracy.png" in figures
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    note = [n for n in manifest["notes"] if "forest_auc" in n]
    assert note and "drawing failed on purpose" in note[0] and "tables are complete" in note[0]
    assert "forest_auc could not be drawn" in err
    assert "forest_auc could not be drawn" in (out / "report.html").read_text(encoding="utf-8")
