"""One record per metric and per fairness statistic: every per-metric table of the package derives from here.

A metric's name, display label, direction, whether it needs a score, the per-row sums the engine
accumulates for it, what kind of quantity it is (a proportion of outcome categories, a ratio of two
sums, the mean of two proportions, or none of these), its interval on a slice, the design of its
permutation test, the denominator of its minimum-size rule, the fairness statistics it enters and
whether the paper's pipeline and the audit's default list compute it are written once, in its
:class:`MetricRecord` (:data:`METRIC_RECORDS`). The vocabulary's name lists and labels
(:mod:`disaggregated_eval.vocabulary`), the engine's proportions, ratios of sums and row terms
(:mod:`disaggregated_eval.engine.sums`), the interval methods (:mod:`disaggregated_eval.intervals`),
the permutation designs (:mod:`disaggregated_eval.audit.comparisons`) and the minimum-size
denominators (:mod:`disaggregated_eval.audit.withheld`) are read off these records.

The statistics of the audit's fairness summary have records of their own
(:class:`FairnessStatistic`, :data:`FAIRNESS_RECORDS`): name, display labels, kind (a difference, whose
equality value is 0, or a ratio, 1) and whether it is an extreme over a family of slices or a ratio of
one slice to a reference.

Two checks run when the package is imported, so that an incomplete record fails at import, not as a
``KeyError`` late in an audit: :func:`check_metric_records` (here: every field present and consistent,
e.g. a Wilson interval only for a proportion, a test design and a denominator for every metric that
is not a proportion), and :func:`disaggregated_eval.engine.sums.check_engine_records` (in the engine:
every record has its slot and its formula in :func:`~disaggregated_eval.engine.sums.metrics_from_sums`,
every engine slot a record, every sum a record names exists). ``docs/design.md``, "Adding a metric",
lists the files a new metric touches.

This module imports nothing but the standard library: ``workflow/rules/common.smk`` and the
Snakefile's parse import the vocabulary, which reads its name lists from here.

Sources: paper Supplementary A.3 (the metrics); ``docs/method.md``, "Metrics" (definitions) and
"Intervals and tests of the practitioner's audit" (interval methods, permutation designs);
``docs/audit.md``, "What is computed" (withholding: the denominators) and "Fairness summary".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

__all__ = [
    "CATEGORIES",
    "INTERVAL_KINDS",
    "PERMUTATION_STRATA",
    "TEST_SCALES",
    "DENOMINATORS",
    "DENOMINATOR_OF_CATEGORIES",
    "MetricRecord",
    "METRIC_RECORDS",
    "METRIC_REGISTRY",
    "FairnessStatistic",
    "FAIRNESS_RECORDS",
    "FAIRNESS_REGISTRY",
    "RegistryError",
    "check_metric_records",
    "check_fairness_records",
    "check_metric_names",
]

#: The four outcome categories of a row (label ``y``, prediction ``yhat = 1[r >= threshold]``), in the
#: order of their codes 0-3 (``2 y + yhat``; :func:`disaggregated_eval.engine.sums.categories`).
CATEGORIES: tuple[str, ...] = ("TN", "FP", "FN", "TP")
_ALL_ROWS: tuple[str, ...] = CATEGORIES

#: Interval methods of a metric on one slice (``docs/method.md``, "Intervals"): ``wilson`` (Wilson's
#: score interval on the slice's counts: a proportion), ``auc_score`` (Newcombe's score-type interval of
#: the AUC), ``bca`` (bias-corrected and accelerated bootstrap with the jackknife of a ratio of sums),
#: ``mover_wilson`` (the MOVER interval of a mean of independent proportions from their Wilson bounds).
INTERVAL_KINDS: tuple[str, ...] = ("wilson", "auc_score", "bca", "mover_wilson")
#: Strata within which a permutation test permutes slice membership: none, the label, or bins of the score.
PERMUTATION_STRATA: tuple[str | None, ...] = (None, "label", "score")
#: Scales of the large-sample test of a difference between slices (``bootstrap z``): ``linear`` (the
#: difference itself) or ``log`` (the difference of the logarithms, for a ratio whose sampling distribution
#: is skewed on the linear scale: the observed/expected ratio).
TEST_SCALES: tuple[str, ...] = ("linear", "log")
#: The count a metric's minimum-denominator rule reads (``rows``: the slice's rows, whose rule is
#: ``min_group_size``; ``smaller class``: the fewer of positives and negatives).
DENOMINATORS: tuple[str, ...] = ("rows", "positives", "negatives", "predicted positives", "smaller class")
#: The denominator of a proportion, from its denominator's categories.
DENOMINATOR_OF_CATEGORIES: dict[frozenset[str], str] = {
    frozenset(("TP", "FN")): "positives",
    frozenset(("TN", "FP")): "negatives",
    frozenset(("TP", "FP")): "predicted positives",
    frozenset(_ALL_ROWS): "rows",
}


class RegistryError(ValueError):
    """A metric or fairness-statistic record is incomplete or inconsistent (raised at import)."""


@dataclass(frozen=True)
class MetricRecord:
    """Everything the package knows about one metric, as data.

    Attributes
    ----------
    name : str
        The metric's name in every table and option (``docs/method.md``, "Metrics").
    label : str
        Display name in figures, reports and the terminal.
    higher_is_better : bool or None
        Whether a larger value is better; None for a descriptive rate without a direction.
    interval : str
        Interval method on a slice, one of :data:`INTERVAL_KINDS`.
    needs_score : bool
        Whether the metric reads the score beyond its side of the threshold (left out for 0/1
        predictions; the engine may merge rows with equal predictions otherwise).
    terms : tuple of str
        The per-row additive sums it needs beyond the structural ones (names of
        :data:`disaggregated_eval.engine.sums.ROW_TERMS`).
    proportion : (tuple of str, tuple of str) or None
        A proportion's numerator and denominator categories (:data:`CATEGORIES`): the weighted share
        of the numerator's rows among the denominator's. Its permutation test permutes membership
        among the denominator's rows, and its minimum-size denominator is the denominator's count
        (:data:`DENOMINATOR_OF_CATEGORIES`).
    ratio_of_sums : (str, str) or None
        A ratio ``sum w a / sum w b`` of per-row values (names of
        :data:`disaggregated_eval.engine.sums.ROW_VALUES`): the inputs of its jackknife (BCa).
    mean_of : tuple of str
        For the mean of proportions over disjoint rows (independent given their counts), the
        proportions' names: the inputs of the ``mover_wilson`` interval.
    permuted_among : tuple of str or None
        For a metric that is not a proportion, the categories of the rows among which its test
        permutes slice membership.
    permuted_within : str or None
        Strata of the permutation (:data:`PERMUTATION_STRATA`).
    denominator : str or None
        For a metric that is not a proportion, the count of its minimum-size rule (:data:`DENOMINATORS`).
    test_scale : str
        Scale of the large-sample test of its differences (:data:`TEST_SCALES`): ``log`` tests
        ``log(a) - log(b)`` with the bootstrap's standard error of that log ratio.
    fairness : tuple of str
        The fairness statistics (:data:`FAIRNESS_RECORDS`) that read the metric.
    pipeline : bool
        Whether the paper's pipeline tables carry it.
    audit_default : bool
        Whether the audit computes it by default (others through ``--metrics``).
    """

    name: str
    label: str
    _: KW_ONLY
    higher_is_better: bool | None
    interval: str
    needs_score: bool = False
    terms: tuple[str, ...] = ()
    proportion: tuple[tuple[str, ...], tuple[str, ...]] | None = None
    ratio_of_sums: tuple[str, str] | None = None
    mean_of: tuple[str, ...] = ()
    permuted_among: tuple[str, ...] | None = None
    permuted_within: str | None = None
    denominator: str | None = None
    test_scale: str = "linear"
    fairness: tuple[str, ...] = ()
    pipeline: bool = False
    audit_default: bool = True

    @property
    def design(self) -> tuple[tuple[str, ...], str | None]:
        """The permutation test's design: (categories permuted among, strata)."""
        if self.proportion is not None:
            return self.proportion[1], None
        return self.permuted_among or (), self.permuted_within

    @property
    def size_denominator(self) -> str:
        """The count of the minimum-size rule (:data:`DENOMINATORS`)."""
        if self.proportion is not None:
            return DENOMINATOR_OF_CATEGORIES.get(frozenset(self.proportion[1]), "")
        return self.denominator or ""


