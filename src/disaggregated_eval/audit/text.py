"""Text from the data, made safe where it leaves the program: the terminal and file names.

Column and level names come from the user's file and may hold anything: an escape sequence that
retitles or recolours the terminal (``ESC ] 0 ; ... BEL``), a newline that fakes a line of the
summary, a right-to-left override that reorders what is shown, a ``/`` or ``..`` that walks out of
the output folder. Two helpers, used wherever such text leaves the program:

- :func:`terminal_text` escapes control and bidirectional-formatting characters the way Python's
  ``repr`` does (``\\x1b``, ``\\n``, ``\\u202e``), so that what is printed is what is in the data,
  visibly; ordinary text (accents, CJK, emoji) is unchanged. The summary, the progress lines, the
  warnings and the error messages of the command line go through it.
- :func:`figure_text` is :func:`terminal_text` for the labels of a matplotlib figure, with ``$``
  escaped (a name with two dollar signs would otherwise be typeset as mathematics, or fail to draw):
  control characters are invalid in the SVG files' XML and have no glyph in the PNG files.
- :func:`file_component` turns a name into a safe file-name component: the name itself when it is
  short and made of letters, digits, ``_``, ``-`` and ``.`` only (and does not start with ``.`` or
  ``-``); otherwise a readable slug plus the first 8 hex digits of the name's SHA-256, so that two
  different names never share a file.

HTML is escaped separately, where HTML is written (:mod:`.report`, with :func:`html.escape`), and
spreadsheet formulas in the CSV files (:func:`disaggregated_eval.audit.outputs.csv_safe`).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = ["terminal_text", "figure_text", "file_component"]

#: Characters printed escaped besides the C0/C1 controls: bidirectional formatting (the "Trojan
#: source" characters), line and paragraph separators, and the byte-order mark.
_INVISIBLE = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029\ufeff")
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
    return char in _INVISIBLE or unicodedata.category(char) in ("Cc", "Cs")


def terminal_text(text: object) -> str:
    """``text`` with every control character escaped, safe to print on a terminal.

    Escaped: the C0 and C1 control characters (``ESC``, ``BEL``, newline, carriage return, tab,
    ``DEL``, ...), lone surrogates, the bidirectional-formatting characters and the line and
    paragraph separators, written as Python writes them in ``repr`` (``\\x1b``, ``\\n``,
    ``\\u202e``). Everything else, backslashes included, is unchanged, so applying it twice gives the
    same text.

    Parameters
    ----------
    text : object
        Converted with ``str``.

    Returns
    -------
    str
        One line if ``text`` had no other line breaks than ``\\n`` and ``\\r`` (both escaped).
    """
    text = str(text)
    if text.isprintable():  # fast path: nothing to escape (str.isprintable is False for all of them)
        return text
    return "".join(_escape(c) if _unsafe(c) else c for c in text)


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
