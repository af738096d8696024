"""Text from the data, made safe where it leaves the program: the terminal, the report, figures and file names.

Column and level names come from the user's file and may hold anything: an escape sequence that
retitles or recolours the terminal (``ESC ] 0 ; ... BEL``), a newline that fakes a line of the
summary, a right-to-left override that reorders what is shown, tag characters (U+E0000 to U+E007F)
that carry text no one sees, a private-use character that a terminal's font draws as any icon, a
``/`` or ``..`` that walks out of the output folder. One rule, :func:`terminal_text`, decides which
characters are shown escaped, wherever such text leaves the program:

- :func:`terminal_text` escapes every character of the Unicode categories of :data:`UNSAFE_CATEGORIES`
  (controls, format characters, surrogates, private use, unassigned, line and paragraph separators)
  the way Python's ``repr`` does (``\\x1b``, ``\\n``, ``\\u202e``, ``\\U000e0041``), so that what is
  printed is what is in the data, visibly; ordinary text (accents, CJK, emoji) is unchanged (a
  zero-width joiner inside an emoji sequence is a format character: shown escaped). The summary, the
  progress lines, the warnings and the error messages of the command line go through it.
- :func:`html_text` is :func:`terminal_text`, then HTML-escaped: every text of ``report.html`` and of
  the notebook display, so that the page shows exactly what the terminal shows.
- :func:`figure_text` is :func:`terminal_text` for the labels of a matplotlib figure, with ``$``
  escaped (a name with two dollar signs would otherwise be typeset as mathematics, or fail to draw):
  control characters are invalid in the SVG files' XML and have no glyph in the PNG files.
- :func:`file_component` turns a name into a safe file-name component: the name itself when it is
  short and made of letters, digits, ``_``, ``-`` and ``.`` only (and does not start with ``.`` or
  ``-``); otherwise a readable slug plus the first 8 hex digits of the name's SHA-256, so that two
  different names never share a file.

- :func:`fit_lines` wraps the lines of a text to a width (:func:`terminal_width`: the terminal's, else
  :data:`DEFAULT_WIDTH`), so that what the command line prints on a terminal fits it.

Spreadsheet formulas in the CSV files are neutralised separately
(:func:`disaggregated_eval.audit.outputs.csv_safe`); the tables keep every value as it is.
"""

from __future__ import annotations

import hashlib
import html
import re
import shutil
import textwrap
import unicodedata

__all__ = [
    "UNSAFE_CATEGORIES",
    "terminal_text",
    "html_text",
    "figure_text",
    "file_component",
    "DEFAULT_WIDTH",
    "MIN_WIDTH",
    "terminal_width",
    "fit_lines",
]

#: Unicode general categories shown escaped: controls (Cc: ESC, BEL, newline, DEL, the C1 controls),
#: format characters (Cf: the bidirectional overrides and isolates of "Trojan source", zero-width
#: characters, the byte-order mark, soft hyphen, tag characters), surrogates (Cs), private use (Co),
#: unassigned code points and noncharacters (Cn), line and paragraph separators (Zl, Zp). None of them
#: is printable (``str.isprintable``).
UNSAFE_CATEGORIES: frozenset[str] = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,59}")
_SLUG_CHARACTERS = re.compile(r"[^A-Za-z0-9_.-]+")


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _unsafe(char: str) -> bool:
    return unicodedata.category(char) in UNSAFE_CATEGORIES


def terminal_text(text: object) -> str:
    """``text`` with every character of :data:`UNSAFE_CATEGORIES` escaped, safe to print on a terminal.

    Escaped as Python writes them in ``repr`` (``\\x1b``, ``\\n``, ``\\u202e``, ``\\ue000``,
    ``\\U000e0041``): the C0 and C1 control characters (``ESC``, ``BEL``, newline, carriage return,
    tab, ``DEL``, ...), format characters (bidirectional overrides and isolates, zero-width characters,
    the byte-order mark, tag characters), lone surrogates, private-use and unassigned code points, and
    the line and paragraph separators. Everything else, backslashes included, is unchanged, so
    applying it twice gives the same text.

    Parameters
    ----------
    text : object
        Converted with ``str``.

    Returns
    -------
    str
        One line if ``text`` had no other line breaks than ``\\n`` and ``\\r`` (both escaped).

    Examples
    --------
    >>> print(terminal_text("risk\\u202e\\x1b[31m\\U000e0041 東京 😀"))
    risk\\u202e\\x1b[31m\\U000e0041 東京 😀
    """
    text = str(text)
    if text.isprintable():  # fast path: nothing to escape (str.isprintable is False for all of them)
        return text
    return "".join(_escape(c) if _unsafe(c) else c for c in text)


def html_text(text: object) -> str:
    """``text`` for HTML (an element's text or an attribute's value): :func:`terminal_text`, then
    :func:`html.escape` (``&``, ``<``, ``>``, ``"`` and ``'``), so that a page shows what the terminal shows.

    Examples
    --------
    >>> html_text("<b>\\u202eA&B</b>")
    '&lt;b&gt;\\\\u202eA&amp;B&lt;/b&gt;'
    """
    return html.escape(terminal_text(text))


def figure_text(text: object) -> str:
    """``text`` for a figure label: :func:`terminal_text`, with every ``$`` escaped (``\\$``) so that
    matplotlib draws it as a dollar sign, never as mathematics."""
    return terminal_text(text).replace("$", "\\$")


def file_component(name: object, *, always_hash: bool = False) -> str:
    """A safe file-name component for ``name`` (module docstring), unique per name.

    ``"compas_score"`` stays ``"compas_score"``; ``"risk/v2"`` becomes ``"risk_v2-<8 hex digits>"``
    and ``"../../etc"`` ``"etc-<8 hex digits>"``; at most 69 characters. With ``always_hash`` every
    name gets its digest (for names that differ only in case, which share a file on case-insensitive
    file systems).
    """
    text = str(name)
    if not always_hash and _SAFE_NAME.fullmatch(text):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    slug = _SLUG_CHARACTERS.sub("_", text).strip("._-")[:60]
    return f"{slug}-{digest}" if slug else digest


#: Width of the summary without a terminal (and of the summary in ``report.html``, the same on every machine).
DEFAULT_WIDTH = 100
#: The narrowest width the summary is wrapped to, whatever the terminal says.
MIN_WIDTH = 40


def terminal_width() -> int:
    """The width the summary is wrapped to: the terminal's (``shutil.get_terminal_size``, which reads
    ``COLUMNS`` first), :data:`DEFAULT_WIDTH` when there is no terminal, never below :data:`MIN_WIDTH`.

    Examples
    --------
    >>> terminal_width() >= MIN_WIDTH
    True
    """
    return max(MIN_WIDTH, shutil.get_terminal_size((DEFAULT_WIDTH, 24)).columns)


def fit_lines(text: str, width: int) -> str:
    """``text`` with every line longer than ``width`` wrapped at spaces (inside a word only when a word
    alone is longer), its continuation lines indented two spaces more than the line.

    Examples
    --------
    >>> print(fit_lines("note: a line that is far too long for a narrow terminal", 24))
    note: a line that is far
      too long for a narrow
      terminal
    """
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        body = line.lstrip(" ")
        indent = line[: len(line) - len(body)]
        out.extend(textwrap.wrap(body, width, initial_indent=indent, subsequent_indent=indent + "  ",
                                 break_long_words=True, break_on_hyphens=False))  # fmt: skip
    return "\n".join(out)
