"""The fairness summary of an audit: the disparity statistics that fairlearn's and Aequitas' users expect.

For each model and each family of slices (an attribute, or an intersection of attributes), from the
slices' counts and the audit's paired bootstrap (:mod:`.estimates`), with the library's inference for
extremes (:mod:`disaggregated_eval.derived`: intervals valid when the slices are equal):

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
statistics are those of the reported slices. fairlearn and Aequitas include every group: their numbers
are in ``raw_estimate``, each family statistic over every slice of the family that has a value,
withheld ones included (:func:`disaggregated_eval.derived.plug_in_extreme`; a point estimate, no
interval), and each disparity ratio whether or not its slice or reference is withheld. The point
estimates equal fairlearn's and Aequitas' on the same groups (``tests/test_audit_fairness.py``).

Every statistic has three readings: its estimate (and a bootstrap bias-corrected estimate for the
extremes, whose plug-in is biased away from equality on small slices), its interval (``ci_low``,
``ci_high``: the statistic read alone, at ``confidence``), and its band (``band_low``, ``band_high``:
simultaneous over every statistic of the audit's fairness summary, every model and family at once).
The verdict (:mod:`disaggregated_eval.verdicts`: ``differs``, ``within tolerance``, ``beyond
tolerance``, ``inconclusive``) is read off the band, so the probability that any verdict of the
summary is false is at most ``1 - confidence``. Definitions: ``docs/method.md``, "Fairness summary".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from .. import vocabulary
from ..derived import (
    Extreme,
    PairRatios,
    Replicated,
    SliceRates,
    complement,
    demographic_parity,
    equalized_odds,
    largest_gap,
    plug_in_extreme,
    simultaneous_level,
    take,
)
from ..intervals import degenerate
from ..registry import FAIRNESS_REGISTRY, METRIC_RECORDS
from ..verdicts import DEFAULT_TOLERANCE, Tolerance, gap_verdict, ratio_verdict, spread_ratio_verdict
from .columns import FAIRNESS_COLUMNS
from .estimates import AuditEstimates
from .slices import FAMILY_SEPARATOR, SlicePlan

__all__ = [
    "FAIRNESS_METRICS",
    "MetricSource",
    "resolve_references",
    "slice_values",
    "metric_sources",
    "missing_fairness_metrics",
    "fairness_table",
    "reference_notes",
]

#: The metrics the fairness summary reads (their records' ``fairness``; the true positive rate is
#: ``sensitivity``, and either it or the false negative rate is enough, the other is its complement).
FAIRNESS_METRICS: tuple[str, ...] = tuple(r.name for r in METRIC_RECORDS if r.fairness)
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
    size : ndarray of shape (n_slices,), optional
        For a proportion, each slice's effective denominator (Kish's size; rows without sample
        weights): its pairs get score intervals from the counts. None for other metrics.
    complement : bool
        Whether the metric is ``1 - values`` (the true positive rate from the false negative rate).
    """

    values: Replicated
    rows: np.ndarray
    reported: np.ndarray
    reasons: np.ndarray
    size: np.ndarray | None = None
    complement: bool = False

    def of(self, slices: np.ndarray) -> Replicated:
        """The metric on ``slices`` (global slice indices, shape (k,)): point (k,), replicates (n_resamples, k)."""
        x = take(self.values, self.rows[np.asarray(slices, dtype=np.int64)])
        return complement(x) if self.complement else x

    def points(self, slices: np.ndarray) -> np.ndarray:
        """The metric's point estimates on ``slices`` (global slice indices, shape (k,)), reported or not; no replicates."""
        point = np.asarray(self.values.point, dtype=np.float64)[self.rows[np.asarray(slices, dtype=np.int64)]]
        return 1.0 - point if self.complement else point

    def rates(self, slices: np.ndarray) -> SliceRates:
        """The metric on ``slices`` as the family statistics of :mod:`disaggregated_eval.derived` take it."""
        x = self.of(slices)
        size = (
            None if self.size is None else np.asarray(self.size, dtype=np.float64)[np.asarray(slices, dtype=np.int64)]
        )
        return SliceRates(estimate=np.asarray(x.point, dtype=np.float64), replicates=x.replicates, size=size)

    def ratios(self, slices: np.ndarray, reference: int) -> PairRatios:
        """Each of ``slices``' (global slice indices, shape (k,)) proportion over ``slices[reference]``'s, its
        replicates read in blocks of slices (never all of them at once)."""
        slices = np.asarray(slices, dtype=np.int64)
        point = self.values.point[self.rows[slices]]
        size = np.asarray(self.size, dtype=np.float64)[slices]
        return PairRatios(np.asarray(1.0 - point if self.complement else point, dtype=np.float64), size, reference,
                          lambda idx: self.of(slices[idx]).replicates, int(np.shape(self.values.replicates)[0]))  # fmt: skip