@dataclass(frozen=True)
class FairnessStatistic:
    """One statistic of the audit's fairness summary (``docs/method.md``, "Fairness summary").

    Attributes
    ----------
    name : str
        The ``statistic`` column's value.
    label : str
        Display name (report, notebook).
    short_label : str
        Terminal name.
    kind : {"difference", "ratio"}
        A difference of rates (equal slices: 0) or a ratio (equal slices: 1).
    over : {"family", "pair"}
        An extreme over a family's reported slices, or one slice over its family's reference slice.
    """

    name: str
    label: str
    short_label: str
    _: KW_ONLY
    kind: str
    over: str

    @property
    def equality(self) -> float:
        """The statistic's value when the slices are equal: 0 for a difference, 1 for a ratio."""
        return 0.0 if self.kind == "difference" else 1.0


# ----------------------------------------------------------------------------------------------
# The records
# ----------------------------------------------------------------------------------------------
_DP = ("demographic_parity_difference", "demographic_parity_ratio")
_EO = ("equalized_odds_difference", "equalized_odds_ratio")

#: Every metric, in canonical order (the order of :data:`disaggregated_eval.vocabulary.METRICS`).
METRIC_RECORDS: tuple[MetricRecord, ...] = (
    MetricRecord(
        "log_loss", "Log loss", higher_is_better=False, interval="bca", needs_score=True, terms=("log_loss",),
        ratio_of_sums=("log_loss", "one"), permuted_among=_ALL_ROWS, denominator="rows", pipeline=True,
    ),
    MetricRecord(
        "auc", "AUC-ROC", higher_is_better=True, interval="auc_score", needs_score=True,
        permuted_among=_ALL_ROWS, permuted_within="label", denominator="smaller class", pipeline=True,
    ),
    MetricRecord(
        "sensitivity", "Sensitivity", higher_is_better=True, interval="wilson",
        proportion=(("TP",), ("TP", "FN")), fairness=_EO, pipeline=True,
    ),
    MetricRecord(
        "specificity", "Specificity", higher_is_better=True, interval="wilson",
        proportion=(("TN",), ("TN", "FP")), pipeline=True,
    ),
    MetricRecord(
        "precision", "Precision", higher_is_better=True, interval="wilson",
        proportion=(("TP",), ("TP", "FP")), pipeline=True,
    ),
    MetricRecord(
        "net_benefit", "Net benefit", higher_is_better=True, interval="bca",
        ratio_of_sums=("net_benefit", "one"), permuted_among=_ALL_ROWS, denominator="rows", pipeline=True,
    ),
    MetricRecord(
        "label_rate", "Label rate", higher_is_better=None, interval="wilson",
        proportion=(("TP", "FN"), _ALL_ROWS), pipeline=True,
    ),
    MetricRecord(
        "predicted_positive_rate", "Predicted positive rate", higher_is_better=None, interval="wilson",
        proportion=(("TP", "FP"), _ALL_ROWS), fairness=(*_DP, "disparity_ratio"), pipeline=True,
    ),
    MetricRecord(
        "accuracy", "Accuracy", higher_is_better=True, interval="wilson",
        proportion=(("TP", "TN"), _ALL_ROWS),
    ),
    MetricRecord(
        "false_positive_rate", "False positive rate", higher_is_better=False, interval="wilson",
        proportion=(("FP",), ("TN", "FP")), fairness=(*_EO, "disparity_ratio"),
    ),
    MetricRecord(
        "false_negative_rate", "False negative rate", higher_is_better=False, interval="wilson",
        proportion=(("FN",), ("TP", "FN")), fairness=("disparity_ratio",),
    ),
    MetricRecord(
        "brier_score", "Brier score", higher_is_better=False, interval="bca", needs_score=True, terms=("brier",),
        ratio_of_sums=("brier", "one"), permuted_among=_ALL_ROWS, denominator="rows",
    ),
    MetricRecord(
        "mean_predicted_risk", "Mean predicted risk", higher_is_better=None, interval="bca", needs_score=True,
        terms=("score",), ratio_of_sums=("score", "one"), permuted_among=_ALL_ROWS, denominator="rows",
    ),
    # Calibration in the large: among rows of (nearly) the same score, the outcome does not depend on
    # the slice. Permuting all rows would also move the slice's scores, whose distribution may differ
    # between slices under that null, and reject it far too often (24-29% at 5% in the validity
    # study's sufficiency null); so membership is permuted within bins of the score.
    MetricRecord(
        "observed_expected_ratio", "Observed/expected ratio", higher_is_better=None, interval="bca",
        needs_score=True, terms=("score",), ratio_of_sums=("label", "score"), permuted_among=_ALL_ROWS,
        permuted_within="score", denominator="rows", test_scale="log",
    ),
    # The mean of the two class rates (scikit-learn's balanced_accuracy_score): its null "the slice's
    # rows of each class are exchangeable with the other rows of that class" is the AUC's.
    MetricRecord(
        "balanced_accuracy", "Balanced accuracy", higher_is_better=True, interval="mover_wilson",
        mean_of=("sensitivity", "specificity"), permuted_among=_ALL_ROWS, permuted_within="label",
        denominator="smaller class", audit_default=False,
    ),
)  # fmt: skip

