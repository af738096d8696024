"""The fairness summary of an audit: the disparity statistics that fairlearn's and Aequitas' users expect.

For each model and each family of slices (an attribute, or an intersection of attributes), from the
audit's paired bootstrap (:mod:`.estimates`) through the derived-statistics layer
(:mod:`disaggregated_eval.derived`), so that every number has a paired percentile interval:

* ``demographic_parity_difference`` and ``demographic_parity_ratio``: the largest minus the smallest,
  and the smallest over the largest, selection rate (``predicted_positive_rate``) of the family's
  reported slices (fairlearn's ``demographic_parity_difference`` / ``_ratio``);
* ``equalized_odds_difference`` and ``equalized_odds_ratio``: the larger of the true positive rate's
  and the false positive rate's differences, the smaller of their ratios (fairlearn's
  ``equalized_odds_difference`` / ``_ratio``, ``agg="worst_case"``), over the slices that report both;
* ``largest_gap``: the largest minus the smallest value of the headline metric over the family;
* ``disparity_ratio``: each slice's selection rate, false positive rate and false negative rate over
  the reference slice's (Aequitas' ``pprev``, ``fpr`` and ``fnr`` disparities), the reference being
  the family's largest slice (in rows) unless the option ``reference`` names one; a ratio outside
  [0.8, 1.25] is a disparity (the four-fifths rule, :data:`disaggregated_eval.vocabulary.FOUR_FIFTHS_BAND`).

A slice whose estimate the minimum-size rules withhold (:mod:`.withheld`) takes no part: the
statistics are those of the reported slices (fairlearn and Aequitas would include every group). The
point estimates equal fairlearn's and Aequitas' on the same groups (``tests/test_audit_fairness.py``).
Definitions, and why the interval of a largest gap must be read with care: ``docs/method.md``,
"Fairness summary".
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from .. import vocabulary
from ..derived import (
    Replicated,
    complement,
    gap,
    maximum,
    minimum,
    ratio,
    spread_ratio,
    summarise,
    take,
)
from .columns import FAIRNESS_COLUMNS
from .estimates import AuditEstimates
from .slices import FAMILY_SEPARATOR, SlicePlan

__all__ = [
    "FAIRNESS_METRICS",
    "MetricSource",
    "parse_references",
    "check_reference_levels",
    "resolve_references",
    "slice_values",
    "metric_sources",
    "missing_fairness_metrics",
    "fairness_table",
]

#: The metrics the fairness summary reads (the true positive rate is ``sensitivity``; either it or the
#: false negative rate is enough, the other is its complement).
FAIRNESS_METRICS: tuple[str, ...] = (
    "predicted_positive_rate",
    "sensitivity",
    "false_positive_rate",
    "false_negative_rate",
)
_EQUALIZED_ODDS = "sensitivity & false_positive_rate"


@dataclass(frozen=True)
class MetricSource:
    """One metric of one model on every slice: estimates, paired replicates and which slices report it.

    Attributes
    ----------
    values : Replicated
        ``point`` of shape (n_outputs,), ``replicates`` of shape (n_resamples, n_outputs): typically views
        into the audit's bootstrap (no copy), read through ``rows``.
    rows : ndarray of shape (n_slices,), int64
        The output of each slice in ``values``.
    reported : ndarray of shape (n_slices,), bool
        Whether the minimum-size rules report the slice's estimate.
    reasons : ndarray of shape (n_slices,), object (str)
        Why not ("" when reported).
    complement : bool
        Whether the metric is ``1 - values`` (the true positive rate from the false negative rate).
    """

    values: Replicated
    rows: np.ndarray
    reported: np.ndarray
    reasons: np.ndarray
    complement: bool = False

    def of(self, slices: np.ndarray) -> Replicated:
        """The metric on ``slices`` (global slice indices, shape (k,)): point (k,), replicates (n_resamples, k)."""
        x = take(self.values, self.rows[np.asarray(slices, dtype=np.int64)])
        return complement(x) if self.complement else x


# ----------------------------------------------------------------------------------------------
# the option ``reference``
# ----------------------------------------------------------------------------------------------
def _terms(item: str, names: Sequence[str]) -> list[tuple[str, str]]:
    """``attribute=level`` terms of a slice name (attributes among ``names``), split at `` & `` only
    where an attribute name and ``=`` follow (a level may hold ``&``)."""
    alternation = "|".join(re.escape(g) for g in sorted(names, key=len, reverse=True))
    split = re.compile(r"\s*&\s*(?=(?:" + alternation + r")\s*=)")
    out = []
    for part in split.split(item.strip()):
        attribute, sep, level = part.partition("=")
        attribute = attribute.strip()
        if not sep or attribute not in names:
            raise ValueError(
                f"reference {item!r}: {part.strip()!r} is not <attribute>=<level> with an attribute among the "
                f"group columns {list(names)}"
            )
        out.append((attribute, level.strip()))
    return out


def check_reference_levels(references: Sequence[str], attributes: Sequence[Any]) -> None:
    """Check, before any work, that every level a reference names is a level of its attribute.

    Parameters
    ----------
    references : sequence of str
        From :func:`parse_references`.
    attributes : sequence of Attribute
        The audit's coded attributes (name and level names).

    Raises
    ------
    ValueError
        Naming the reference, the level and the attribute's levels.
    """
    levels = {a.name: [str(v) for v in a.levels] for a in attributes}
    for name in references:
        for attribute, level in _terms(name, list(levels)):
            if level not in levels[attribute]:
                shown = levels[attribute][:12] + (["..."] if len(levels[attribute]) > 12 else [])
                raise ValueError(
                    f"reference {name!r}: {level!r} is not a level of {attribute!r}; its levels are {shown}"
                )


def parse_references(items: Sequence[str], *, groups: Sequence[str], intersections: int) -> list[str]:
    """Check the option ``reference`` and write each item as the audit names the slice.

    Parameters
    ----------
    items : sequence of str
        Slice names, ``attribute=level`` or ``a=x & b=y`` (attributes in any order; spaces around
        ``=`` and ``&`` are ignored, the level is taken without surrounding spaces).
    groups : sequence of str
        The attribute columns, in the order given (the order of the parts of a slice name).
    intersections : int
        Largest number of attributes crossed.

    Returns
    -------
    list of str
        The slice names (``race=Caucasian & sex=Male``), in the order given.

    Raises
    ------
    ValueError
        For an item that is not ``attribute=level`` terms, names an attribute that is not a group
        column or names one twice, crosses more attributes than ``intersections``, or gives a second
        reference for a family (the message names the item and what was expected).
    """
    names = [str(g) for g in groups]
    out: list[str] = []
    seen: dict[tuple[str, ...], str] = {}
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ValueError(f"reference must name slices such as {names[0]}=<level>; got {item!r}")
        terms: dict[str, str] = {}
        for attribute, level in _terms(item, names):
            if attribute in terms:
                raise ValueError(f"reference {item!r} names the attribute {attribute!r} twice")
            terms[attribute] = level
        if len(terms) > intersections:
            raise ValueError(
                f"reference {item!r} crosses {len(terms)} attributes, but intersections is {intersections}: "
                f"there is no such family of slices"
            )
        family = tuple(g for g in names if g in terms)
        name = FAMILY_SEPARATOR.join(f"{g}={terms[g]}" for g in family)
        if family in seen:
            raise ValueError(
                f"reference gives two slices of the family {FAMILY_SEPARATOR.join(family)!r} ({seen[family]!r} and "
                f"{name!r}); give at most one per family"
            )
        seen[family] = name
        out.append(name)
    return out


def resolve_references(plan: SlicePlan, references: Sequence[str]) -> dict[int, int]:
    """Family index -> slice index of each reference slice (from :func:`parse_references`'s names).

    Raises
    ------
    ValueError
        For a slice the audit does not have (the message lists the family's levels).
    """
    index = {name: s for s, name in enumerate(plan.names)}
    out: dict[int, int] = {}
    for name in references:
        s = index.get(name)
        if s is None:
            attribute_names = [t.partition("=")[0] for t in name.split(FAMILY_SEPARATOR)]
            family = next((fam for fam in plan.families if fam.name == FAMILY_SEPARATOR.join(attribute_names)), None)
            shown = [plan.names[i] for i in family.slice_ids[:12]] if family is not None else []
            more = ", ..." if family is not None and family.n_slices > 12 else ""
            raise ValueError(f"reference {name!r} is not a slice of the data; the family's slices are {shown}{more}")
        out[int(plan.family_of[s])] = s
    return out


# ----------------------------------------------------------------------------------------------
# inputs: a metric on every slice
# ----------------------------------------------------------------------------------------------
def slice_values(estimates: AuditEstimates, model: int, q: int) -> tuple[Replicated, np.ndarray]:
    """Metric ``q`` of every output (views, no copy) and the output row of each slice of ``model``."""
    values = Replicated(point=estimates.point[:, q], replicates=estimates.replicates[:, :, q])
    return values, estimates.slice_rows[model, :, 0]


def metric_sources(
    estimates: AuditEstimates, reasons: np.ndarray, metrics: Sequence[str], model: int
) -> dict[str, MetricSource]:
    """Every metric of ``metrics`` of one model as a :class:`MetricSource`, plus the true positive rate
    (``sensitivity``) and the false negative rate as each other's complement when only one was computed.

    Parameters
    ----------
    estimates : AuditEstimates
    reasons : ndarray of shape (n_models, n_slices, n_metrics), object
        Why each estimate is withheld ("" when reported).
    metrics : sequence of str
        The metrics of ``estimates`` (its last axis).
    model : int
    """
    out = {}
    for q, metric in enumerate(metrics):
        why = np.asarray(reasons[model, :, q]).astype(object)
        values, rows = slice_values(estimates, model, q)
        out[metric] = MetricSource(values, rows, why == "", why)
    for a, b in (("sensitivity", "false_negative_rate"), ("false_negative_rate", "sensitivity")):
        if a not in out and b in out:
            out[a] = replace(out[b], complement=True)
    return out


def missing_fairness_metrics(metrics: Sequence[str]) -> list[str]:
    """The fairness summary's metrics that ``metrics`` lack (none when the selection rate, the false
    positive rate and one of sensitivity / false negative rate are there)."""
    have = set(metrics)
    missing = [m for m in ("predicted_positive_rate", "false_positive_rate") if m not in have]
    if not ({"sensitivity", "false_negative_rate"} & have):
        missing += ["sensitivity", "false_negative_rate"]
    return missing


# ----------------------------------------------------------------------------------------------
# the table
# ----------------------------------------------------------------------------------------------
def _family_rows(
    stat: Replicated,
    *,
    confidence: float,
    base: dict,
    reported: np.ndarray,
    reasons: Sequence[str],
) -> list[dict]:
    """Rows of ``stat`` (one per derived quantity) with its summary; ``base`` gives each row's other columns."""
    summary = summarise(stat, confidence=confidence)
    low_band, high_band = vocabulary.FOUR_FIFTHS_BAND
    rows = []
    for i in range(len(reasons)):
        record = {key: (value[i] if isinstance(value, (list, np.ndarray)) else value) for key, value in base.items()}
        estimate = float(summary.estimate[i]) if reported[i] else np.nan
        low, high = float(summary.low[i]), float(summary.high[i])
        caveat = str(summary.caveat[i])
        if caveat:
            low = high = np.nan
        is_ratio = record["statistic"].endswith("ratio")
        record.update(
            estimate=estimate,
            ci_low=low,
            ci_high=high,
            interval="percentile",
            disparity=bool(is_ratio and np.isfinite(estimate) and not low_band <= estimate <= high_band),
            interval_outside=bool(is_ratio and reported[i] and (low > high_band or high < low_band)),
            n_undefined=int(summary.n_undefined[i]),
            reported=bool(reported[i]),
            reason=str(reasons[i]),
            caveat=caveat,
        )
        rows.append(record)
    return rows


def _spread(
    name: str,
    source: MetricSource,
    members: np.ndarray,
    plan: SlicePlan,
    *,
    metric: str,
    confidence: float,
    base: dict,
    kind: str,
) -> list[dict]:
    """A gap (``kind="difference"``) or a min/max ratio (``"ratio"``) of one metric over ``members``."""
    if members.size < 2:
        return _family_rows(
            Replicated(point=np.full(1, np.nan), replicates=np.full((1, 1), np.nan)),
            confidence=confidence,
            base={
                **base,
                "statistic": name,
                "metric": metric,
                "slice": "",
                "reference": "",
                "members": int(members.size),
            },
            reported=np.zeros(1, dtype=bool),
            reasons=["fewer than 2 reported slices in the family"],
        )
    x = source.of(members)
    local = np.arange(members.size)[None, :]
    stat = gap(x, local) if kind == "difference" else spread_ratio(x, local)
    point = x.point
    high, low = members[int(np.nanargmax(point))], members[int(np.nanargmin(point))]
    return _family_rows(
        stat,
        confidence=confidence,
        base={**base, "statistic": name, "metric": metric, "slice": plan.names[high], "reference": plan.names[low]}
        | {"members": int(members.size)},
        reported=np.ones(1, dtype=bool),
        reasons=[""],
    )


def _equalized_odds(
    tpr: MetricSource, fpr: MetricSource, ids: np.ndarray, plan: SlicePlan, *, confidence: float, base: dict
) -> list[dict]:
    """The equalized-odds difference and ratio over the slices that report both rates."""
    members = ids[tpr.reported[ids] & fpr.reported[ids]]
    rows = []
    for name, kind in (("equalized_odds_difference", "difference"), ("equalized_odds_ratio", "ratio")):
        if members.size < 2:
            rows += _spread(name, tpr, members, plan, metric=_EQUALIZED_ODDS, confidence=confidence, base=base,
                            kind=kind)  # fmt: skip
            continue
        local = np.arange(members.size)[None, :]
        family = (tpr.of(members), fpr.of(members))
        if kind == "difference":
            parts = (gap(family[0], local), gap(family[1], local))
            stat = maximum(*parts)
            which = int(np.nanargmax([p.point[0] for p in parts]))
        else:
            parts = (spread_ratio(family[0], local), spread_ratio(family[1], local))
            stat = minimum(*parts)
            which = (
                int(np.nanargmin([p.point[0] for p in parts])) if np.isfinite([p.point[0] for p in parts]).any() else 0
            )
        point = family[which].point
        high, low = members[int(np.nanargmax(point))], members[int(np.nanargmin(point))]
        rows += _family_rows(
            stat,
            confidence=confidence,
            base=base
            | {"statistic": name, "metric": _EQUALIZED_ODDS, "slice": plan.names[high]}
            | {"reference": plan.names[low], "members": int(members.size)},
            reported=np.ones(1, dtype=bool),
            reasons=[""],
        )
    return rows


def _disparities(
    source: MetricSource,
    ids: np.ndarray,
    reference: int,
    plan: SlicePlan,
    *,
    metric: str,
    confidence: float,
    base: dict,
) -> list[dict]:
    """Each slice of the family (but the reference) over the reference slice."""
    others = ids[ids != reference]
    if others.size == 0:
        return []
    x = source.of(np.concatenate([others, [reference]]))
    stat = ratio(x, np.arange(others.size), np.full(others.shape, others.size))
    reasons = []
    for s in others:
        parts = []
        if not source.reported[s]:
            parts.append(f"slice: {source.reasons[s]}")
        if not source.reported[reference]:
            parts.append(f"reference: {source.reasons[reference]}")
        reasons.append("; ".join(parts))
    reported = np.array([r == "" for r in reasons])
    return _family_rows(
        stat,
        confidence=confidence,
        base=base
        | {"statistic": "disparity_ratio", "metric": metric, "slice": [plan.names[s] for s in others]}
        | {"reference": plan.names[reference], "members": 2},
        reported=reported,
        reasons=reasons,
    )


def fairness_table(
    plan: SlicePlan,
    sources: Sequence[Mapping[str, MetricSource]],
    model_names: Sequence[str],
    *,
    headline: Sequence[str | None],
    references: Mapping[int, int],
    confidence: float,
) -> pd.DataFrame:
    """The ``fairness`` table (:data:`.columns.FAIRNESS_COLUMNS`), ordered by model, family, statistic.

    Parameters
    ----------
    plan : SlicePlan
    sources : sequence (one per model) of mapping of metric name to MetricSource
        At least the selection rate, the true and false positive rates and the false negative rate
        (:func:`metric_sources`), and each model's headline metric.
    model_names : sequence of str
    headline : sequence of str or None
        The headline metric of each model (its ``largest_gap``; none when None).
    references : mapping of int to int
        Family index -> reference slice (:func:`resolve_references`); other families use their
        largest slice in rows (the first of equals).
    confidence : float
        Level of the percentile intervals.

    Returns
    -------
    pandas.DataFrame
        Per model and family: the demographic-parity difference and ratio, the equalized-odds
        difference and ratio, the largest gap of the headline metric (``slice`` the slice with the
        largest value, ``reference`` the one with the smallest), then each slice's disparity ratio
        of the selection rate, false positive rate and false negative rate (``slice`` over
        ``reference``).
    """
    counts = plan.slice_counts()
    rows: list[dict] = []
    for m, model in enumerate(model_names):
        source = sources[m]
        for f, family in enumerate(plan.families):
            if f == 0:
                continue
            ids = family.slice_ids
            reference = references.get(f, int(ids[int(np.argmax(counts[ids]))]))
            base = {"model": model, "attribute": family.name}
            ppr = source["predicted_positive_rate"]
            members = ids[ppr.reported[ids]]
            for name, kind in (("demographic_parity_difference", "difference"), ("demographic_parity_ratio", "ratio")):
                rows += _spread(name, ppr, members, plan, metric="predicted_positive_rate", confidence=confidence,
                                base=base, kind=kind)  # fmt: skip
            rows += _equalized_odds(source["sensitivity"], source["false_positive_rate"], ids, plan,
                                    confidence=confidence, base=base)  # fmt: skip
            if headline[m] is not None and headline[m] in source:
                h = source[headline[m]]
                rows += _spread("largest_gap", h, ids[h.reported[ids]], plan, metric=headline[m],
                                confidence=confidence, base=base, kind="difference")  # fmt: skip
            for metric in vocabulary.DISPARITY_METRICS:
                rows += _disparities(source[metric], ids, reference, plan, metric=metric, confidence=confidence,
                                     base=base)  # fmt: skip
    if not rows:
        return pd.DataFrame({c: [] for c in FAIRNESS_COLUMNS})
    table = pd.DataFrame(rows)[list(FAIRNESS_COLUMNS)]
    for column in ("disparity", "interval_outside", "reported"):
        table[column] = table[column].astype(bool)
    for column in ("members", "n_undefined"):
        table[column] = table[column].astype(np.int64)
    return table