# ----------------------------------------------------------------------------------------------
# the reference slices (the option ``reference``, parsed by :func:`.options.parse_references`)
# ----------------------------------------------------------------------------------------------
def resolve_references(plan: SlicePlan, references: Sequence[str]) -> dict[int, int]:
    """Family index -> slice index of each reference slice (from :func:`.options.parse_references`'s names).

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
    estimates: AuditEstimates,
    reasons: np.ndarray,
    metrics: Sequence[str],
    model: int,
    sizes: Mapping[str, np.ndarray] | None = None,
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
    sizes : mapping of str to ndarray of shape (n_models, n_slices), optional
        Effective denominators of the proportions (:meth:`.tallies.SliceTallies.proportion`); metrics
        without an entry get percentile intervals of their paired differences.
    """
    out = {}
    for q, metric in enumerate(metrics):
        why = np.asarray(reasons[model, :, q]).astype(object)
        values, rows = slice_values(estimates, model, q)
        size = None if sizes is None or metric not in sizes else np.asarray(sizes[metric])[model]
        out[metric] = MetricSource(values, rows, why == "", why, size=size)
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
#: ``interval`` of the extremes (gaps and min/max ratios) and of the disparity ratios.
INTERVAL_EXTREME = "intersection_bounds"
INTERVAL_RATIO = "mover_r"


#: The verdict of each kind of statistic (its record's ``kind`` and ``over``), from its band.
_VERDICTS = {
    ("difference", "family"): gap_verdict,
    ("ratio", "family"): spread_ratio_verdict,
    ("ratio", "pair"): ratio_verdict,
}


@dataclass(frozen=True)
class _Claim:
    """One row of the table: how to build its statistic (twice: for its interval, then for the band)."""

    base: dict
    build: Any  # () -> Extreme | None
    reported: bool
    reason: str
    members: tuple[str, ...] = ()  # an extreme's slices, in the order the statistic holds them


@dataclass(frozen=True)
class _Ratios:
    """The disparity ratios of one model, family and metric: a row per slice but the reference, built at once."""

    base: dict
    ratios: PairRatios
    slices: np.ndarray  # indices into ``ratios``' slices: every one but the reference, in the family's order
    names: list[str]
    reference: str
    reported: np.ndarray
    reasons: list[str]

    @property
    def used(self) -> np.ndarray:
        """The ratios that take part in the band (reported, with a finite estimate), as indices into ``slices``."""
        return np.flatnonzero(self.reported & np.isfinite(self.ratios.ratio[self.slices]))


