"""Input checks shared by every public function of the library (one home, as scikit-learn's
``sklearn.utils.validation`` and fairlearn's ``utils/_input_validation.py``).

A public module: the audit and the workflow plumbing (``workflow/lib``, outside the installed
package) check and show values with the same helpers (:func:`brief`, :func:`check_nesting`).
Public functions validate their arguments here, at the boundary, and pass checked arrays to their
internals, which trust them. Every error names the argument (or ``frame[column]``), the offending
values (the first few) and what was expected, e.g. ``labels (y) must be 0/1; got values {2}``.

Conventions: the data argument comes first and ``name`` is keyword-or-second; integer checks reject
``bool``; array checks return a new, typed array and never modify their input.
"""

from __future__ import annotations

import numbers
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "brief",
    "PATH_CHARS",
    "check_nesting",
    "repeated",
    "MAX_NESTED_ITEMS",
    "MAX_NESTING_DEPTH",
    "format_values",
    "row_number",
    "rows_text",
    "show_value",
    "check_1d",
    "check_length",
    "check_labels",
    "check_binary_codes",
    "check_scores",
    "check_weights",
    "check_group_codes",
    "check_int",
    "check_positive_int",
    "check_open_unit",
    "check_seed",
    "check_names",
    "check_columns",
    "check_unique_labels",
    "check_choice",
]


# ----------------------------------------------------------------------------------------------
# Formatting of offending values
# ----------------------------------------------------------------------------------------------


def show_value(value: Any) -> Any:
    """A hashable, printable stand-in for a bad value (``nan`` and ``missing`` included).

    Parameters
    ----------
    value : any
        One offending value.

    Returns
    -------
    any
        ``"missing"`` for None, ``pd.NA`` and ``pd.NaT``; ``"nan"`` for a float NaN; a NumPy scalar as
        the Python scalar it holds; anything else unchanged.
    """
    if value is None or value is pd.NA or value is pd.NaT:
        return "missing"
    if isinstance(value, (float, np.floating)) and np.isnan(value):
        return "nan"
    return value.item() if isinstance(value, np.generic) else value


#: Longest text of one value in a message (:func:`brief`).
BRIEF_CHARS = 80
#: Longest path a message shows whole (``brief(path, PATH_CHARS)``): a path is at most 4,096 bytes on
#: Linux, and one cut at :data:`BRIEF_CHARS` would lose the file's name.
PATH_CHARS = 4200
#: Most items (list entries, mapping values, scalars), counted with every YAML alias expanded, of an
#: option value, a ``--config`` file or a workflow configuration (:func:`check_nesting`).
MAX_NESTED_ITEMS = 100_000
#: Deepest nesting of lists and mappings in such a value.
MAX_NESTING_DEPTH = 50


def brief(value: Any, limit: int = BRIEF_CHARS, *, plain: bool = False) -> str:
    """``repr(value)`` (``str`` with ``plain``) on one line and at most ``limit`` characters (cut with
    an ellipsis).

    A value in an error message is shown through this, so that no message is longer than a line,
    however large the value (a 20,000-item list, the expansion of a YAML alias bomb). A large list
    or mapping is not even converted in full: its ``repr`` is built from its first items only.

    Parameters
    ----------
    value : any
        The value to show.
    limit : int, default=BRIEF_CHARS
        Most characters of the result.
    plain : bool, default=False
        Show a string without quotes (``str`` instead of ``repr``); other values are unaffected.

    Returns
    -------
    str
        One line (runs of whitespace made one space) of at most ``limit`` characters, ending in
        an ellipsis when cut. A value too deeply nested for ``repr`` is named by its type.
    """
    if isinstance(value, (list, tuple, dict, set, frozenset)) and len(value) > limit:
        head = list(value.items())[:limit] if isinstance(value, dict) else list(value)[:limit]
        text = repr(dict(head) if isinstance(value, dict) else head)
        if len(text) > limit:  # still too long: cut below
            text = text[: limit + 1]
        else:
            text = text[:-1] + ", ...]" if not isinstance(value, dict) else text[:-1] + ", ...}"
    else:
        text = str(value) if plain and isinstance(value, str) else _safe_repr(value)
    text = " ".join(text.split())
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return text


def _safe_repr(value: Any) -> str:
    """``repr`` of a value whose nesting may be deep or cyclic (a repr of its own then)."""
    try:
        return repr(value)
    except RecursionError:
        return f"<{type(value).__name__} nested too deeply to show>"


