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
:func:`family_sizes` gives the size of each kind's family of one model and metric, :func:`adjusted_family_sizes`
the size of the family each kind's tests are adjusted in (option ``adjust_scope``: the permutations needed
after adjustment, the smallest threshold of a test), :func:`family_keys` the columns of the comparisons table
that make one family; :func:`pairwise_notes` names the families left without pairwise comparisons. The tests are in
:mod:`.comparison_tests`, the table in :mod:`.comparisons`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..vocabulary import ADJUST_SCOPES
from .slices import SlicePlan

__all__ = [
    "TESTED_KINDS",
    "Comparison",
    "Term",
    "enumerate_comparisons",
    "pairwise_notes",
    "family_sizes",
    "adjusted_family_sizes",
    "family_keys",
]


#: Kinds of comparison with a test; each is a family of its own (per model and metric, or model), or every
#: test of the audit is one family (option ``adjust_scope``, :func:`family_keys`).
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


def family_keys(adjust_scope: str) -> list[str]:
    """The columns of the comparisons table whose values make one family of the adjustment.

    ``metric``: one model, kind and metric; ``model``: one model and kind (every metric together);
    ``audit``: none, every tested comparison of the audit is one family
    (:data:`disaggregated_eval.vocabulary.ADJUST_SCOPES`).

    Examples
    --------
    >>> family_keys("metric"), family_keys("audit")
    (['model', 'kind', 'metric'], [])
    """
    if adjust_scope not in ADJUST_SCOPES:
        raise ValueError(f"adjust_scope must be one of {ADJUST_SCOPES}; got {adjust_scope!r}")
    return {"metric": ["model", "kind", "metric"], "model": ["model", "kind"], "audit": []}[adjust_scope]


def adjusted_family_sizes(sizes: dict[str, int], *, adjust_scope: str, n_metrics: int, n_models: int) -> dict[str, int]:
    """The largest number of tests in the family that each kind's tests are adjusted in (before withholding).

    Parameters
    ----------
    sizes : dict of str to int
        :func:`family_sizes`: each kind's tests of one model and metric.
    adjust_scope : {"metric", "model", "audit"}
        The option of that name (:func:`family_keys`).
    n_metrics, n_models : int
        The audit's metrics and models.

    Examples
    --------
    >>> sizes = {"vs_overall": 6, "vs_rest": 6, "pairwise": 3}
    >>> adjusted_family_sizes(sizes, adjust_scope="model", n_metrics=3, n_models=1)
    {'vs_overall': 18, 'vs_rest': 18, 'pairwise': 9}
    >>> adjusted_family_sizes(sizes, adjust_scope="audit", n_metrics=3, n_models=2)["pairwise"]
    90
    """
    keys = family_keys(adjust_scope)
    if not keys:
        total = sum(sizes.values()) * n_metrics * n_models
        return dict.fromkeys(sizes, total)
    per_metric = n_metrics if "metric" not in keys else 1
    return {kind: size * per_metric for kind, size in sizes.items()}