def _row(claim: _Claim, statistic: Extreme | None, ci: tuple[float, float], band: tuple[float, float],
         tolerance: Tolerance) -> dict:  # fmt: skip
    """The table row of a claim, from its statistic, interval and band."""
    record = dict(claim.base)
    if statistic is None or not claim.reported:
        estimate = bias = np.nan
        n_undefined = 0 if statistic is None else int(np.sum(~np.isfinite(statistic.replicates)))
    else:
        estimate = statistic.estimate
        bias = statistic.bias_corrected()
        n_undefined = int(np.sum(~np.isfinite(statistic.replicates)))
    if statistic is not None and (attained := statistic.attained_by()) is not None:
        record["slice"], record["reference"] = claim.members[attained[1]], claim.members[attained[2]]
    caveat = ""
    if statistic is not None and np.isfinite(estimate):
        reps = statistic.replicates
        if bool(degenerate(reps[:, None])[0]) and ci[1] - ci[0] <= 0.0:
            caveat = vocabulary.CAVEAT_DEGENERATE
    elif statistic is not None and claim.reported and not np.isfinite(estimate):
        caveat = vocabulary.CAVEAT_UNDEFINED
    definition = FAIRNESS_REGISTRY[claim.base["statistic"]]
    verdict = _VERDICTS[definition.kind, definition.over](*band, tolerance)
    if not claim.reported or caveat:
        verdict = ""
    record.update(
        estimate=float(estimate),
        bias_corrected=float(bias),
        ci_low=float(ci[0]),
        ci_high=float(ci[1]),
        band_low=float(band[0]),
        band_high=float(band[1]),
        interval=INTERVAL_EXTREME,
        disparity=bool(
            definition.kind == "ratio" and np.isfinite(estimate) and not _within_four_fifths(estimate, tolerance)
        ),
        verdict=verdict,
        n_undefined=n_undefined,
        reported=bool(claim.reported),
        reason=str(claim.reason),
        caveat=caveat,
    )
    return record


def _within_four_fifths(estimate, tolerance: Tolerance):
    """Whether a ratio lies in the four-fifths band (or the tolerance's ratio band)."""
    low_band, high_band = tolerance.ratio or vocabulary.FOUR_FIFTHS_BAND
    return (low_band <= estimate) & (estimate <= high_band)


def _ratio_rows(block: _Ratios, ci: tuple[np.ndarray, np.ndarray], band: tuple[np.ndarray, np.ndarray],
                tolerance: Tolerance) -> pd.DataFrame:  # fmt: skip
    """The table rows of one block of disparity ratios (what :func:`_row` gives a single claim)."""
    ratio = block.ratios.ratio[block.slices]
    estimate = np.where(block.reported, ratio, np.nan)
    undefined = block.reported & ~np.isfinite(ratio)
    band_low, band_high = band[0][block.slices], band[1][block.slices]
    verdicts = [
        "" if not reported or bad else ratio_verdict(low, high, tolerance)
        for reported, bad, low, high in zip(block.reported, undefined, band_low, band_high, strict=True)
    ]
    with np.errstate(invalid="ignore"):
        disparity = np.isfinite(estimate) & ~_within_four_fifths(estimate, tolerance)
    k = block.slices.shape[0]
    return pd.DataFrame(
        {
            **{key: [value] * k for key, value in block.base.items()},
            "slice": block.names,
            "reference": [block.reference] * k,
            "members": np.full(k, 2, dtype=np.int64),
            "estimate": estimate,
            "raw_estimate": ratio,
            "bias_corrected": np.full(k, np.nan),
            "ci_low": ci[0][block.slices],
            "ci_high": ci[1][block.slices],
            "band_low": band_low,
            "band_high": band_high,
            "interval": INTERVAL_RATIO,
            "disparity": disparity,
            "verdict": verdicts,
            "n_undefined": block.ratios.n_undefined(block.slices),
            "reported": block.reported,
            "reason": block.reasons,
            "caveat": np.where(undefined, vocabulary.CAVEAT_UNDEFINED, ""),
        }
    )


