"""Measuring text and laying out an audit's figures, in inches, before drawing.

Labels. Left of the first panel of each row of panels, every slice row is labelled with its full
name and size, ``race=Black & sex=Female (n=482)``; text is never parsed as mathtext. The layout grows
with the content instead of squeezing it: the label column is as wide as the widest label (measured
with the font's glyph advances, :func:`text_width`, through matplotlib's font fallback,
:data:`FALLBACK_FONTS`), the height follows the number of slices, and a label wider than
:data:`MAX_LABEL_INCHES` is wrapped at its `` & `` separators (then inside a part if one is still
too wide, :func:`wrap_label`), never shortened: the full name is always in the figure.

The layout (:func:`layout_figure`) is computed directly in inches from measured text (no
``constrained_layout`` or ``tight_layout``, which lay each figure out again on every save) and cached
per figure shape. :func:`audit_style` is the house style of :mod:`disaggregated_eval.plots` with the
installed fallback fonts and unhinted glyphs; :func:`missing_glyphs` names the characters that no
installed font has.
"""

from __future__ import annotations

import functools
import os
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib as mpl

__all__ = [
    "MAX_LABEL_INCHES",
    "LABEL_PT",
    "LEGEND_PT",
    "TICK_PAD",
    "EDGE",
    "SUPTITLE_H",
    "TITLE_H",
    "XAXIS_H",
    "LEGEND_LINE",
    "FALLBACK_FONTS",
    "measuring_fonts",
    "text_width",
    "missing_glyphs",
    "wrap_label",
    "layout_figure",
    "audit_style",
]


#: Widest slice label (inches) before it is wrapped onto several lines.
MAX_LABEL_INCHES = 5.0
LABEL_PT = 7.0  # slice labels (ytick.labelsize of the house style)
LEGEND_PT = 7.0
_LINE = 1.22  # line spacing of multi-line labels, in font sizes
# Geometry, inches.
_ROW_H = 0.2  # per slice row (more when labels wrap)
_PANEL_W = 2.8  # data area of one panel
TICK_PAD = 0.1  # tick mark and its pad, left of the labels
_GAP = 0.3  # between two panels side by side
EDGE = 0.12  # outer margins
SUPTITLE_H = 0.32
TITLE_H = 0.24  # a panel's title
XAXIS_H = 0.42  # x tick labels and the x label under a panel
_LEGEND_ROW_H = 0.19
LEGEND_LINE = 0.3  # length of a legend entry's line


#: Fonts tried, in this order, for a character that the house fonts lack (CJK above all), after
#: them: matplotlib's font fallback draws each character with the first installed font that has it,
#: and :func:`text_width` measures it with the same font. None of them is needed: a character that
#: no installed font has is drawn as the first font's box and measured without its glyph
#: (:func:`_missing_advance`), with a note naming it. Debian: ``apt-get install fonts-droid-fallback``.
FALLBACK_FONTS = ("Droid Sans Fallback", "Noto Sans CJK JP", "Noto Sans CJK SC", "WenQuanYi Micro Hei",
                  "WenQuanYi Zen Hei", "Unifont")  # fmt: skip


@functools.lru_cache(maxsize=8)
def measuring_fonts(family: tuple[str, ...]) -> tuple[tuple[Any, ...], dict[tuple[str, float], float]]:
    """The fonts matplotlib draws text of ``font.family`` = ``family`` with, in its order (a generic
    name such as ``sans-serif`` is the one font matplotlib finds for it; absent fonts skipped), as
    FreeType faces, and a cache of advances by (character, size)."""
    from matplotlib.font_manager import FontProperties, findfont, get_font

    paths: list[str] = []
    for name in family:
        try:
            path = findfont(FontProperties(family=[name]), fallback_to_default=False)
        except ValueError:  # not installed
            continue
        if path not in paths:
            paths.append(path)
    if not paths:  # nothing of the list is installed: matplotlib's default font
        paths.append(findfont(FontProperties()))
    return tuple(get_font(p) for p in paths), {}


def _installed_fallbacks() -> list[str]:
    """The fonts of :data:`FALLBACK_FONTS` that matplotlib knows (a missing one must not be named in
    ``font.family``: matplotlib would log a warning for it on every text)."""
    from matplotlib import font_manager

    _learn_system_fonts()
    known = {f.name for f in font_manager.fontManager.ttflist}
    return [f for f in FALLBACK_FONTS if f in known]