def check_nesting(
    value: Any, what: str, *, max_items: int = MAX_NESTED_ITEMS, max_depth: int = MAX_NESTING_DEPTH
) -> None:
    """Refuse a value (as YAML gives it) that is nested too deeply, cyclic, or too large once every
    shared (aliased) part is counted as often as it is used.

    YAML's aliases make a few hundred bytes stand for gigabytes (``&a [1, 1]``, ``&b [*a, *a]``, ...
    a "billion laughs"): PyYAML builds the shared lists once, but anything that walks, copies or
    prints the value expands them. This walk counts without expanding (each list or mapping once,
    its expanded size remembered), so it takes time in proportion to the bytes given.

    Parameters
    ----------
    value : any
        Lists, tuples, mappings and scalars.
    what : str
        How the value is named in messages (``--config audit.yaml``, ``the configuration``).
    max_items, max_depth : int
        Limits on the expanded item count and on the nesting depth.

    Raises
    ------
    ValueError
        Naming ``what`` and the limit exceeded (never showing the value itself).
    """
    sizes: dict[int, int] = {}  # id -> expanded size, for containers fully walked
    stack: list[tuple[Any, int, bool]] = [(value, 1, False)]
    active: set[int] = set()
    while stack:
        node, depth, done = stack.pop()
        if not isinstance(node, (list, tuple, dict)):
            continue
        key = id(node)
        children = list(node.keys()) + list(node.values()) if isinstance(node, dict) else list(node)
        if done:
            active.discard(key)
            sizes[key] = 1 + sum(sizes.get(id(c), 1) for c in children)
            if sizes[key] > max_items:
                raise ValueError(
                    f"{what} is too large: more than {max_items:,} items once its YAML aliases (*name) are "
                    f"expanded; give the values without aliases, or fewer of them"
                )
            continue
        if key in sizes:
            continue
        if key in active:
            raise ValueError(f"{what} refers to itself (a YAML alias inside its own anchor); give plain values")
        if depth > max_depth:
            raise ValueError(f"{what} is nested more than {max_depth} levels deep; give a flat list or mapping")
        active.add(key)
        stack.append((node, depth, True))
        stack.extend((c, depth + 1, False) for c in children if isinstance(c, (list, tuple, dict)))


def repeated(values: Iterable[Any]) -> list:
    """The values that occur more than once, each once, in the order of their first occurrence.

    One pass of a hash table (:class:`collections.Counter`): linear in the number of values, so a list
    of millions of items is checked at once (a check written as ``values.count(v)`` for every ``v`` takes
    quadratic time: a day at two million). The one home of the repeat checks of option lists, column
    names, levels and margins rows.

    Parameters
    ----------
    values : iterable of hashable

    Returns
    -------
    list
        Empty when every value is distinct.

    Examples
    --------
    >>> repeated(["race", "sex", "race", "age", "sex", "race"])
    ['race', 'sex']
    >>> repeated([1, 2, 3])
    []
    """
    return [value for value, count in Counter(values).items() if count > 1]


def format_values(values: Iterable[Any], limit: int = 5) -> str:
    """``{v1, v2, ... (k distinct)}``: the distinct values, sorted, at most ``limit`` shown.

    Parameters
    ----------
    values : iterable
        The offending values (repeats allowed; missing values shown as by :func:`show_value`).
    limit : int, default=5
        Most distinct values shown, each through :func:`brief`.

    Returns
    -------
    str
        The braced list; ``... (k distinct)`` is added when there are more than ``limit``.
    """
    distinct = sorted({show_value(v) for v in values}, key=lambda v: (str(type(v)), str(v)))
    shown = ", ".join(brief(v) for v in distinct[:limit])
    more = f", ... ({len(distinct)} distinct)" if len(distinct) > limit else ""
    return "{" + shown + more + "}"


def row_number(position: int) -> int:
    """The number messages give the data row at 0-based ``position``: data rows count from 1.

    The one convention of every message about a row of the user's data (a CSV or Parquet file, a
    frame, a margins file): "row N" is the N-th data row, the header not counted, so that row N of a
    CSV file is its line N + 1 when no field holds a line break and no line is blank ("line N" counts
    the file's lines, the header included, and is used only for the file's text).

    Examples
    --------
    >>> row_number(0)
    1
    """
    return int(position) + 1