def _family_claims(
    plan: SlicePlan,
    source: Mapping[str, MetricSource],
    family_index: int,
    *,
    model: str,
    headline: str | None,
    reference: int,
) -> list[_Claim | _Ratios]:
    """Every row of one model's family: DP, EO, largest gap, then the disparity ratios (a block per metric)."""
    family = plan.families[family_index]
    ids = family.slice_ids
    base = {"model": model, "attribute": family.name}
    claims: list[_Claim | _Ratios] = []

    def spread(name: str, metric: str, members: np.ndarray, build, raw: float) -> None:
        """A family statistic's row (its ``slice`` and ``reference``: the slices that attain it; ``raw``: the
        statistic over every slice of the family, withheld ones included)."""
        record = {**base, "statistic": name, "metric": metric, "slice": "", "reference": "",
                  "members": int(members.size), "raw_estimate": raw}  # fmt: skip
        if members.size < 2:
            claims.append(_Claim(record, lambda: None, False, "fewer than 2 reported slices in the family"))
            return
        claims.append(_Claim(record, build, True, "", tuple(plan.names[s] for s in members)))

    ppr = source["predicted_positive_rate"]
    members = ids[ppr.reported[ids]]
    dp = lambda m=members: demographic_parity(ppr.rates(m))
    every = [ppr.points(ids)]
    spread("demographic_parity_difference", "predicted_positive_rate", members, lambda: dp()[0],
           plug_in_extreme("gap", every))  # fmt: skip
    spread("demographic_parity_ratio", "predicted_positive_rate", members, lambda: dp()[1],
           plug_in_extreme("ratio", every))  # fmt: skip

    tpr, fpr = source["sensitivity"], source["false_positive_rate"]
    both = ids[tpr.reported[ids] & fpr.reported[ids]]
    eo = lambda m=both: equalized_odds(tpr.rates(m), fpr.rates(m))
    every = [tpr.points(ids), fpr.points(ids)]
    spread("equalized_odds_difference", _EQUALIZED_ODDS, both, lambda: eo()[0], plug_in_extreme("gap", every))
    spread("equalized_odds_ratio", _EQUALIZED_ODDS, both, lambda: eo()[1], plug_in_extreme("ratio", every))

    if headline is not None and headline in source:
        h = source[headline]
        hm = ids[h.reported[ids]]
        spread(
            "largest_gap", headline, hm, lambda m=hm: largest_gap(h.rates(m)), plug_in_extreme("gap", [h.points(ids)])
        )

    position = int(np.flatnonzero(ids == reference)[0])
    others = np.flatnonzero(ids != reference)
    for metric in vocabulary.DISPARITY_METRICS:
        x = source[metric]
        slice_ok = x.reported[ids[others]]
        reasons = [
            "; ".join(part for part in (
                "" if ok else f"slice: {x.reasons[s]}",
                "" if x.reported[reference] else f"reference: {x.reasons[reference]}",
            ) if part)
            for ok, s in zip(slice_ok, ids[others], strict=True)
        ]  # fmt: skip
        claims.append(
            _Ratios(
                base={**base, "statistic": "disparity_ratio", "metric": metric},
                ratios=x.ratios(ids, position),
                slices=others,
                names=[plan.names[s] for s in ids[others]],
                reference=plan.names[reference],
                reported=slice_ok & bool(x.reported[reference]),
                reasons=reasons,
            )
        )
    return claims