_SYSTEM_FONTS_LEARNT: list[bool] = []  # not empty once _learn_system_fonts has run in this process


def _learn_system_fonts() -> bool:
    """Add to matplotlib's font list the system fonts it does not know yet (once per process): its
    cache is built when matplotlib first runs, so a font installed later (``apt-get install
    fonts-droid-fallback``) would stay unknown. Called by :func:`audit_style`, before any figure; about
    20 ms. Returns whether a font was added (always False after the first call)."""
    from matplotlib import font_manager

    if _SYSTEM_FONTS_LEARNT:
        return False
    _SYSTEM_FONTS_LEARNT.append(True)

    known = {os.path.realpath(f.fname) for f in font_manager.fontManager.ttflist}
    added = False
    for path in font_manager.findSystemFonts():
        if os.path.realpath(path) in known or not path.lower().endswith((".ttf", ".otf", ".ttc")):
            continue
        try:
            font_manager.fontManager.addfont(path)
        except (OSError, RuntimeError, ValueError):  # a file FreeType cannot read
            continue
        added = True
    return added


def _missing_advance(ch: str, notdef: float, size: float) -> float:
    """Advance (points) of a character that no installed font has: matplotlib draws the first font's
    box of width ``notdef``; a wide East Asian character is given a whole em, so that the estimate
    is never narrower than a glyph a reader's own font would draw there."""
    wide = unicodedata.east_asian_width(ch) in ("W", "F")
    return max(notdef, size if wide else 0.0)


def _char_advance(ch: str, size: float) -> tuple[float, bool]:
    """Advance of one character at ``size`` points, in points, and whether an installed font has it."""
    fonts, cache = measuring_fonts(tuple(mpl.rcParams["font.family"]))
    key = (ch, size)
    if key in cache:
        width = cache[key]
        return abs(width), width >= 0
    code = ord(ch)
    for font in fonts:
        if font.get_char_index(code):
            font.set_size(size, 72)
            try:
                width = font.load_char(code).linearHoriAdvance / 65536.0
            except RuntimeError:  # a glyph FreeType cannot load: as if it were missing
                continue
            cache[key] = width
            return width, True
    fonts[0].set_size(size, 72)
    notdef = fonts[0].load_glyph(0).linearHoriAdvance / 65536.0
    width = _missing_advance(ch, notdef, size)
    cache[key] = -width  # negative: missing (every advance is >= 0)
    return width, False


def text_width(text: str, size: float) -> float:
    """Width of one line of ``text`` at ``size`` points, in inches (sum of the glyph advances).

    Each character is measured with the font that draws it (the house fonts, then
    :data:`FALLBACK_FONTS`); a character that none of them has, with the estimate of
    :func:`_missing_advance`, so that no label can fail a figure. Kerning is ignored, which
    over-estimates by a point or two: labels never overlap the axes.
    """
    return sum(_char_advance(ch, size)[0] for ch in text) / 72.0


def missing_glyphs(texts: Sequence[str]) -> list[str]:
    """The distinct characters of ``texts`` that no installed font of the figures has, in order of
    first appearance (drawn as boxes; line breaks and spaces are not counted).

    Parameters
    ----------
    texts : sequence of str

    Returns
    -------
    list of str
    """
    seen: dict[str, None] = {}
    with mpl.rc_context(audit_style()):
        for text in texts:
            for ch in text:
                if ch not in seen and not ch.isspace() and not _char_advance(ch, LABEL_PT)[1]:
                    seen[ch] = None
    return list(seen)


def wrap_label(name: str, limit: float, size: float) -> list[str]:
    """``name`` on lines no wider than ``limit`` inches: at `` & `` first, inside a part if needed."""
    if text_width(name, size) <= limit:
        return [name]
    parts = name.split(" & ")
    pieces = [p + " &" for p in parts[:-1]] + [parts[-1]]
    lines: list[str] = []
    for piece in pieces:
        if lines and text_width(lines[-1] + " " + piece, size) <= limit:
            lines[-1] = lines[-1] + " " + piece
            continue
        while text_width(piece, size) > limit and len(piece) > 1:  # a part too wide on its own: cut it
            cut = len(piece) - 1
            while cut > 1 and text_width(piece[:cut], size) > limit:
                cut -= 1
            lines.append(piece[:cut])
            piece = piece[cut:]
        lines.append(piece)
    return lines


