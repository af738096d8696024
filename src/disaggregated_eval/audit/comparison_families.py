"""Which comparisons an audit makes, and the families their p-values are adjusted in.

Kinds (column ``kind``):

- ``vs_overall``: slice minus the whole population (``reference`` = ``overall``); these carry the
  flags ("above / below overall");
- ``vs_rest``: slice minus the rest of the rows (``reference`` = ``rest``);
- ``pairwise``: slice minus another slice of the same attribute or intersection family
  (``reference`` = the other slice; every pair once, in slice order), for families of at most
  ``pairwise_max_levels`` slices (all families when it is None);
- ``vs_model``: on one slice, a model minus the first model (``reference`` = the first model's name;
  no test).

:func:`enumerate_comparisons` lists them as :class:`Comparison` (two terms, ``plus - minus``);
:func:`family_sizes` gives the size of each kind's family (the permutations needed after adjustment);
:func:`pairwise_notes` names the families left without pairwise comparisons. The tests are in
:mod:`.comparison_tests`, the table in :mod:`.comparisons`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .slices import SlicePlan

__all__ = [
    "TESTED_KINDS",
    "Comparison",
    "Term",
    "enumerate_comparisons",
    "pairwise_notes",
    "family_sizes",
]


#: Kinds of comparison with a test; each is a family of its own (per model and metric, or model).
TESTED_KINDS: tuple[str, ...] = ("vs_overall", "vs_rest", "pairwise")


@dataclass(frozen=True)
class Comparison:
    """One comparison of one model: ``plus - minus`` of two (model, slice, side) terms."""

    kind: str
    model: int
    slice: int
    reference: str
    plus: tuple[int, int, int]  # (model, slice, side)
    minus: tuple[int, int, int]


Term = tuple[int, int, int]


def _pairwise_families(plan: SlicePlan, pairwise_max_levels: int | None):
    return [f for f in plan.families[1:] if pairwise_max_levels is None or f.n_slices <= pairwise_max_levels]


def enumerate_comparisons(
    plan: SlicePlan, n_models: int, model_names: Sequence[str], *, pairwise_max_levels: int | None = None
) -> list[Comparison]:
    """Every comparison, grouped by model, then kind (vs_overall, vs_rest, pairwise, vs_model)."""
    out: list[Comparison] = []
    pair_families = _pairwise_families(plan, pairwise_max_levels)
    for m in range(n_models):
        for s in range(1, plan.n_slices):
            out.append(Comparison("vs_overall", m, s, "overall", (m, s, 0), (m, 0, 0)))
        for s in range(1, plan.n_slices):
            out.append(Comparison("vs_rest", m, s, "rest", (m, s, 0), (m, s, 1)))
        for family in pair_families:
            ids = family.slice_ids
            for i in range(ids.shape[0]):
                for j in range(i + 1, ids.shape[0]):
                    a, b = int(ids[i]), int(ids[j])
                    out.append(Comparison("pairwise", m, a, plan.names[b], (m, a, 0), (m, b, 0)))
        if m > 0:
            for s in range(plan.n_slices):
                out.append(Comparison("vs_model", m, s, model_names[0], (m, s, 0), (0, s, 0)))
    return out


def pairwise_notes(plan: SlicePlan, *, pairwise_max_levels: int | None) -> list[str]:
    """A note naming the families whose slices are not compared pair by pair (too many levels)."""
    compared = {id(f) for f in _pairwise_families(plan, pairwise_max_levels)}
    skipped = [f for f in plan.families[1:] if id(f) not in compared]
    if not skipped:
        return []
    shown = ", ".join(f"{f.name} ({f.n_slices} slices)" for f in skipped[:8])
    more = f" and {len(skipped) - 8} more" if len(skipped) > 8 else ""
    return [
        f"no pairwise comparisons within {shown}{more}: pairs are compared only within families of at most "
        f"{pairwise_max_levels} slices (--pairwise-max-levels; 'all' compares every pair); each slice is still "
        f"compared with overall and with the rest"
    ]


def family_sizes(plan: SlicePlan, *, pairwise_max_levels: int | None) -> dict[str, int]:
    """The largest number of tests in each kind's family of one model and metric (before withholding)."""
    pairs = sum(f.n_slices * (f.n_slices - 1) // 2 for f in _pairwise_families(plan, pairwise_max_levels))
    return {"vs_overall": plan.n_slices - 1, "vs_rest": plan.n_slices - 1, "pairwise": pairs}