def fairness_table(
    plan: SlicePlan,
    sources: Sequence[Mapping[str, MetricSource]],
    model_names: Sequence[str],
    *,
    headline: Sequence[str | None],
    references: Mapping[int, int],
    confidence: float,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
) -> pd.DataFrame:
    """The ``fairness`` table (:data:`.columns.FAIRNESS_COLUMNS`), ordered by model, family, statistic.

    Parameters
    ----------
    plan : SlicePlan
    sources : sequence (one per model) of mapping of metric name to MetricSource
        At least the selection rate, the true and false positive rates and the false negative rate
        (:func:`metric_sources`, with their sizes), and each model's headline metric.
    model_names : sequence of str
    headline : sequence of str or None
        The headline metric of each model (its ``largest_gap``; none when None).
    references : mapping of int to int
        Family index -> reference slice (:func:`resolve_references`); other families use their
        largest slice in rows (the first of equals).
    confidence : float
        Level of the intervals and of the band.
    tolerance : Tolerance
        The verdicts' tolerance (:mod:`disaggregated_eval.verdicts`).

    Returns
    -------
    pandas.DataFrame
        Per model and family: the demographic-parity difference and ratio, the equalized-odds
        difference and ratio, the largest gap of the headline metric (``slice`` the slice with the
        largest value, ``reference`` the one with the smallest), then each slice's disparity ratio
        of the selection rate, false positive rate and false negative rate (``slice`` over
        ``reference``). ``ci_low``/``ci_high`` read each statistic alone; ``band_low``/``band_high`` and
        ``verdict`` are simultaneous over every reported statistic of the table.

    Notes
    -----
    Two passes over the statistics: the first computes each one's interval and its bootstrap
    max-|t| (kept only as the running maximum over the table), the second its band at the common
    level (:func:`disaggregated_eval.derived.simultaneous_level` with tail ``1 - confidence``), so that
    no more than one statistic's replicates are held at a time. The disparity ratios of a family and
    metric are one block (:class:`disaggregated_eval.derived.PairRatios`): their intervals and bands come
    from the counts, their max-|t| and undefined counts from one pass over the family's replicates in
    blocks of slices, never a pass per ratio.
    """
    counts = plan.slice_counts()
    claims: list[_Claim | _Ratios] = []
    for m, model in enumerate(model_names):
        for f, family in enumerate(plan.families):
            if f == 0:
                continue
            ids = family.slice_ids
            reference = references.get(f, int(ids[int(np.argmax(counts[ids]))]))
            claims += _family_claims(plan, sources[m], f, model=model, headline=headline[m], reference=reference)
    if not claims:
        return pd.DataFrame({c: [] for c in FAIRNESS_COLUMNS})

    intervals: list = []
    running: np.ndarray | None = None
    exact = True
    n_quantities = 0
    for claim in claims:
        if isinstance(claim, _Ratios):
            intervals.append(claim.ratios.bounds(confidence))
            used = claim.used
            if used.size:
                n_quantities += int(used.size)
                t = claim.ratios.max_t(claim.slices[used])
                if exact:
                    running = t if running is None else np.maximum(running, t)
            continue
        statistic = claim.build()
        if statistic is None:
            intervals.append((np.nan, np.nan))
            continue
        t = statistic.max_t()
        intervals.append(statistic.interval(confidence, t))
        if not claim.reported or not np.isfinite(statistic.estimate):
            continue
        n_quantities += statistic.n_pairs
        if t is None:
            exact = False
        elif exact:
            running = t if running is None else np.maximum(running, t)
    level = simultaneous_level(running if exact else None, 1.0 - confidence, n_quantities)
    pieces: list[pd.DataFrame] = []
    rows: list[dict] = []
    for claim, ci in zip(claims, intervals, strict=True):
        if isinstance(claim, _Ratios):
            if rows:
                pieces.append(pd.DataFrame(rows))
                rows = []
            pieces.append(_ratio_rows(claim, ci, claim.ratios.bounds(level), tolerance))
            continue
        statistic = claim.build()
        band = statistic.band(level) if statistic is not None else (np.nan, np.nan)
        rows.append(_row(claim, statistic, ci, band, tolerance))
    if rows:
        pieces.append(pd.DataFrame(rows))
    table = pd.concat([piece[list(FAIRNESS_COLUMNS)] for piece in pieces if len(piece)], ignore_index=True)
    for column in ("disparity", "reported"):
        table[column] = table[column].astype(bool)
    for column in ("members", "n_undefined"):
        table[column] = table[column].astype(np.int64)
    return table


def reference_notes(
    plan: SlicePlan,
    sources: Sequence[Mapping[str, MetricSource]],
    model_names: Sequence[str],
    references: Mapping[int, int],
) -> list[str]:
    """A note for every reference slice named by the option ``reference`` whose rate is withheld (or that
    has no rows): every disparity ratio of its family and metric is withheld then.

    Returns
    -------
    list of str
        One note per model, reference and metric, naming the reason and what to do.
    """
    counts = plan.slice_counts()
    notes = []
    for f, s in references.items():
        name = plan.names[s]
        if counts[s] == 0:
            notes.append(
                f"reference {name!r} has no rows: every disparity ratio of the family {plan.families[f].name!r} is "
                f"withheld; name another slice with --reference"
            )
            continue
        for m, model in enumerate(model_names):
            for metric in vocabulary.DISPARITY_METRICS:
                source = sources[m][metric]
                if not source.reported[s]:
                    notes.append(
                        f"reference {name!r} of {model}: its {metric} is withheld ({source.reasons[s]}), so every "
                        f"disparity ratio of that rate in the family {plan.families[f].name!r} is withheld; name "
                        f"another slice with --reference"
                    )
    return notes