#: Every fairness statistic, in the order the summary shows them.
FAIRNESS_RECORDS: tuple[FairnessStatistic, ...] = (
    FairnessStatistic("demographic_parity_difference", "Demographic parity difference", "DP difference",
                      kind="difference", over="family"),
    FairnessStatistic("demographic_parity_ratio", "Demographic parity ratio", "DP ratio", kind="ratio", over="family"),
    FairnessStatistic("equalized_odds_difference", "Equalized odds difference", "EO difference",
                      kind="difference", over="family"),
    FairnessStatistic("equalized_odds_ratio", "Equalized odds ratio", "EO ratio", kind="ratio", over="family"),
    FairnessStatistic("largest_gap", "Largest gap", "largest gap", kind="difference", over="family"),
    FairnessStatistic("disparity_ratio", "Disparity ratio", "disparity ratio", kind="ratio", over="pair"),
)  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Checks (run at import)
# ----------------------------------------------------------------------------------------------
def _categories(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, tuple) or not value or not set(value) <= set(CATEGORIES) or len(set(value)) != len(value):
        raise RegistryError(f"{what} must be a tuple of distinct categories from {CATEGORIES}; got {value!r}")
    return value


def _check_one(record: MetricRecord, names: Mapping[str, MetricRecord], fairness: Sequence[str]) -> None:
    """Every field of one record present and consistent (see :func:`check_metric_records`)."""
    what = f"metric record {record.name!r}"
    if not record.label:
        raise RegistryError(f"{what} has no label")
    if record.higher_is_better not in (True, False, None):
        raise RegistryError(f"{what}: higher_is_better must be True, False or None; got {record.higher_is_better!r}")
    if record.interval not in INTERVAL_KINDS:
        raise RegistryError(f"{what}: interval must be one of {INTERVAL_KINDS}; got {record.interval!r}")
    kinds = [k for k in ("proportion", "ratio_of_sums", "mean_of") if getattr(record, k)]
    if len(kinds) > 1:
        raise RegistryError(f"{what} is at most one of a proportion, a ratio of sums or a mean of proportions; "
                            f"got {kinds}")  # fmt: skip
    if record.proportion is not None:
        if not (isinstance(record.proportion, tuple) and len(record.proportion) == 2):
            raise RegistryError(f"{what}: proportion must be (numerator categories, denominator categories)")
        num = _categories(record.proportion[0], f"{what}: the proportion's numerator")
        den = _categories(record.proportion[1], f"{what}: the proportion's denominator")
        if not set(num) < set(den):
            raise RegistryError(f"{what}: the numerator's categories {num} must be a proper subset of the "
                                f"denominator's {den}")  # fmt: skip
        if frozenset(den) not in DENOMINATOR_OF_CATEGORIES:
            known = [sorted(k) for k in DENOMINATOR_OF_CATEGORIES]
            raise RegistryError(f"{what}: no minimum-size rule for the denominator {den}; known: {known}")
        if record.permuted_among is not None or record.permuted_within is not None or record.denominator is not None:
            raise RegistryError(f"{what}: a proportion's test design and denominator follow from its categories; "
                                "give neither permuted_among, permuted_within nor denominator")  # fmt: skip
    else:
        _categories(record.permuted_among, f"{what}: permuted_among (the rows its permutation test permutes among)")
        if record.denominator not in DENOMINATORS:
            raise RegistryError(f"{what}: denominator (of the minimum-size rule) must be one of {DENOMINATORS}; "
                                f"got {record.denominator!r}")  # fmt: skip
    if record.test_scale not in TEST_SCALES:
        raise RegistryError(f"{what}: test_scale must be one of {TEST_SCALES}; got {record.test_scale!r}")
    if record.permuted_within not in PERMUTATION_STRATA:
        raise RegistryError(
            f"{what}: permuted_within must be one of {PERMUTATION_STRATA}; got {record.permuted_within!r}"
        )
    if (record.interval == "wilson") != (record.proportion is not None):
        raise RegistryError(f"{what}: the 'wilson' interval is the proportions' (and theirs only); got interval "
                            f"{record.interval!r} for {'a' if record.proportion else 'no'} proportion")  # fmt: skip
    if record.interval == "bca" and record.ratio_of_sums is None:
        raise RegistryError(f"{what}: the 'bca' interval needs ratio_of_sums (the values of its jackknife)")
    if record.ratio_of_sums is not None and not (
        isinstance(record.ratio_of_sums, tuple) and len(record.ratio_of_sums) == 2
    ):
        raise RegistryError(f"{what}: ratio_of_sums must be (numerator values, denominator values)")
    if (record.interval == "mover_wilson") != bool(record.mean_of):
        raise RegistryError(f"{what}: the 'mover_wilson' interval is that of a mean of proportions (mean_of), "
                            f"and theirs only; got interval {record.interval!r}, mean_of {record.mean_of!r}")  # fmt: skip
    if record.mean_of:
        parts = [names.get(p) for p in record.mean_of]
        if len(parts) < 2 or any(p is None or p.proportion is None for p in parts):
            raise RegistryError(f"{what}: mean_of must name at least two proportion metrics; got {record.mean_of!r}")
        seen: set[str] = set()
        for part in parts:
            if seen & set(part.proportion[1]):
                raise RegistryError(f"{what}: the proportions of mean_of must have disjoint denominators "
                                    f"(independent parts); got {record.mean_of!r}")  # fmt: skip
            seen |= set(part.proportion[1])
    unknown = [f for f in record.fairness if f not in fairness]
    if unknown:
        raise RegistryError(f"{what}: unknown fairness statistics {unknown}; expected some of {tuple(fairness)}")
    for flag in ("needs_score", "pipeline", "audit_default"):
        if not isinstance(getattr(record, flag), bool):
            raise RegistryError(f"{what}: {flag} must be True or False; got {getattr(record, flag)!r}")
    if not isinstance(record.terms, tuple) or not all(isinstance(t, str) for t in record.terms):
        raise RegistryError(f"{what}: terms must be a tuple of row-term names; got {record.terms!r}")


