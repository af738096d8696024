"""The audit's table layouts: the columns of every table of :class:`.result.AuditResult`, in order.

One home for each table's columns, imported by the module that fills the table, by
:mod:`.result` (which re-exports them as its public names) and by :mod:`.outputs`; it imports
nothing from the audit, so every other module can stand on it. Meanings of the columns:
``docs/audit.md``, "Output files".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from ..selection import RESULT_COLUMNS

__all__ = [
    "SLICE_COLUMNS",
    "WEIGHTED_SLICE_COLUMNS",
    "COMPARISON_COLUMNS",
    "COMPARISON_KINDS",
    "EXACT",
    "MONTE_CARLO",
    "BOOTSTRAP_Z",
    "TAIL_BOUND",
    "CONTROLLED_COLUMNS",
    "FAIRNESS_COLUMNS",
    "CALIBRATION_BIN_COLUMNS",
    "CALIBRATION_SUMMARY_COLUMNS",
    "THRESHOLD_COLUMNS",
    "DETECTABILITY_COLUMNS",
    "SELECTION_COLUMNS",
    "ANALYSIS_TABLES",
    "LEVEL_TABLES",
    "empty_table",
    "level_column_names",
    "table_columns",
    "with_levels",
]

#: Columns of :attr:`AuditResult.slices`, in order.
SLICE_COLUMNS: tuple[str, ...] = (
    "model",
    "slice",
    "attribute",
    "metric",
    "estimate",
    "raw_estimate",
    "ci_low",
    "ci_high",
    "band_low",
    "band_high",
    "interval",
    "n",
    "n_pos",
    "n_neg",
    "n_predicted_pos",
    "reported",
    "reason",
    "n_undefined",
    "caveat",
)

#: Columns of :attr:`AuditResult.slices` of an audit with sample weights, in order: :data:`SLICE_COLUMNS` with
#: ``n_effective`` (Kish's effective size of the slice's weights) after ``n_predicted_pos``. Without sample
#: weights it would equal ``n``, and the table has no such column.
WEIGHTED_SLICE_COLUMNS: tuple[str, ...] = (
    *SLICE_COLUMNS[: SLICE_COLUMNS.index("n_predicted_pos") + 1],
    "n_effective",
    *SLICE_COLUMNS[SLICE_COLUMNS.index("n_predicted_pos") + 1 :],
)

#: Columns of :attr:`AuditResult.comparisons`, in order.
COMPARISON_COLUMNS: tuple[str, ...] = (
    "model",
    "metric",
    "slice",
    "reference",
    "kind",
    "difference",
    "ci_low",
    "ci_high",
    "interval",
    "test",
    "p_value",
    "p_adjusted",
    "family_size",
    "tolerance",
    "p_within",
    "p_within_adjusted",
    "verdict",
    "n_undefined",
    "reported",
    "reason",
    "caveat",
    "note",
)

#: Values of the ``kind`` column of :attr:`AuditResult.comparisons`.
COMPARISON_KINDS: tuple[str, ...] = ("vs_overall", "vs_rest", "pairwise", "vs_model")

#: ``test`` of an exact permutation p-value from the hypergeometric distribution (an unweighted rate).
EXACT = "exact"
#: ``test`` of a Monte-Carlo permutation p-value (Besag and Clifford's sequential rule).
MONTE_CARLO = "monte carlo"
#: ``test`` of the large-sample z-test of a difference with the paired bootstrap's standard error.
BOOTSTRAP_Z = "bootstrap z"
#: ``test`` of an upper bound of the exact permutation p-value of a mean (Chernoff's bound of a sum without
#: replacement), given where it lies below the smallest threshold of the comparison's family.
TAIL_BOUND = "tail bound"
#: Columns of :attr:`AuditResult.controlled`, in order.
CONTROLLED_COLUMNS: tuple[str, ...] = (
    "model",
    "attribute",
    "slice",
    "control",
    "metric",
    "subgroup",
    "subgroup_low",
    "subgroup_high",
    "M_a",
    "M_a_low",
    "M_a_high",
    "T_a",
    "T_a_low",
    "T_a_high",
    "shared_space",
    "shared_space_low",
    "shared_space_high",
    "weight_method",
    "balance_smd",
    "effective_sample_size",
    "n_undefined",
    "reported",
    "reason",
)

#: Columns of :attr:`AuditResult.fairness` (the fairness summary), in order.
FAIRNESS_COLUMNS: tuple[str, ...] = (
    "model",
    "attribute",
    "statistic",
    "metric",
    "slice",
    "reference",
    "estimate",
    "raw_estimate",
    "bias_corrected",
    "ci_low",
    "ci_high",
    "band_low",
    "band_high",
    "interval",
    "members",
    "disparity",
    "verdict",
    "n_undefined",
    "reported",
    "reason",
    "caveat",
)

#: Columns of :attr:`AuditResult.calibration` (observed rate per score bin and slice), in order.
CALIBRATION_BIN_COLUMNS: tuple[str, ...] = (
    "model",
    "slice",
    "attribute",
    "bin",
    "score_low",
    "score_high",
    "n",
    "mean_predicted",
    "observed",
    "ci_low",
    "ci_high",
    "interval",
    "reported",
    "reason",
)

#: Columns of :attr:`AuditResult.calibration_summary` (ECE and observed/expected ratio per slice), in order.
CALIBRATION_SUMMARY_COLUMNS: tuple[str, ...] = (
    "model",
    "slice",
    "attribute",
    "statistic",
    "estimate",
    "ci_low",
    "ci_high",
    "interval",
    "vs_overall",
    "vs_overall_low",
    "vs_overall_high",
    "n",
    "n_bins",
    "n_undefined",
    "reported",
    "reason",
    "caveat",
)

#: Columns of :attr:`AuditResult.thresholds` (rates per slice across decision thresholds), in order.
THRESHOLD_COLUMNS: tuple[str, ...] = (
    "model",
    "slice",
    "attribute",
    "threshold",
    "metric",
    "estimate",
    "ci_low",
    "ci_high",
    "interval",
    "n",
    "n_denominator",
    "reported",
    "reason",
)

#: Columns of :attr:`AuditResult.detectability` (what each slice's size can detect), in order.
DETECTABILITY_COLUMNS: tuple[str, ...] = (
    "model",
    "slice",
    "attribute",
    "metric",
    "method",
    "n",
    "n_effective",
    "overall",
    "difference",
    "flagged",
    "alpha",
    "family_size",
    "power",
    "mdd_above",
    "mdd_below",
    "detect_gap",
    "rows_needed",
    "reported",
    "reason",
)

#: Columns of :attr:`AuditResult.selection` (evaluation under selection: margins and sensitivity bounds;
#: :mod:`.selection_table`), in order: ``model`` and ``attribute`` around the columns of
#: :data:`disaggregated_eval.selection.RESULT_COLUMNS`.
SELECTION_COLUMNS: tuple[str, ...] = ("model", "slice", "attribute", *RESULT_COLUMNS[1:])

#: The tables of the analyses after the core tables (:mod:`.analyses`; fields of :class:`AuditResult` after the
#: three core tables) and their columns.
ANALYSIS_TABLES: dict[str, tuple[str, ...]] = {
    "fairness": FAIRNESS_COLUMNS,
    "calibration": CALIBRATION_BIN_COLUMNS,
    "calibration_summary": CALIBRATION_SUMMARY_COLUMNS,
    "thresholds": THRESHOLD_COLUMNS,
    "detectability": DETECTABILITY_COLUMNS,
    "selection": SELECTION_COLUMNS,
}


def empty_table(columns: Sequence[str]) -> pd.DataFrame:
    """An empty table with these columns (the default of a table an audit did not compute)."""
    return pd.DataFrame({c: [] for c in columns})


#: The tables whose rows are a slice's (a ``slice`` column): each has, right after ``slice``, one column
#: per attribute holding the slice's level of it (:func:`with_levels`). Not ``fairness``: its ``slice``
#: of a family statistic is the slice that attains it, and ``attribute`` already names the family.
LEVEL_TABLES: tuple[str, ...] = (
    "slices",
    "comparisons",
    "controlled",
    "calibration",
    "calibration_summary",
    "thresholds",
    "detectability",
    "selection",
)

#: Every fixed column of the audit's tables (an attribute's level column takes none of these names).
_FIXED_COLUMNS = frozenset(
    SLICE_COLUMNS + COMPARISON_COLUMNS + CONTROLLED_COLUMNS + FAIRNESS_COLUMNS + CALIBRATION_BIN_COLUMNS
    + CALIBRATION_SUMMARY_COLUMNS + THRESHOLD_COLUMNS + DETECTABILITY_COLUMNS + SELECTION_COLUMNS
)  # fmt: skip


def level_column_names(attributes: Sequence[str]) -> dict[str, str]:
    """The column of each attribute's levels in the tables of :data:`LEVEL_TABLES`.

    The attribute's own name (fairlearn's index level), with ``_level`` appended while that is a fixed
    column of an audit table (an attribute called ``metric``) or another attribute's column.

    Parameters
    ----------
    attributes : sequence of str
        The audit's group columns, in the order given.

    Returns
    -------
    dict of str to str
        Attribute -> column name, in the order of ``attributes``.

    Examples
    --------
    >>> level_column_names(["race", "sex"])
    {'race': 'race', 'sex': 'sex'}
    >>> level_column_names(["metric", "metric_level"])
    {'metric': 'metric_level_level', 'metric_level': 'metric_level'}
    """
    out: dict[str, str] = {}
    for attribute in sorted(attributes, key=lambda a: a in _FIXED_COLUMNS):  # free names keep theirs first
        name = attribute
        while name in _FIXED_COLUMNS or name in out.values() or (name != attribute and name in attributes):
            name += "_level"
        out[attribute] = name
    return {a: out[a] for a in attributes}


def table_columns(columns: Sequence[str], attributes: Sequence[str]) -> list[str]:
    """A per-slice table's columns in an audit of ``attributes``: ``columns`` with the level columns
    (:func:`level_column_names`) right after ``slice``.

    Examples
    --------
    >>> table_columns(("model", "slice", "estimate"), ["race", "sex"])
    ['model', 'slice', 'race', 'sex', 'estimate']
    """
    at = list(columns).index("slice") + 1
    return [*columns[:at], *level_column_names(attributes).values(), *columns[at:]]


def with_levels(
    table: pd.DataFrame, levels: Mapping[str, Mapping[str, str]], attributes: Sequence[str]
) -> pd.DataFrame:
    """``table`` with one column per attribute right after ``slice``: the level the row's slice fixes.

    Parameters
    ----------
    table : pandas.DataFrame
        A table of :data:`LEVEL_TABLES` (with a ``slice`` column).
    levels : mapping of str to mapping of str to str
        Slice name -> {attribute: level} of the attributes the slice fixes (none for ``overall``).
    attributes : sequence of str
        The audit's group columns, in order (the columns' order; names from :func:`level_column_names`).

    Returns
    -------
    pandas.DataFrame
        A new table; a level column is None (null in parquet, empty in CSV) where the row's slice does not
        fix the attribute (``overall``, ``race=Black`` in the ``sex`` column).

    Examples
    --------
    >>> table = pd.DataFrame({"slice": ["overall", "race=B & sex=F"], "estimate": [0.5, 0.4]})
    >>> with_levels(table, {"overall": {}, "race=B & sex=F": {"race": "B", "sex": "F"}}, ["race", "sex"])
                slice  race   sex  estimate
    0         overall  None  None       0.5
    1  race=B & sex=F     B     F       0.4
    """
    out = table.copy(deep=False)  # the table's columns are shared, not copied (a comparisons table can be large)
    at = list(table.columns).index("slice") + 1  # the place table_columns gives them
    for i, (attribute, column) in enumerate(level_column_names(attributes).items()):
        fixed = {name: of[attribute] for name, of in levels.items() if attribute in of}
        mapped = table["slice"].map(fixed).astype(object)
        out.insert(at + i, column, mapped.where(mapped.notna(), None))
    return out