def rows_text(n_rows: int, first: int | None = None, of: Any = None) -> str:
    """Where offending values are, for messages: ``in 3 rows (first at row 8)`` (:func:`row_number`).

    Parameters
    ----------
    n_rows : int
        How many rows hold one.
    first : int, optional
        0-based position of the first of them (None: not known).
    of : path-like, optional
        The file the position counts in (a file of a folder).

    Returns
    -------
    str

    Examples
    --------
    >>> rows_text(3, 7)
    'in 3 rows (first at row 8)'
    >>> rows_text(1, 0, of="b.parquet")
    'in 1 row (first at row 1 of b.parquet)'
    >>> rows_text(1200, None, of="b.parquet"), rows_text(2)
    ('in 1,200 rows (first in b.parquet)', 'in 2 rows')
    """
    text = f"in {n_rows:,} row{'s' if n_rows != 1 else ''}"
    if first is not None:
        return f"{text} (first at row {row_number(first)}{f' of {of}' if of is not None else ''})"
    return f"{text} (first in {of})" if of is not None else text


# ----------------------------------------------------------------------------------------------
# Arrays
# ----------------------------------------------------------------------------------------------


def check_1d(values: Any, name: str) -> np.ndarray:
    """``values`` as a one-dimensional array.

    Parameters
    ----------
    values : array-like of shape (n,)
        A list, array, Series or Index.
    name : str
        How the argument is named in messages.

    Returns
    -------
    ndarray of shape (n,)
        The values (not copied when they are an array already; never modified).

    Raises
    ------
    TypeError
        If ``values`` is a string, a mapping or a scalar (a common slip: scores given as a dict).
    ValueError
        If the array is not one-dimensional.
    """
    if isinstance(values, (str, bytes, dict)) or np.isscalar(values):
        raise TypeError(f"{name} must be a one-dimensional array; got {type(values).__name__} {values!r:.60}")
    if isinstance(values, (pd.Series, pd.Index)):
        array = values.to_numpy()
    else:
        array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional; got shape {array.shape}")
    return array


def check_length(array: np.ndarray, n: int, name: str, reference: str = "y") -> None:
    """Check that ``array`` has ``n`` rows, like ``reference``.

    Parameters
    ----------
    array : ndarray of shape (n_rows, ...)
    n : int
        The rows expected.
    name, reference : str
        How ``array`` and the argument it must match are named in messages.

    Raises
    ------
    ValueError
        ``{name} has {n_rows} rows but {reference} has {n}; they must match``.
    """
    if array.shape[0] != n:
        raise ValueError(f"{name} has {array.shape[0]} rows but {reference} has {n}; they must match")