def check_metric_records(records: Sequence[MetricRecord], fairness: Sequence[FairnessStatistic] | None = None) -> None:
    """Check that every metric record is complete and consistent.

    Parameters
    ----------
    records : sequence of MetricRecord
        The registry to check (:data:`METRIC_RECORDS` at import; a modified copy in tests).
    fairness : sequence of FairnessStatistic, optional
        The fairness statistics the records may name (default :data:`FAIRNESS_RECORDS`).

    Raises
    ------
    RegistryError
        Naming the record and the field: a name repeated or not an identifier; a missing label,
        direction or interval method; a proportion without valid categories, or one that restates
        what its categories imply (test design, denominator); a metric that is not a proportion
        without a permutation design or a minimum-size denominator; an interval method that does not
        fit the metric (``wilson`` for a non-proportion, ``bca`` without the values of its
        jackknife, ``mover_wilson`` without independent proportions to average); an unknown fairness
        statistic; no metric in the pipeline or the audit's default list.

    Notes
    -----
    What the engine must provide for each record (a slot, a formula, its sums) is checked by
    :func:`disaggregated_eval.engine.sums.check_engine_records` when the engine is imported.
    """
    statistics = [s.name for s in (FAIRNESS_RECORDS if fairness is None else fairness)]
    names: dict[str, MetricRecord] = {}
    for record in records:
        if not isinstance(record, MetricRecord):
            raise RegistryError(f"the metric registry holds MetricRecord objects; got {type(record).__name__}")
        if not (isinstance(record.name, str) and record.name.isidentifier() and record.name.islower()):
            raise RegistryError(f"a metric name must be a lower-case identifier; got {record.name!r}")
        if record.name in names:
            raise RegistryError(f"metric {record.name!r} has two records")
        names[record.name] = record
    for record in records:
        _check_one(record, names, statistics)
    for flag in ("pipeline", "audit_default"):
        if not any(getattr(r, flag) for r in records):
            raise RegistryError(f"no metric record has {flag}=True")


