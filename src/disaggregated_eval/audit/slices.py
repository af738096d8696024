"""Slices of an audit: the whole population, each level of each attribute, each intersection cell.

Every *family* of slices is a partition of the rows: the family ``overall`` (one slice), one family
per attribute (one slice per level), and one family per combination of 2..K attributes (one slice
per combination of levels, all combinations listed, also those without rows). Slice names are
``overall``, ``race=Black`` and ``race=Black & sex=Female`` (attributes in the order given, levels
in each attribute's order); a family is named by its attributes joined with `` & ``.

The engine's walk touches each row once per family, not once per slice (one accumulator per slice of
a family's stream); a family whose slices are unions of an intersection's takes every sum but its AUC
numerator from the intersection's slices after the walk (:func:`.estimates.family_parts`, the
engine's "Parts").
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..validation import brief
from ..vocabulary import OVERALL

__all__ = ["Attribute", "Family", "SlicePlan", "plan_slices", "slice_name", "shown_slice_name", "count_slices",
           "check_slice_count", "MAX_SLICES", "FAMILY_SEPARATOR"]  # fmt: skip

#: Separator of attribute names in a family name and of ``attribute=level`` terms in a slice name.
FAMILY_SEPARATOR = " & "
#: Largest number of slices an audit enumerates (intersections of many attributes explode).
MAX_SLICES = 20_000


@dataclass(frozen=True)
class Attribute:
    """One protected attribute: its column name, level names (in order) and per-row level codes."""

    name: str
    levels: tuple[str, ...]
    codes: np.ndarray  # (n_rows,) int64 in 0..len(levels)-1


@dataclass(frozen=True)
class Family:
    """A partition of the rows into slices (``overall``, one attribute, or an intersection)."""

    name: str
    attributes: tuple[int, ...]  # indices into SlicePlan.attributes
    slice_ids: np.ndarray  # (n_levels,) int64: global slice index of each local code
    codes: np.ndarray  # (n_rows,) int64: local code of each row

    @property
    def n_slices(self) -> int:
        return int(self.slice_ids.shape[0])


@dataclass(frozen=True)
class SlicePlan:
    """Every slice of an audit and how rows map to them.

    Attributes
    ----------
    attributes : tuple of Attribute
    families : tuple of Family
        ``families[0]`` is ``overall``; then the attributes, then 2-way, 3-way ... intersections
        (``itertools.combinations`` order of the attributes).
    names : tuple of str
        Slice names, global slice order (the order of the tables).
    family_of : ndarray of shape (n_slices,), int64
        Family index of each slice.
    cell_codes : ndarray of shape (n_rows,), int32
        Cell (observed combination of all attributes' levels) of each row, ``0..n_cells-1``.
    cell_slices : ndarray of shape (n_cells, n_families), int64
        Global slice of each cell in each family.
    full_family : int
        Index of the family that crosses all attributes (whose slices are the cells, plus the empty
        combinations), or -1 when intersections stop short of it.
    count : ndarray of shape (n_rows,), int64, or None
        Rows each row stands for (the audit's ``frequency_weight``); None: one each.
    """

    attributes: tuple[Attribute, ...]
    families: tuple[Family, ...]
    names: tuple[str, ...]
    family_of: np.ndarray
    cell_codes: np.ndarray
    cell_slices: np.ndarray
    full_family: int
    count: np.ndarray | None = None

    @property
    def n_slices(self) -> int:
        return len(self.names)

    @property
    def n_cells(self) -> int:
        return int(self.cell_slices.shape[0])

    def attribute_of(self, s: int) -> str:
        """Family name (``overall``, ``race``, ``race & sex``) of slice ``s``."""
        return self.families[int(self.family_of[s])].name

    def slice_levels(self) -> dict[str, dict[str, str]]:
        """Slice name -> {attribute: level} of the attributes it fixes (``{}`` for ``overall``), in slice order.

        Examples
        --------
        >>> plan = plan_slices([Attribute("race", ("A", "B"), np.array([0, 1])),
        ...                     Attribute("sex", ("F", "M"), np.array([1, 0]))], intersections=2)
        >>> plan.slice_levels()["race=B & sex=F"], plan.slice_levels()["sex=M"], plan.slice_levels()["overall"]
        ({'race': 'B', 'sex': 'F'}, {'sex': 'M'}, {})
        """
        out: dict[str, dict[str, str]] = {}
        for family in self.families:
            sizes = [len(self.attributes[a].levels) for a in family.attributes]
            for local, s in enumerate(family.slice_ids):
                # the local code is mixed radix over the family's attributes, the last one fastest (plan_slices)
                codes = np.unravel_index(local, sizes) if sizes else ()
                out[self.names[int(s)]] = {
                    self.attributes[a].name: self.attributes[a].levels[int(c)]
                    for a, c in zip(family.attributes, codes, strict=True)
                }
        return out

    def slice_counts(self) -> np.ndarray:
        """Rows in each slice (each row counted ``count`` times), shape (n_slices,), int64."""
        cell_rows = np.bincount(self.cell_codes, weights=self.count, minlength=self.n_cells)
        if self.count is not None:
            cell_rows = np.rint(cell_rows).astype(np.int64)
        return self.aggregate_cells(cell_rows)

    def aggregate_cells(self, per_cell: np.ndarray) -> np.ndarray:
        """Sum a per-cell quantity (first axis of length n_cells) into slices (first axis n_slices)."""
        per_cell = np.asarray(per_cell)
        out = np.zeros((self.n_slices,) + per_cell.shape[1:], dtype=per_cell.dtype)
        for f in range(len(self.families)):
            np.add.at(out, self.cell_slices[:, f], per_cell)
        return out

    def slice_mask(self, s: int) -> np.ndarray:
        """Boolean mask of the rows of slice ``s``, shape (n_rows,)."""
        family = self.families[int(self.family_of[s])]
        local = int(np.flatnonzero(family.slice_ids == s)[0])
        return family.codes == local


def slice_name(attributes: Sequence[str], levels: Sequence[Any]) -> str:
    """The name of the slice of ``levels`` of ``attributes`` (``race=Black & sex=Female``; module docstring).

    Parameters
    ----------
    attributes : sequence of str
        Attribute (column) names, in the order given to the audit.
    levels : sequence
        One level per attribute, written as text.
    """
    return FAMILY_SEPARATOR.join(f"{a}={v}" for a, v in zip(attributes, levels, strict=True))


def shown_slice_name(attributes: Sequence[str], levels: Sequence[Any]) -> str:
    """A slice's name as a message shows it: :func:`slice_name`, quoted (``repr``) when a level has
    surrounding whitespace or characters that do not print, so that ``' A'`` is not read as ``A``.

    Examples
    --------
    >>> shown_slice_name(["race"], ["A"]), shown_slice_name(["race"], [" A"])
    ('race=A', "'race= A'")
    """
    text = [str(v) for v in levels]
    name = slice_name(attributes, text)
    if all(v == v.strip() and v.isprintable() for v in text) and name.isprintable():
        return name
    return brief(name, 200)


def _slice_name(attributes: tuple[Attribute, ...], combo: tuple[int, ...], levels: tuple[int, ...]) -> str:
    return slice_name([attributes[a].name for a in combo], [attributes[a].levels[v] for a, v in zip(combo, levels)])


def _cells(attributes: tuple[Attribute, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Observed combinations of all attributes' levels (in product order) and each row's cell code."""
    sizes = [len(a.levels) for a in attributes]
    if float(np.prod([float(s) for s in sizes])) <= 2**24:
        # mixed-radix code of the combination, compressed to the observed ones by a bincount
        code = np.zeros(attributes[0].codes.shape[0], dtype=np.int64)
        for a, size in zip(attributes, sizes):
            code = code * size + a.codes
        present = np.flatnonzero(np.bincount(code, minlength=int(np.prod(sizes))))
        rank = np.zeros(int(np.prod(sizes)), dtype=np.int64)
        rank[present] = np.arange(present.size)
        unique = np.stack(np.unravel_index(present, sizes), axis=1)
        return unique.astype(np.int64), rank[code].astype(np.int32)
    stacked = np.stack([a.codes for a in attributes], axis=1)
    unique, inverse = np.unique(stacked, axis=0, return_inverse=True)
    return unique.astype(np.int64), inverse.reshape(-1).astype(np.int32)


def count_slices(levels: Sequence[int], intersections: int) -> int:
    """The slices of an audit, counted without enumerating them: overall, and every combination of levels of
    every set of at most ``intersections`` attributes.

    The sum over the sets of ``k`` attributes of the product of their level counts is the ``k``-th
    elementary symmetric polynomial of the counts, computed exactly (Python integers) in
    ``len(levels) x intersections`` steps: 40 attributes crossed at will are counted at once, where
    enumerating their 2^40 sets would not end.

    Examples
    --------
    >>> count_slices([4, 2], 2)  # overall, 4 + 2 levels, 8 intersections
    15
    >>> count_slices([2] * 40, 40) == 3**40
    True
    """
    e = [1] + [0] * intersections
    for n in levels:
        for j in range(intersections, 0, -1):
            e[j] += e[j - 1] * int(n)
    return sum(e)


def check_slice_count(attributes: Sequence[tuple[str, int]], intersections: int) -> None:
    """Refuse more than :data:`MAX_SLICES` slices (:func:`count_slices`), before anything enumerates them.

    Parameters
    ----------
    attributes : sequence of (name, number of levels)
    intersections : int

    Raises
    ------
    ValueError
        Giving the count and what to change: the largest ``intersections`` that fits, or, when the
        attributes alone are too many slices, the attribute with the most levels.
    """
    levels = [n for _, n in attributes]
    total = count_slices(levels, intersections)
    if total <= MAX_SLICES:
        return
    what = f"intersections={intersections} of {len(levels)} attributes gives {total:,} slices, more than the limit of {MAX_SLICES:,}"
    fits = [k for k in range(1, intersections) if count_slices(levels, k) <= MAX_SLICES]
    if fits:
        raise ValueError(f"{what}; give a smaller intersections (--intersections {fits[-1]})")
    name, most = max(attributes, key=lambda a: a[1])
    raise ValueError(
        f"{what}; the attributes alone are too many slices ({name!r} has {most:,} levels): recode them into fewer "
        f"levels (an identifier is not a group column)"
    )


def plan_slices(
    attributes: tuple[Attribute, ...] | list[Attribute], *, intersections: int, count: np.ndarray | None = None
) -> SlicePlan:
    """Enumerate the slices of ``attributes`` crossed up to ``intersections`` at a time.

    Parameters
    ----------
    attributes : sequence of Attribute
        The protected attributes in the order given by the user (at least one), each with its level
        names and per-row codes (all of the same length).
    intersections : int
        Largest number of attributes crossed (1 = the attributes alone), ``1..len(attributes)``.
    count : ndarray of shape (n_rows,), int64, optional
        Rows each row stands for (frequency weights); kept on the plan for its row counts.

    Returns
    -------
    SlicePlan

    Raises
    ------
    ValueError
        If there are more than :data:`MAX_SLICES` slices (the message gives the count and suggests a
        smaller ``intersections``).
    """
    attributes = tuple(attributes)
    n_attr = len(attributes)
    n_rows = attributes[0].codes.shape[0]
    check_slice_count([(a.name, len(a.levels)) for a in attributes], intersections)  # before any enumeration
    combos: list[tuple[int, ...]] = []
    for k in range(1, intersections + 1):
        combos.extend(itertools.combinations(range(n_attr), k))

    names: list[str] = [OVERALL]
    family_of: list[int] = [0]
    families: list[Family] = [Family(OVERALL, (), np.zeros(1, dtype=np.int64), np.zeros(n_rows, dtype=np.int64))]
    for combo in combos:
        f = len(families)
        sizes = [len(attributes[a].levels) for a in combo]
        codes = np.zeros(n_rows, dtype=np.int64)
        for a, size in zip(combo, sizes):  # mixed radix, last attribute fastest (product order)
            codes = codes * size + attributes[a].codes
        first = len(names)
        for levels in itertools.product(*[range(size) for size in sizes]):
            names.append(_slice_name(attributes, combo, levels))
            family_of.append(f)
        slice_ids = np.arange(first, len(names), dtype=np.int64)
        name = FAMILY_SEPARATOR.join(attributes[a].name for a in combo)
        families.append(Family(name, combo, slice_ids, codes))

    # Cells: observed combinations of every attribute's level.
    unique, cell_codes = _cells(attributes)
    cell_slices = np.zeros((unique.shape[0], len(families)), dtype=np.int64)
    for f, family in enumerate(families):
        local = np.zeros(unique.shape[0], dtype=np.int64)
        for a in family.attributes:
            local = local * len(attributes[a].levels) + unique[:, a]
        cell_slices[:, f] = family.slice_ids[local]
    full = next((f for f, fam in enumerate(families) if len(fam.attributes) == n_attr and n_attr > 0), -1)
    return SlicePlan(
        attributes=attributes,
        families=tuple(families),
        names=tuple(names),
        family_of=np.asarray(family_of, dtype=np.int64),
        cell_codes=cell_codes,
        cell_slices=cell_slices,
        full_family=full,
        count=count,
    )