def _numeric_codes(array: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float64 values of ``array`` and a mask of entries that are numbers (object arrays included)."""
    if array.dtype.kind in "biuf":
        values = array.astype(np.float64)
        return values, np.isfinite(values)
    if array.dtype.kind == "O":
        ok = np.array(
            [isinstance(v, (numbers.Real, np.number)) and not isinstance(v, (str, bytes)) for v in array],
            dtype=bool,
        )
        values = np.full(array.shape[0], np.nan)
        if ok.any():
            values[ok] = np.asarray(array[ok], dtype=np.float64)
        return values, ok & np.isfinite(values)
    return np.full(array.shape[0], np.nan), np.zeros(array.shape[0], dtype=bool)


def check_labels(y: Any, name: str = "y", *, dtype: Any = np.float64) -> np.ndarray:
    """Binary labels 0/1 as ``dtype`` (bool, integer, float or numeric object values).

    Parameters
    ----------
    y : array-like of shape (n_samples,)
    name : str
        How the argument is named in messages (e.g. ``"y"`` or ``"train['y']"``).
    dtype : numpy dtype, default float64

    Returns
    -------
    ndarray of shape (n_samples,)

    Raises
    ------
    ValueError
        If an entry is not 0 or 1 (NaN and missing included); the message lists the bad values.
    """
    array = check_1d(y, name)
    values, ok = _numeric_codes(array)
    bad = ~(ok & ((values == 0) | (values == 1)))
    if bad.any():
        raise ValueError(f"labels ({name}) must be 0/1; got values {format_values(array[bad])}")
    return values.astype(dtype)


def check_binary_codes(values: Any, name: str) -> np.ndarray:
    """0/1 codes (``a`` or ``y`` of a simulation) as int64.

    Parameters
    ----------
    values : array-like of any shape (a scalar is one value)
    name : str
        How the argument is named in messages.

    Returns
    -------
    ndarray of int64
        The codes, of the shape of ``values`` (at least one dimension).

    Raises
    ------
    ValueError
        ``{name} must be 0/1; got values {...}`` if an entry is not 0 or 1 (NaN and missing included).
    """
    array = np.atleast_1d(np.asarray(values))
    numbers_, ok = _numeric_codes(array.ravel())
    bad = ~(ok & ((numbers_ == 0) | (numbers_ == 1)))
    if bad.any():
        raise ValueError(f"{name} must be 0/1; got values {format_values(array.ravel()[bad])}")
    return numbers_.reshape(array.shape).astype(np.int64)


def check_scores(scores: Any, n: int | None = None, name: str = "scores") -> np.ndarray:
    """Scores as float64, finite and in [0, 1].

    Parameters
    ----------
    scores : array-like of shape (n_samples,)
    n : int or None, default=None
        Rows required (those of the labels), if given.
    name : str, default="scores"
        How the argument is named in messages.

    Returns
    -------
    ndarray of shape (n_samples,), float64

    Raises
    ------
    TypeError
        If ``scores`` is not array-like (e.g. a dict or a string).
    ValueError
        If the scores are not numeric, do not have ``n`` rows, or an entry is NaN, infinite or
        outside [0, 1] (the first such value and its row are named).
    """
    array = check_1d(scores, name)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric scores in [0, 1]; got dtype {array.dtype}")
    if n is not None:
        check_length(array, n, name)
    array = array.astype(np.float64)
    bad = ~(np.isfinite(array) & (array >= 0.0) & (array <= 1.0))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name} must be finite and in [0, 1]; got {float(array[row])!r} at row {row} ({int(bad.sum())} bad values)"
        )
    return array


def check_weights(weights: Any, n: int | None = None, name: str = "sample_weight") -> np.ndarray:
    """Weights as float64, finite and >= 0.

    Parameters
    ----------
    weights : array-like of shape (n_samples,)
    n : int or None, default=None
        Rows required, if given.
    name : str, default="sample_weight"
        How the argument is named in messages.

    Returns
    -------
    ndarray of shape (n_samples,), float64

    Raises
    ------
    TypeError
        If ``weights`` is not array-like.
    ValueError
        If the weights are not numeric, do not have ``n`` rows, or an entry is NaN, infinite or
        negative (the first such value and its row are named).
    """
    array = check_1d(weights, name)
    if array.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric weights >= 0; got dtype {array.dtype}")
    if n is not None:
        check_length(array, n, name)
    array = array.astype(np.float64)
    bad = ~(np.isfinite(array) & (array >= 0.0))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name} must be finite and >= 0; got {float(array[row])!r} at row {row} ({int(bad.sum())} bad values)"
        )
    return array


def check_group_codes(values: Any, name: str, n_groups: int | None = None, *, max_code: int = 254) -> np.ndarray:
    """Integer group codes ``0..n_groups-1`` (or ``0..max_code``) as int64.

    Parameters
    ----------
    values : array-like of shape (n_samples,)
        Integer-valued numbers (floats such as ``2.0`` included; bool is refused).
    name : str
        How the argument is named in messages.
    n_groups : int or None, default=None
        Number of groups; without it the codes may go up to ``max_code``.
    max_code : int, default=254
        Largest code allowed without ``n_groups``.

    Returns
    -------
    ndarray of shape (n_samples,), int64

    Raises
    ------
    ValueError
        ``group codes ({name}) must be integers in 0..K-1 (n_groups=K); got values {...}``.
    """
    array = check_1d(values, name)
    hi = (n_groups - 1) if n_groups is not None else max_code
    numbers_, ok = _numeric_codes(array)
    with np.errstate(invalid="ignore"):
        ok &= (numbers_ == np.round(numbers_)) & (numbers_ >= 0) & (numbers_ <= hi)
    if array.dtype.kind == "b":
        ok[:] = False
    if not ok.all():
        expected = f"0..{hi} (n_groups={n_groups})" if n_groups is not None else f"0..{hi}"
        raise ValueError(f"group codes ({name}) must be integers in {expected}; got values {format_values(array[~ok])}")
    return numbers_.astype(np.int64)


# ----------------------------------------------------------------------------------------------
# Scalars
# ----------------------------------------------------------------------------------------------


def check_int(value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (not bool) within ``[minimum, maximum]``.

    Parameters
    ----------
    value : any
    name : str
        How the argument is named in messages.
    minimum, maximum : int or None, default=None
        Inclusive bounds, if given.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        ``{name} must be an integer [in lo..hi | >= lo | <= hi]; got {value!r}``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
        raise ValueError(f"{name} must be an integer{_range_text(minimum, maximum)}; got {value!r}")
    if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
        raise ValueError(f"{name} must be an integer{_range_text(minimum, maximum)}; got {value!r}")
    return int(value)


def _range_text(minimum: int | None, maximum: int | None) -> str:
    if minimum is not None and maximum is not None:
        return f" in {minimum}..{maximum}"
    if minimum is not None:
        return f" >= {minimum}"
    if maximum is not None:
        return f" <= {maximum}"
    return ""


def check_positive_int(value: Any, name: str) -> int:
    """A positive integer (not bool).

    Parameters
    ----------
    value : any
    name : str
        How the argument is named in messages.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        ``{name} must be a positive integer; got {value!r}``.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)) or value <= 0:
        raise ValueError(f"{name} must be a positive integer; got {value!r}")
    return int(value)