def check_fairness_records(records: Sequence[FairnessStatistic]) -> None:
    """Check the fairness statistics' records: distinct names, labels, a known kind and scope.

    Raises
    ------
    RegistryError
        Naming the record and the field.
    """
    seen: set[str] = set()
    for record in records:
        what = f"fairness statistic {record.name!r}"
        if not record.name or record.name in seen:
            raise RegistryError(f"{what}: names must be distinct and non-empty")
        seen.add(record.name)
        if not (record.label and record.short_label):
            raise RegistryError(f"{what} needs a label and a short label")
        if record.kind not in ("difference", "ratio"):
            raise RegistryError(f"{what}: kind must be 'difference' or 'ratio'; got {record.kind!r}")
        if record.over not in ("family", "pair"):
            raise RegistryError(f"{what}: over must be 'family' or 'pair'; got {record.over!r}")


check_fairness_records(FAIRNESS_RECORDS)
check_metric_records(METRIC_RECORDS)

#: Metric name -> its record.
METRIC_REGISTRY: dict[str, MetricRecord] = {r.name: r for r in METRIC_RECORDS}
#: Fairness statistic name -> its record.
FAIRNESS_REGISTRY: dict[str, FairnessStatistic] = {s.name: s for s in FAIRNESS_RECORDS}
_METRIC_NAMES: tuple[str, ...] = tuple(METRIC_REGISTRY)