@dataclass(frozen=True)
class _Layout:
    size: tuple[float, float]  # inches
    rects: tuple[tuple[float, float, float, float], ...]  # per panel, figure fractions
    labels: tuple[tuple[str, ...], ...]  # per row of panels: the row labels, wrapped
    legend: tuple[tuple[float, float], ...]  # per legend entry: left end of its line, its baseline (inches)
    title_y: float


@functools.lru_cache(maxsize=64)
def layout_figure(labels: tuple[tuple[str, ...], ...], n_panels: int, ncols: int, legend: tuple[str, ...]) -> _Layout:
    """Figure size and panel positions for these row labels and panels (cached: reused per shape).

    ``labels`` holds the row labels of each row of panels. Horizontally: the label column (as wide
    as the widest label line) and ``ncols`` panels of :data:`_PANEL_W` inches; vertically: the
    title, then per row of panels a panel title, the slice rows (:data:`_ROW_H` inches each, more
    when labels wrap) and the x axis, then the legend (as many rows as its entries need).
    """
    wrapped = [[wrap_label(text, MAX_LABEL_INCHES, LABEL_PT) for text in row] for row in labels]
    lines = [line for row in wrapped for label in row for line in label]
    label_w = max((text_width(line, LABEL_PT) for line in lines), default=0.0)
    lines_per_row = max((len(label) for row in wrapped for label in row), default=1)
    row_h = max(_ROW_H, lines_per_row * _LINE * LABEL_PT / 72 + 0.06)
    nrows = -(-n_panels // ncols)
    panel_h = max(len(row) for row in labels) * row_h + 0.1
    left = EDGE + label_w + TICK_PAD
    width = left + ncols * _PANEL_W + (ncols - 1) * _GAP + EDGE
    # legend entries (a line, then its text) in rows centred under the panels, as many per row as fit
    entry_w = [LEGEND_LINE + 0.08 + text_width(t, LEGEND_PT) + 0.3 for t in legend]
    legend_rows: list[list[int]] = [[]]
    for k, w in enumerate(entry_w):
        if legend_rows[-1] and sum(entry_w[i] for i in legend_rows[-1]) + w > width - 2 * EDGE:
            legend_rows.append([])
        legend_rows[-1].append(k)
    legend_h = len(legend_rows) * _LEGEND_ROW_H + 0.08
    block_h = TITLE_H + panel_h + XAXIS_H
    height = EDGE + SUPTITLE_H + nrows * block_h + legend_h + EDGE
    places = [(0.0, 0.0)] * len(legend)
    for r, row in enumerate(legend_rows):
        x = (width - sum(entry_w[i] for i in row) + 0.3) / 2
        for i in row:
            places[i] = (x, EDGE + (len(legend_rows) - 1 - r + 0.5) * _LEGEND_ROW_H)
            x += entry_w[i]
    rects = []
    for k in range(n_panels):
        i, j = divmod(k, ncols)
        x = left + j * (_PANEL_W + _GAP)
        y = height - EDGE - SUPTITLE_H - i * block_h - TITLE_H - panel_h
        rects.append((x / width, y / height, _PANEL_W / width, panel_h / height))
    return _Layout(
        size=(round(width, 3), round(height, 3)),
        rects=tuple(rects),
        labels=tuple(tuple("\n".join(label) for label in row) for row in wrapped),
        legend=tuple(places),
        title_y=1.0 - EDGE / height,
    )


def audit_style() -> dict:
    """The house style, with unhinted glyphs: at 200 dpi hinting changes nothing visible and costs
    about a tenth of the drawing time (the SVG keeps text as text either way)."""
    from disaggregated_eval.plots import house_style

    style = house_style()
    family = list(style["font.family"])
    family += [f for f in _installed_fallbacks() if f not in family]  # matplotlib's font fallback
    return {**style, "font.family": family, "text.hinting": "no_hinting"}