def check_open_unit(value: Any, name: str) -> float:
    """A real number strictly between 0 and 1 (thresholds, confidence levels, fractions).

    Parameters
    ----------
    value : any
    name : str
        How the argument is named in messages.

    Returns
    -------
    float

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        If it is outside the open interval (0, 1).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number in (0, 1); got {value!r}")
    value = float(value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must be in the open interval (0, 1); got {value!r}")
    return value


def check_seed(seed: Any, name: str = "seed") -> int:
    """A non-negative integer seed (the configured root seed).

    Parameters
    ----------
    seed : any
    name : str, default="seed"
        How the argument is named in messages.

    Returns
    -------
    int

    Raises
    ------
    ValueError
        ``{name} must be a non-negative integer; got {seed!r}`` (bool is refused).
    """
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (numbers.Integral, np.integer)) or seed < 0:
        raise ValueError(f"{name} must be a non-negative integer; got {seed!r}")
    return int(seed)


def check_choice(value: Any, name: str, choices: Sequence[Any]) -> Any:
    """``value`` if it is one of ``choices``.

    Parameters
    ----------
    value : any
    name : str
        How the argument is named in messages.
    choices : sequence
        The values allowed.

    Returns
    -------
    any
        ``value`` itself.

    Raises
    ------
    ValueError
        ``{name} must be one of {choices}; got {value!r}``.
    """
    if value not in tuple(choices):
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


# ----------------------------------------------------------------------------------------------
# Names and frames
# ----------------------------------------------------------------------------------------------


def check_names(names: Any, what: str) -> list[str]:
    """A list of distinct column names (a single string is an error, not a list of characters).

    Parameters
    ----------
    names : iterable of str
    what : str
        How the argument is named in messages (``"features"``).

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        If ``names`` is a single string, holds a non-string, or names a column twice.
    """
    if isinstance(names, str):
        raise ValueError(f"{what} must be a list of column names, not a single string; got {names!r}")
    names = list(names)
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise ValueError(f"{what} must be column names (str); got {bad!r}")
    duplicated = sorted(repeated(names))
    if duplicated:
        raise ValueError(f"{what} contain duplicates: {brief(duplicated)}")
    return names


def check_columns(df: Any, columns: Sequence[str], frame: str) -> None:
    """Check that ``df`` is a DataFrame holding ``columns``.

    Parameters
    ----------
    df : any
    columns : sequence of str
        The columns required (may be empty: then only the type is checked).
    frame : str
        How the argument is named in messages.

    Raises
    ------
    TypeError
        If ``df`` is not a :class:`pandas.DataFrame`.
    ValueError
        ``{frame} is missing columns [...]; it has [...]``.
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{frame} must be a pandas DataFrame; got {type(df).__name__}")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{frame} is missing columns {missing!r}; it has {list(df.columns)!r}")


def check_unique_labels(labels: Any, what: str, *, reserved: Sequence[str] = ("overall",)) -> list[str]:
    """Display labels (of subgroups, slices): strings, distinct, and none of ``reserved``.

    Parameters
    ----------
    labels : iterable of str
    what : str
        How the argument is named in messages.
    reserved : sequence of str, default=("overall",)
        Names no label may take.

    Returns
    -------
    list of str

    Raises
    ------
    ValueError
        If a label repeats, collides with a reserved name such as ``"overall"`` (which labels the
        whole population in every table), or is not a non-empty string.
    """
    if isinstance(labels, str):
        raise ValueError(f"{what} must be a list of labels, not a single string; got {labels!r}")
    labels = list(labels)
    bad = [v for v in labels if not isinstance(v, str) or not v]
    if bad:
        raise ValueError(f"{what} must be non-empty strings; got {bad!r}")
    twice = sorted(repeated(labels))
    if twice:
        raise ValueError(f"{what} must be distinct; {brief(twice)} appear more than once in {brief(labels)}")
    reserved = set(reserved)
    clash = [v for v in labels if v in reserved]
    if clash:
        raise ValueError(
            f"{what} must not use the reserved name(s) {brief(clash)} (they label the whole population); got "
            f"{brief(labels)}"
        )
    return labels