def check_metric_names(metrics: Any, name: str = "metrics") -> tuple[str, ...]:
    """Metric names as a tuple: known (records of :data:`METRIC_RECORDS`), distinct, at least one.

    Parameters
    ----------
    metrics : sequence of str
        Requested metric names, in the order the caller wants them.
    name : str, default "metrics"
        How the argument is named in messages.

    Returns
    -------
    tuple of str

    Raises
    ------
    TypeError
        If ``metrics`` is a single string (``"auc"`` is not ``("auc",)``).
    ValueError
        If it is empty, names an unknown metric or repeats one.
    """
    if isinstance(metrics, str):
        raise TypeError(f"{name} must be a sequence of metric names, not a string; did you mean ({metrics!r},)?")
    names = tuple(metrics)
    if not names:
        raise ValueError(f"{name} must name at least one metric; expected some of {_METRIC_NAMES}")
    for metric in names:
        if metric not in METRIC_REGISTRY:
            raise ValueError(f"unknown metric {metric!r} in {name}; expected one of {_METRIC_NAMES}")
    if len(set(names)) != len(names):
        from .validation import repeated  # the error path only: this module imports the standard library

        duplicates = sorted(repeated(names))
        raise ValueError(f"{name} must be distinct; got duplicates {duplicates}")
    return names
