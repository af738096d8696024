"""The terminal summary of an audit (``AuditResult.summary()``, what the command line prints): compact tables.

After the run's lines (and ``estimates weighted by column W`` under sample weights), each model's part
opens with its fairness summary (:func:`fairness_overview`: demographic parity and equalized odds per
family of slices, the largest gap of the headline metric; :func:`disparity_table`: each slice's
disparity ratios to its family's reference, four-fifths marks), then the table of its headline
metric (:func:`.decisions.headline_metric`: with the default metrics the first computed of
``vocabulary.HEADLINE_ORDER``, the false positive rate first; else the first of ``--metrics``): slice,
``n``, estimate, 95% interval, its width and flags (withheld slices,
differences from the overall value that survive the multiple-comparison adjustment, resamples where
the metric was undefined) and, before the flags, the minimum detectable difference of each slice
(``MDD``, :func:`detectable_texts`);
a one-line digest of every other metric; and, when the audit has control variables, a table of the
controlled differences ``T_a`` (paper section 4.2) of the headline metric. The full tables are in
the output files (``docs/audit.md``).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import verdicts as vocabulary_verdicts
from .. import vocabulary
from ..registry import FAIRNESS_RECORDS
from ..verdicts import Tolerance
from ..weight_diagnostics import POOR_BALANCE_SMD, poor_balance
from .columns import BOOTSTRAP_Z, TAIL_BOUND
from .comparison_families import TESTED_KINDS, family_keys
from .decisions import flagged_rows, headline_metric
from .interval_notes import SMALL_BOOTSTRAP_ROWS, small_bootstrap
from .options import flag_of
from .text import MIN_WIDTH, fit_lines, terminal_text, terminal_width

__all__ = [
    "format_estimate",
    "format_interval",
    "slice_flags",
    "slice_table",
    "size_cell",
    "controlled_table",
    "metric_digest",
    "model_digest",
    "weight_note",
    "flags_family_line",
    "fairness_overview",
    "fairness_legend",
    "disparity_table",
    "detectable_texts",
    "detectability_note",
    "format_mdd",
    "summary_text",
    "marks_legend",
    "MARKS",
]

_WITHHELD = "-"
#: The marks of a cell that holds no number, and what each means (the line under a table that shows one,
#: :func:`marks_legend`): every cell of the summary's tables holds a value or one of these.
MARKS: dict[str, str] = {
    "-": "no point estimate (withheld: too few rows or cases; the verdict or the notes say why), only the interval",
    "[-]": "no interval (the quantity is undefined on every resample)",
    "n/a": "not applicable (overall is what every verdict compares with)",
    "MDD -": "no difference from overall is detectable at this size",
    "no verdict": "none can be read (why follows: the comparison is withheld, or the statistic is undefined or the "
    "same on every resample)",
    "withheld": "no point estimate: the slice or its reference has too few rows or cases (fairness.csv, reason)",
    "undefined": "the reference slice's rate is 0, so the ratio is x/0 or 0/0",
    "not computed": "the audit has no such ratio for this slice",
    "not evaluated": "left out of this control's evaluation (too few rows to cross-fit P(A | V); see the notes)",
    "~": f"a bootstrap interval of a slice under {SMALL_BOOTSTRAP_ROWS} rows: slightly too narrow (91-93% at 30-60 "
    "rows in the validity study), its band more so; read it as descriptive, the test decides",
}
_SMALL = "~"
_MAX_NAMES = 3  # slices named in a one-line digest
_GAP = 2  # spaces between the columns of a table
_MIN_WRAP = 20  # narrowest a text column is wrapped to before a table is split into panels
_MIN_KEY = 8  # narrowest the slice column of a panel is wrapped to before any number column is


def format_estimate(value: float, digits: int = 3, *, signed: bool = False) -> str:
    """``0.123`` (``+0.123`` if ``signed``); ``-`` for NaN (not reported or undefined)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return _WITHHELD
    return f"{value:+.{digits}f}" if signed else f"{value:.{digits}f}"


def format_interval(low: float, high: float, digits: int = 3, *, signed: bool = False) -> str:
    """``[0.100, 0.200]``; ``[-]`` when the interval is undefined."""
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in (low, high)):
        return "[" + _WITHHELD + "]"
    return f"[{format_estimate(low, digits, signed=signed)}, {format_estimate(high, digits, signed=signed)}]"


def marks_legend(used: Sequence[str]) -> str:
    """The line that explains the marks of :data:`MARKS` a table shows (in the order of :data:`MARKS`); empty
    text when it shows none.

    Examples
    --------
    >>> marks_legend(["[-]", "-"])
    'marks: -: no point estimate (withheld: too few rows or cases; the verdict or the notes say why), only the interval; [-]: no interval (the quantity is undefined on every resample)'
    """
    shown = [f"{mark}: {text}" for mark, text in MARKS.items() if mark in set(used)]
    return "marks: " + "; ".join(shown) if shown else ""


def _marks_in(cells: Sequence[str]) -> list[str]:
    """The marks of :data:`MARKS` among a table's estimate and interval cells."""
    used = []
    for cell in cells:
        if cell == _WITHHELD or cell.startswith(_WITHHELD + " ["):
            used.append("-")
        if "[" + _WITHHELD + "]" in cell:
            used.append("[-]")
    return used


def _metric_label(metric: str) -> str:
    return vocabulary.METRIC_LABELS.get(metric, metric)


def _wrap_cell(text: str, width: int) -> list[str]:
    """A cell's text in lines of at most ``width`` characters (continuation lines indented by one space)."""
    if len(text) <= width:
        return [text]
    indent = " " if width > 8 else ""
    return textwrap.wrap(text, width, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False) or [""]


def _table_width(widths: Sequence[int]) -> int:
    return sum(widths) + _GAP * (len(widths) - 1)


def _shrink(widths: list[int], columns: Sequence[int], width: int, minimum: int) -> list[int]:
    """Narrow the widest of ``columns`` one character at a time (down to ``minimum``) until the table fits."""
    widths = list(widths)
    while _table_width(widths) > width:
        candidates = [i for i in columns if widths[i] > minimum]
        if not candidates:
            break
        widest = max(candidates, key=lambda i: widths[i])
        widths[widest] -= 1
    return widths


def _panel(
    header: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool], widths: Sequence[int]
) -> list[str]:
    lines = []
    for cells in [list(header), *rows]:
        wrapped = [_wrap_cell(str(c), w) for c, w in zip(cells, widths, strict=True)]
        for k in range(max(len(w) for w in wrapped)):
            parts = [
                (cell[k] if k < len(cell) else "").rjust(w) if r else (cell[k] if k < len(cell) else "").ljust(w)
                for cell, w, r in zip(wrapped, widths, right, strict=True)
            ]
            lines.append((" " * _GAP).join(parts).rstrip())
    return lines


def _render(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    right: Sequence[bool],
    *,
    width: int | None = None,
    keys: int = 1,
    wrap: Sequence[int] = (),
) -> str:
    """A text table: a column per header, left- or right-aligned (``right``), two spaces between columns.

    With ``width``, no line is longer: first the text columns named in ``wrap`` are narrowed (their cells
    wrapped onto more lines of the same row, down to :data:`_MIN_WRAP` characters); if that is not enough
    the table is split into panels one under the other, each with the first ``keys`` columns (the slice)
    and as many of the others as fit (filled from the right, so that the last column keeps the ones
    before it), separated by a blank line; a column still too wide is wrapped too. Nothing is cut off.
    """
    rows = [[terminal_text(c) for c in r] for r in rows]  # slice and model names come from the data
    natural = [max(len(str(h)), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    columns = list(range(len(header)))
    if width is None or _table_width(natural) <= width:
        return "\n".join(_panel(header, rows, right, natural))
    widths = _shrink(natural, wrap, width, _MIN_WRAP)
    if _table_width(widths) <= width:
        return "\n".join(_panel(header, rows, right, widths))
    keys = min(keys, len(header) - 1)
    room = width - _table_width(natural[:keys]) - _GAP
    packing = [min(natural[i], max(_MIN_WRAP, room)) if i in wrap else natural[i] for i in columns]
    panels: list[list[int]] = []  # filled from the right, so that the last column (a verdict) keeps its neighbours
    for i in reversed(columns[keys:]):
        if panels and _table_width([packing[j] for j in [*columns[:keys], i, *panels[0]]]) <= width:
            panels[0].insert(0, i)
        else:
            panels.insert(0, [i])
    out: list[str] = []
    for panel in panels:
        chosen = [*columns[:keys], *panel]
        local = [natural[i] for i in chosen]
        local = _shrink(local, [k for k, i in enumerate(chosen) if i in wrap], width, _MIN_WRAP)
        local = _shrink(local, range(keys), width, _MIN_KEY)  # the slice names, on a narrow terminal
        local = _shrink(local, range(len(chosen)), width, 1)  # a number column wider than the terminal
        if out:
            out.append("")
        out.extend(_panel([header[i] for i in chosen], [[r[i] for i in chosen] for r in rows],
                          [right[i] for i in chosen], local))  # fmt: skip
    return "\n".join(out)


def _format_p(p: float) -> str:
    if p is None or math.isnan(p):
        return ""
    return "p_adj < 0.001" if p < 0.001 else f"p_adj {p:.3f}"


def _within_text(tolerance: float) -> str:
    return f"within \u00b1{tolerance:g} of overall"


def slice_flags(
    slices: pd.DataFrame, comparisons: pd.DataFrame, *, model: str, metric: str, alpha: float = 0.05
) -> list[str]:
    """The verdict and flags of each slice of one metric and model (the summary's ``verdict`` column), in table order.

    ``withheld: <reason>`` for a withheld slice; for a reported one its ``vs_overall`` verdict
    (:mod:`disaggregated_eval.verdicts`): ``above overall (p_adj 0.004)`` / ``below overall`` when the
    comparison has ``p_adjusted < alpha`` (without p-values: when the interval of the difference
    excludes 0), ``within +-0.05 of overall`` when ``p_within_adjusted < alpha`` (certified), both, or
    ``inconclusive``, or ``no verdict: <reason>`` when the comparison is withheld; ``n/a`` for the overall
    row; then ``undefined in K resamples``; joined by ``"; "``.
    """
    rows = slices[(slices["model"] == model) & (slices["metric"] == metric)]
    vs_overall = comparisons[
        (comparisons["model"] == model) & (comparisons["metric"] == metric) & (comparisons["kind"] == "vs_overall")
    ]
    vs_overall = vs_overall.assign(_sig=flagged_rows(vs_overall, alpha)).set_index("slice")
    out = []
    for row in rows.itertuples(index=False):
        flags = []
        if not bool(row.reported):
            flags.append(f"withheld: {row.reason}" if row.reason else "withheld")
        elif row.slice in vs_overall.index:
            comp = vs_overall.loc[row.slice]
            if isinstance(comp, pd.DataFrame):  # defensive: one row per slice expected
                comp = comp.iloc[0]
            parts = []
            if bool(comp["_sig"]):
                direction = "above" if comp["difference"] > 0 else "below"
                p_text = _format_p(float(comp["p_adjusted"]))
                parts.append(f"{direction} overall ({p_text})" if p_text else f"{direction} overall")
            within = comp.get("p_within_adjusted", float("nan"))
            if within is not None and not math.isnan(float(within)) and float(within) < alpha:
                parts.append(_within_text(float(comp["tolerance"])))
            if not parts and str(comp.get("verdict", "")) == vocabulary_verdicts.INCONCLUSIVE:
                parts.append(vocabulary_verdicts.INCONCLUSIVE)
            if not parts and not bool(comp.get("reported", True)):
                reason = comp.get("reason", "")
                parts.append(f"no verdict: {reason}" if isinstance(reason, str) and reason else "no verdict")
            flags.append(", ".join(parts))
        elif row.slice == vocabulary.OVERALL:
            flags.append("n/a")
        if int(row.n_undefined) > 0:
            flags.append(f"undefined in {int(row.n_undefined)} resamples")
        out.append("; ".join(f for f in flags if f))
    return out


def slice_table(
    slices: pd.DataFrame,
    comparisons: pd.DataFrame,
    *,
    model: str,
    metric: str,
    alpha: float = 0.05,
    level: float = 0.95,
    detectable: dict[str, str] | None = None,
    width: int | None = None,
) -> str:
    """One metric of one model as a text table: slice, n, estimate, interval, width, verdict (:func:`slice_flags`).

    Parameters
    ----------
    slices, comparisons : pandas.DataFrame
        ``AuditResult.slices`` and ``AuditResult.comparisons`` (``docs/audit.md``, "Tables").
    model, metric : str
        Which rows to show.
    alpha : float
        A slice is flagged when its ``vs_overall`` comparison has ``p_adjusted < alpha`` (when the
        audit computed no p-values: when the interval of the difference excludes 0).
    level : float
        Confidence level, for the column title.
    detectable : dict of str to str, optional
        Text of a column ``MDD`` before the flags (the minimum detectable difference of each slice,
        :func:`detectable_texts`); no such column when None.
    width : int, optional
        No line longer (:func:`_render`: the verdicts wrapped, or the table split into panels).

    Returns
    -------
    str
        Lines without a trailing newline, then the line of the marks it shows (:func:`marks_legend`).
        Withheld slices show ``-`` as the estimate, their interval, and the reason in the flags column;
        the overall row ``n/a`` as its MDD and verdict.
    """
    rows = slices[(slices["model"] == model) & (slices["metric"] == metric)]
    flags = slice_flags(slices, comparisons, model=model, metric=metric, alpha=alpha)
    body = []
    effective = rows["n_effective"] if "n_effective" in rows.columns else pd.Series(np.nan, index=rows.index)
    shown = rows["reported"].to_numpy(dtype=bool) & (rows["slice"] != vocabulary.OVERALL).to_numpy()
    small = small_bootstrap(metric, rows["n"].to_numpy(), shown)  # '~': the rule beside a small slice's interval
    for row, flag, n_eff, tilde in zip(rows.itertuples(index=False), flags, effective, small, strict=True):
        ci_width = row.ci_high - row.ci_low
        body.append([
            str(row.slice),
            size_cell(int(row.n), float(n_eff)),
            format_estimate(float(row.estimate)),
            format_interval(float(row.ci_low), float(row.ci_high)) + (f" {_SMALL}" if tilde else ""),
            format_estimate(float(ci_width)),
            *([detectable.get(str(row.slice), "n/a")] if detectable is not None else []),
            flag,
        ])  # fmt: skip
    header = [
        "slice",
        "n",
        "estimate",
        f"{level:.0%} CI",
        "width",
        *(["MDD"] if detectable is not None else []),
        "verdict",
    ]
    right = [False, True, True, False, True, *([True] if detectable is not None else []), False]
    text = _render(header, body, right, width=width, wrap=[len(header) - 1])
    used = _marks_in([cell for cells in body for cell in cells[2:5]])
    mdd = [cells[5] for cells in body] if detectable is not None else []
    used += ["n/a"] * (any(cells[-1] == "n/a" for cells in body) or "n/a" in mdd)
    used += ["MDD -"] * (_WITHHELD in mdd)
    used += ["no verdict"] * any(cells[-1].startswith("no verdict") for cells in body)
    used += [_SMALL] * bool(small.any())
    legend = marks_legend(used)
    text += "\n" + legend if legend else ""
    if any("eff." in cells[1] for cells in body):
        text += f"\n{_EFFECTIVE_LEGEND}"
    return text if width is None else fit_lines(text, width)


#: The line under a table whose ``n`` column shows an effective size (:func:`size_cell`).
_EFFECTIVE_LEGEND = (
    "n (eff. k): the slice's rows and Kish's effective size (sum w)^2 / sum w^2 of their sample weights, where it "
    "differs; the intervals use it, and the minimum-size rules count it as well as the rows"
)


def size_cell(n: int, n_effective: float) -> str:
    """The ``n`` cell of a slice: its rows, and Kish's effective size of its sample weights where that differs
    by half a row or more (NaN: no sample weights); one decimal below 10.

    Examples
    --------
    >>> size_cell(300, 1.0), size_cell(300, 299.9999), size_cell(300, float("nan")), size_cell(1200, 901.0)
    ('300 (eff. 1.0)', '300', '300', '1200 (eff. 901)')
    """
    if math.isnan(n_effective) or abs(n - n_effective) < 0.5:
        return str(n)
    return f"{n} (eff. {n_effective:.{1 if n_effective < 10 else 0}f})"


def controlled_table(
    controlled: pd.DataFrame,
    *,
    model: str,
    metric: str,
    controls: Sequence[str],
    withheld: Sequence[str] | None = None,
    width: int | None = None,
) -> str:
    """Controlled differences ``T_a`` (with intervals) of one metric: one row per slice, one column per control.

    ``T_a`` is the slice's metric minus the weighted population metric ``M_a`` (paper section 4.2);
    for the control ``none`` it is the slice minus the whole population. Rows not reported (their
    ``reported`` column, or the slices named in ``withheld``) show ``-`` and the interval only; a slice left
    out of a control's weighted evaluation ``not evaluated``; a line explains the marks shown
    (:func:`marks_legend`). A ``*`` marks poor balance of the weights
    (:func:`disaggregated_eval.weight_diagnostics.poor_balance` of ``balance_smd``), with a line saying so.
    ``width``: no line longer (:func:`_render`).
    """
    rows = controlled[(controlled["model"] == model) & (controlled["metric"] == metric)]
    if withheld is not None and "reported" not in rows.columns:
        rows = rows.assign(reported=~rows["slice"].isin(withheld))
    slices = list(pd.unique(rows["slice"]))
    header = ["slice"] + [f"T_a | V={c}" if c != "none" else "T_a | none" for c in controls]
    body = []
    indexed = rows.set_index(["slice", "control"])
    marked = False
    for name in slices:
        cells = [str(name)]
        for control in controls:
            if (name, control) in indexed.index:
                r = indexed.loc[(name, control)]
                if isinstance(r, pd.DataFrame):
                    r = r.iloc[0]
                reported = bool(r.get("reported", True))
                value = float(r["T_a"]) if reported else float("nan")
                mark = " *" if reported and poor_balance(r.get("balance_smd")) else ""
                marked = marked or bool(mark)
                cells.append(
                    f"{format_estimate(value, signed=True)} "
                    f"{format_interval(float(r['T_a_low']), float(r['T_a_high']), signed=True)}{mark}"
                )
            else:
                cells.append("not evaluated")
        body.append(cells)
    text = _render(header, body, [False] + [False] * len(controls), width=width)
    used = _marks_in([cell for cells in body for cell in cells[1:]])
    used += ["not evaluated"] * any("not evaluated" in cells for cells in body)
    legend = marks_legend(used)
    if legend:
        text += "\n" + legend
    if marked:
        text += (
            f"\n* poor balance: the re-weighted population's V differs from the slice's by more than "
            f"{POOR_BALANCE_SMD:g} standardised mean differences (see the notes)"
        )
    return text if width is None else fit_lines(text, width)


def metric_digest(slices: pd.DataFrame, comparisons: pd.DataFrame, *, model: str, metric: str, alpha: float) -> str:
    """One line: how many reported slices differ from the overall value, the first few by name."""
    rows = slices[(slices["model"] == model) & (slices["metric"] == metric) & (slices["slice"] != vocabulary.OVERALL)]
    reported = rows[rows["reported"].astype(bool)]
    comps = comparisons[
        (comparisons["model"] == model) & (comparisons["metric"] == metric) & (comparisons["kind"] == "vs_overall")
    ]
    comps = comps[comps["slice"].isin(reported["slice"])]
    flagged = comps[flagged_rows(comps, alpha).to_numpy(dtype=bool)] if len(comps) else comps
    names = [f"{terminal_text(s)} ({d:+.3f})" for s, d in zip(flagged["slice"], flagged["difference"], strict=True)]
    shown = ", ".join(names[:_MAX_NAMES]) + (", ..." if len(names) > _MAX_NAMES else "")
    withheld = len(rows) - len(reported)
    text = f"{_metric_label(metric)}: {len(flagged)} of {len(reported)} reported slices differ from overall"
    if names:
        text += f": {shown}"
    if "p_within_adjusted" in comps.columns and len(comps) and np.isfinite(float(comps["tolerance"].iloc[0])):
        within = int((comps["p_within_adjusted"].astype(float) < alpha).sum())
        tolerance = float(comps["tolerance"].iloc[0])
        text += f"; {within} within \u00b1{tolerance:g} of overall"
    if withheld:
        text += f"; {withheld} withheld"
    return text


def model_digest(comparisons: pd.DataFrame, *, model: str, reference: str, metric: str) -> str:
    """One line: ``model`` minus the first model overall, and on how many slices the interval excludes 0."""
    rows = comparisons[
        (comparisons["kind"] == "vs_model") & (comparisons["model"] == model) & (comparisons["metric"] == metric)
    ]
    if "reported" in rows.columns:
        rows = rows[rows["reported"].astype(bool)]
    overall = rows[rows["slice"] == vocabulary.OVERALL]
    text = f"{terminal_text(model)} - {terminal_text(reference)}, {_metric_label(metric)}:"
    if len(overall):
        r = overall.iloc[0]
        if r.get("caveat", "") == vocabulary.CAVEAT_DEGENERATE:
            interval = "(the same on every resample: no interval)"
        else:
            interval = format_interval(float(r["ci_low"]), float(r["ci_high"]), signed=True)
        text += f" overall {format_estimate(float(r['difference']), signed=True)} {interval};"
    others = rows[rows["slice"] != vocabulary.OVERALL]
    excludes = int(((others["ci_low"] > 0) | (others["ci_high"] < 0)).sum())
    return text + f" the interval excludes 0 on {excludes} of {len(others)} reported slices"


def weight_note(*, sample_weight: str | None, frequency_weight: str | None) -> str | None:
    """``estimates weighted by column W`` when the audit has row weights (option ``sample_weight``,
    ``--sample-weight``), and ``each row counted C times`` when it has row counts (``frequency_weight``,
    ``--frequency-weight``), else None."""
    column, counts = sample_weight, frequency_weight
    parts = ([f"estimates weighted by column {column}"] if column else []) + (
        [f"each row counted as many times as column {counts} says"] if counts else []
    )
    return "; ".join(parts) if parts else None


_ADJUST_NAMES = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "no"}


def _adjust_text(
    *,
    n_permutations: int,
    adjust: str,
    adjust_scope: str,
    sample_weight: str | None,
    comparisons: pd.DataFrame | None = None,
) -> str:
    """The tests and their adjustment (one clause), from the options of the same names."""
    if not n_permutations:
        return "no permutation tests"
    adjust = _ADJUST_NAMES.get(adjust, adjust)
    tests = (
        f"Monte-Carlo permutation tests of each metric (at most {n_permutations:,} permutations)"
        if sample_weight
        else f"permutation tests of each metric (exact for rates, else Monte Carlo with at most "
        f"{n_permutations:,} permutations)"
    )
    if comparisons is not None and "test" in comparisons and (comparisons["test"] == TAIL_BOUND).any():
        tests += f", means far from equal by a bound of the exact p-value (test '{TAIL_BOUND}')"
    if comparisons is not None and "test" in comparisons and (comparisons["test"] == BOOTSTRAP_Z).any():
        tests += f", large comparisons by the bootstrap z-test (test '{BOOTSTRAP_Z}', see the notes)"
    if adjust_scope == "audit":
        return f"{tests}, {adjust} adjustment over the whole audit (one family)"
    scope = "kind and metric" if adjust_scope == "metric" else "kind, all metrics together"
    return f"{tests}, {adjust} adjustment within each family (one model, {scope})"


#: The families of each ``adjust_scope`` as the first screen names them.
_FAMILY_NAMES = {"metric": "(model, metric, kind) family", "model": "(model, kind) family (every metric together)"}


def flags_family_line(comparisons: pd.DataFrame | None, *, adjust: str, adjust_scope: str, alpha: float) -> str:
    """Which family each flag's level belongs to, and how many tests it holds (one line, the first screen's).

    Parameters
    ----------
    comparisons : DataFrame or None
        The audit's ``comparisons`` table (its ``kind`` and ``family_size``; None or empty: no tests).
    adjust, adjust_scope : str
        The options of those names.
    alpha : float
        ``1 - confidence``: the level of every family.

    Returns
    -------
    str
        ``flags: Holm within each (model, metric, kind) family of N tests (...)``, ``flags: Holm over the whole
        audit (N tests ...)``, and the like for the other options and without tests.

    Examples
    --------
    >>> import pandas as pd
    >>> table = pd.DataFrame({"model": "m", "metric": ["auc"] * 3 + ["accuracy"] * 3,
    ...                       "kind": ["vs_overall"] * 6, "family_size": [3] * 6})
    >>> flags_family_line(table, adjust="holm", adjust_scope="metric", alpha=0.05)[:57]
    'flags: Holm within each (model, metric, kind) family of 3'
    >>> flags_family_line(table.assign(family_size=6), adjust="holm", adjust_scope="audit", alpha=0.05)[:48]
    'flags: Holm over the whole audit (6 tests: every'
    """
    if comparisons is None or comparisons.empty or "family_size" not in comparisons:
        tested = pd.DataFrame(columns=["model", "metric", "kind", "family_size"])
    else:
        tested = comparisons[comparisons["kind"].isin(TESTED_KINDS) & (comparisons["family_size"] > 0)]
    if tested.empty:
        return f"flags: no tests; a flag is a difference whose {1 - alpha:.0%} interval excludes 0 (no adjustment)"
    error = "family-wise error" if adjust == "holm" else "false discovery rate"
    name = _ADJUST_NAMES.get(adjust, adjust)
    if adjust == "none":
        return (f"flags: no adjustment, each of the {len(tested):,} tests at level {alpha:g} (nothing controls the "
                f"chance of a wrong flag among them; {flag_of('adjust')} holm controls it)")  # fmt: skip
    keys = family_keys(adjust_scope)
    if not keys:
        size = int(tested["family_size"].max())
        return (f"flags: {name} over the whole audit ({size:,} tests: every model, metric and kind of comparison in one "
                f"family; {error} at most {alpha:g} over the audit)")  # fmt: skip
    sizes = tested.groupby(keys, sort=False)["family_size"].max()
    low, high = int(sizes.min()), int(sizes.max())
    count = f"{high:,} tests" if low == high else f"{low:,} to {high:,} tests"
    return (f"flags: {name} within each {_FAMILY_NAMES[adjust_scope]} of {count} ({len(sizes):,} families; "
            f"{error} at most {alpha:g} in each, not over the audit: {flag_of('adjust_scope')} audit for one "
            "family)")  # fmt: skip


def family_note(
    comparisons: pd.DataFrame, *, model: str, metric: str, alpha: float, adjust: str, adjust_scope: str = "metric"
) -> str:
    """Which family the flags of a table belong to and how many tests it holds (one line)."""
    rows = comparisons[
        (comparisons["model"] == model) & (comparisons["metric"] == metric) & (comparisons["kind"] == "vs_overall")
    ]
    size = int(rows["family_size"].max()) if len(rows) and "family_size" in rows else 0
    tolerance = float(rows["tolerance"].iloc[0]) if len(rows) and "tolerance" in rows else float("nan")
    within = (
        f"; within \u00b1{tolerance:g}: the two one-sided tests of |difference| >= {tolerance:g} reject at the same "
        f"adjusted level"
        if not math.isnan(tolerance)
        else ""
    )
    if size == 0:
        return f"verdicts: no test of this metric (above/below overall: the interval excludes 0){within}"
    both = (
        f", both kinds adjusted together (family-wise error of all the family's verdicts at most {alpha:g})"
        if adjust == "holm"
        else ""
    )
    family = {
        "metric": f"{size} slice-vs-overall comparisons of {_metric_label(metric)} for {terminal_text(model)}",
        "model": f"{size} slice-vs-overall comparisons of every metric of {terminal_text(model)}",
        "audit": f"{size} tests of the whole audit (every model, metric and kind of comparison)",
    }[adjust_scope]
    return (
        f"verdicts: above/below overall at adjusted p < {alpha:g}{within}; {_ADJUST_NAMES.get(adjust, adjust)} "
        f"adjustment within the family of {family}{both}"
    )


def _cell(estimate: float, low: float, high: float, mark: str = "") -> str:
    """``0.372 [0.330, 0.490]`` plus a mark."""
    return f"{format_estimate(estimate)} {format_interval(low, high)}{(' ' + mark) if mark else ''}"


#: Family statistics of the fairness overview: (statistic, short label).
_OVERVIEW = tuple((s.name, s.short_label) for s in FAIRNESS_RECORDS if s.over == "family")
#: Short verdict words of the disparity-ratio table (inconclusive: no word).
_SHORT_VERDICTS = {
    vocabulary_verdicts.BEYOND: "beyond **",
    vocabulary_verdicts.DIFFERS: "differs",
    vocabulary_verdicts.DIFFERS_WITHIN: "differs, within",
    vocabulary_verdicts.WITHIN: "within",
}


def _verdict_cell(verdict: str) -> str:
    return f"{verdict} **" if verdict == vocabulary_verdicts.BEYOND else verdict


def _raw_differences(fairness: pd.DataFrame, *, model: str, most: int = 3) -> str:
    """`` (here race: DP difference 0.523, EO difference 0.661)``: the DP and EO differences over every slice (``raw_estimate``) of
    the first ``most`` families where they are not the reported ones; empty when none."""
    rows = fairness[(fairness["model"] == model) & fairness["reported"].astype(bool)]
    parts = []
    for family, group in rows.groupby("attribute", sort=False):
        shown = group[group["statistic"].isin(["demographic_parity_difference", "equalized_odds_difference"])]
        if "raw_estimate" in shown and not np.allclose(shown["raw_estimate"], shown["estimate"], rtol=0, atol=5e-4):
            labels = dict(_OVERVIEW)
            values = ", ".join(f"{labels[s]} {format_estimate(v)}"
                               for s, v in zip(shown["statistic"], shown["raw_estimate"], strict=True))  # fmt: skip
            parts.append(f"{terminal_text(str(family))}: {values}")  # a family name comes from the data
    more = f"; {len(parts) - most} more families" if len(parts) > most else ""
    return f" (here {'; '.join(parts[:most])}{more})" if parts else ""


def fairness_legend(fairness: pd.DataFrame, *, model: str, level: float, tolerance: Tolerance) -> str:
    """The lines under the fairness overview: what DP, EO and the verdicts mean, and their family."""
    rows = fairness[(fairness["model"] == model) & fairness["reported"].astype(bool)]
    n_statistics = len(fairness[fairness["reported"].astype(bool)])
    tol = tolerance.text()
    lines = [
        "DP: demographic parity of the selection rate (max - min, min / max); EO: equalized odds (the larger of the "
        "TPR and FPR gaps, the smaller of their ratios). A largest gap is biased away from equality on small slices "
        "(it picks the extremes): 'corrected' is its bootstrap bias-corrected estimate; every interval holds at "
        "equality too",
        f"verdicts (tolerance: {tol}): read from the 'simultaneous' interval of their row, simultaneous over all "
        f"{n_statistics} reported statistics of this summary (the probability that any verdict is wrong is at most "
        f"{1 - level:.0%}); it is wider than the {level:.0%} CI, which is read on its own, so a verdict can be "
        f"inconclusive although the {level:.0%} CI lies inside the tolerance; differs: the slices "
        "are not all equal; within tolerance: every difference inside it; beyond tolerance **: the whole interval "
        "outside it (for a ratio: the four-fifths rule fails and the data can tell); inconclusive: neither",
        "fairlearn counts every slice, withheld ones too: its numbers are the column raw_estimate of fairness.csv"
        + _raw_differences(fairness, model=model),
    ]
    shown = fairness[(fairness["model"] == model) & fairness["statistic"].isin(vocabulary.FAMILY_STATISTICS)]
    used = ["-"] * (not shown["reported"].astype(bool).all())
    used += ["[-]"] * bool(shown[["ci_low", "ci_high", "band_low", "band_high"]].isna().any(axis=None))
    caveats = shown["caveat"] if "caveat" in shown else pd.Series([], dtype=object)
    used += ["no verdict"] * bool((shown["reported"].astype(bool) & caveats.isin(vocabulary.CAVEATS)).any())
    legend = marks_legend(used)
    if legend:
        lines.append(legend)
    return "\n".join(lines) if len(rows) else ""


def fairness_overview(fairness: pd.DataFrame, *, model: str, level: float = 0.95, width: int | None = None) -> str:
    """The fairness statistics of one model: a row per family and statistic, with intervals and verdicts.

    Columns: family, statistic (the demographic-parity difference and ratio of the selection rate, the
    equalized-odds difference and ratio, and the largest gap of the headline metric; ``docs/audit.md``,
    "Fairness summary"), estimate, interval (the statistic alone), the bias-corrected estimate, the
    simultaneous interval (``band_low``, ``band_high``: simultaneous over the summary, wider than the
    interval of the statistic alone) and the verdict read from it (``**`` beyond the tolerance; the
    caveat, ``undefined`` or ``degenerate``, when there is none). Empty text when ``fairness`` has no row
    of the model. ``width``: no line longer (:func:`_render`).
    """
    rows = fairness[(fairness["model"] == model) & fairness["statistic"].isin(vocabulary.FAMILY_STATISTICS)]
    if rows.empty:
        return ""
    body = []
    for family, group in rows.groupby("attribute", sort=False):
        indexed = group.set_index("statistic")
        for statistic, label in _OVERVIEW:
            if statistic not in indexed.index:
                continue
            r = indexed.loc[statistic]
            reported = bool(r["reported"])
            if statistic == "largest_gap":
                label = f"largest gap, {_metric_label(str(r['metric']))}"
            estimate = float(r["estimate"]) if reported else float("nan")
            corrected = float(r["bias_corrected"]) if reported else float("nan")
            verdict = _verdict_cell(str(r["verdict"])) if reported else f"withheld: {r['reason']}"
            caveat = r.get("caveat", "")
            if reported and not str(r["verdict"]) and isinstance(caveat, str) and caveat:
                verdict = f"no verdict: {caveat}"
            body.append([
                str(family), label, format_estimate(estimate), format_interval(float(r["ci_low"]), float(r["ci_high"])),
                format_estimate(corrected), format_interval(float(r["band_low"]), float(r["band_high"])), verdict,
            ])  # fmt: skip
    header = ["family", "statistic", "estimate", f"{level:.0%} CI", "corrected", "simultaneous", "verdict"]
    return _render(header, body, [False, False, True, False, True, False, False], width=width, keys=2, wrap=[1, 6])


def disparity_table(fairness: pd.DataFrame, *, model: str, width: int | None = None) -> str:
    """Each slice's disparity ratios to its family's reference slice: selection rate, FPR, FNR.

    One row per slice with a reported ratio (but the references), the reference in the second column;
    each cell the ratio, its interval and the verdict's short word (``beyond **``, ``differs``,
    ``within``; none: inconclusive), as in :func:`fairness_overview`; a ratio without an estimate shows
    ``-``, its interval and why: ``withheld`` (the slice or the reference is withheld for this metric) or
    ``undefined`` (the reference's rate is 0); ``not computed`` when the audit has no such ratio; a line
    explains the marks shown (:func:`marks_legend`). Empty text when there is none. ``width``: no line
    longer (:func:`_render`).
    """
    rows = fairness[(fairness["model"] == model) & (fairness["statistic"] == "disparity_ratio")]
    if not rows["reported"].astype(bool).any():
        return ""
    metrics = [m for m in vocabulary.DISPARITY_METRICS if (rows["metric"] == m).any()]
    body, used = [], []
    for (name, reference), group in rows.groupby(["slice", "reference"], sort=False):
        if not group["reported"].astype(bool).any():
            continue  # a withheld slice (its values are in the slice table)
        indexed = group.set_index("metric")
        cells = [str(name), str(reference)]
        for metric in metrics:
            if metric in indexed.index:
                r = indexed.loc[metric]
                if not bool(r["reported"]):
                    mark = "withheld"
                elif not math.isfinite(float(r["estimate"])):
                    mark = "undefined"
                else:
                    mark = _SHORT_VERDICTS.get(str(r["verdict"]), "")
                cells.append(_cell(float(r["estimate"]), float(r["ci_low"]), float(r["ci_high"]), mark))
                used += [mark] if mark in MARKS else []
            else:
                cells.append("not computed")
                used.append("not computed")
        body.append(cells)
    used += _marks_in([cell for cells in body for cell in cells[2:]])
    labels = {m: _metric_label(m).lower() if m != "predicted_positive_rate" else "selection rate" for m in metrics}
    header = ["slice", "reference", *(labels[m] for m in metrics)]
    text = _render(header, body, [False] * len(header), width=width)
    legend = marks_legend([u for u in used if u != "-"])  # "-" is always followed by its reason here
    text += "\n" + legend if legend else ""
    return text if width is None else fit_lines(text, width)


def detectable_texts(detectability: pd.DataFrame | None, *, model: str, metric: str) -> dict[str, str] | None:
    """The minimum detectable difference of every slice of one model and metric, as text.

    ``0.033`` when both directions are (nearly) the same, ``+0.036/-0.030`` otherwise, ``-`` when no
    difference could be detected; None when the audit has no detectability rows for the metric.
    """
    if detectability is None or detectability.empty:
        return None
    rows = detectability[(detectability["model"] == model) & (detectability["metric"] == metric)]
    if rows.empty:
        return None
    out = {}
    for r in rows.itertuples(index=False):
        out[str(r.slice)] = format_mdd(float(r.mdd_above), float(r.mdd_below))
    return out


def format_mdd(above: float, below: float) -> str:
    """A minimum detectable difference in both directions as short text (see :func:`detectable_texts`).

    ``0.033`` when the two directions agree to 0.0015, ``+0.036/-0.030`` when they do not, ``+0.634``
    (``-0.296``) when only one direction is possible, ``-`` when neither is.
    """
    have_above, have_below = not math.isnan(above), not math.isnan(below)
    if have_above and have_below:
        if abs(above - below) <= 0.0015:
            return format_estimate(max(above, below))
        return f"{format_estimate(above, signed=True)}/{format_estimate(-below, signed=True)}"
    if have_above:
        return format_estimate(above, signed=True)
    if have_below:
        return format_estimate(-below, signed=True)
    return _WITHHELD


def detectability_note(detectability: pd.DataFrame | None, *, model: str, metric: str) -> str:
    """One line: what the ``MDD`` column means (its level, family and power)."""
    if detectability is None or detectability.empty:
        return ""
    rows = detectability[(detectability["model"] == model) & (detectability["metric"] == metric)]
    if rows.empty:
        return ""
    r = rows.iloc[0]
    size = int(r["family_size"])
    level = f"level {float(r['alpha']):.2g}" + (
        f" (alpha / {size} tests: the adjustment's strictest step)" if size > 1 else ""
    )
    return (
        f"MDD: smallest difference from overall that the slice's size lets the test detect with {float(r['power']):.0%} "
        f"power at {level}, {r['method']}; a slice without a flag and with a large MDD has no flag at this size, "
        f"which is not evidence of no gap"
    )


def summary_text(
    result: Any,
    *,
    metric: str | None = None,
    input_path: str | Path | None = None,
    out_dir: str | Path | None = None,
    seed_is_default: bool | None = None,
    width: int | None = None,
) -> str:
    """The audit's terminal summary (what ``disagg-eval audit`` prints on standard output).

    Parameters
    ----------
    result : AuditResult
    metric : str, optional
        Metric of the tables; default :func:`headline_metric`.
    input_path, out_dir : path, optional
        Shown in the header and the footer.
    seed_is_default : bool, optional
        Whether the seed is the built-in default (then the header says so).
    width : int, optional
        No line is longer: prose is wrapped (:func:`fit_lines`), tables are wrapped or split into panels
        (:func:`_render`). Default :func:`terminal_width` (the terminal's width, else 100).

    Returns
    -------
    str
        Lines without ANSI colours, ending without a newline; every name from the data is escaped
        (:func:`~disaggregated_eval.audit.text.terminal_text`), so a line break is always the summary's.
    """
    options = result.options
    t = terminal_text
    width = terminal_width() if width is None else max(MIN_WIDTH, int(width))
    metric = metric or headline_metric(result.slices, options.metrics)
    alpha = 1.0 - float(options.confidence)
    lines = []
    rows = f"{t(input_path)} ({result.n_rows:,} rows)" if input_path is not None else f"{result.n_rows:,} rows"
    lines.append(
        f"disagg-eval audit: {rows}, label {t(options.label)}, "
        f"model(s) {', '.join(map(t, options.scores))}, groups {' x '.join(map(t, options.groups))}"
    )
    seed_note = " (the default; change it with --seed)" if seed_is_default else ""
    tests = _adjust_text(n_permutations=options.n_permutations, adjust=options.adjust,
                         adjust_scope=options.adjust_scope,
                         sample_weight=options.sample_weight or options.population_margins,
                         comparisons=result.comparisons)  # fmt: skip
    lines.append(
        f"seed {options.seed}{seed_note}; {options.n_resamples:,} bootstrap resamples ({options.resampling}), "
        f"{options.confidence:.0%} intervals; {tests}; slices with n < {options.min_group_size} are withheld"
    )
    lines.append(flags_family_line(result.comparisons, adjust=options.adjust, adjust_scope=options.adjust_scope,
                                   alpha=alpha))  # fmt: skip
    weighted = weight_note(sample_weight=options.sample_weight, frequency_weight=options.frequency_weight)
    if weighted:
        flags = [flag_of(field) for field in ("sample_weight", "frequency_weight") if getattr(options, field)]
        lines.append(f"{weighted} ({', '.join(flags)}); n counts rows")
    from .selection_table import margins_line  # the population margins weight every table

    margined = margins_line(options)
    if margined:
        lines.append(f"{t(margined)} ({flag_of('population_margins')}); n counts rows")
    for note in result.notes:
        lines.append(f"note: {t(note)}")
    if metric is None:
        lines.append("no metric could be computed")
        return fit_lines("\n".join(lines), width)
    headline = metric
    for model in options.scores:
        present = list(pd.unique(result.slices.loc[result.slices["model"] == model, "metric"]))
        if not present:
            continue
        # A model of hard 0/1 predictions has no score metrics: its headline is its own first one.
        metric = headline if headline in present else headline_metric(result.slices, options.metrics, model=model)
        fairness = getattr(result, "fairness", None)
        if fairness is not None and len(fairness):
            overview = fairness_overview(fairness, model=model, level=options.confidence, width=width)
            if overview:
                lines.append("")
                lines.append(
                    f"Fairness summary of {t(model)} ({options.confidence:.0%} intervals; over each family's reported "
                    f"slices)"
                )
                lines.append(overview)
                legend = fairness_legend(fairness, model=model, level=options.confidence,
                                         tolerance=options.parsed_tolerance)  # fmt: skip
                if legend:
                    lines.append(legend)
            ratios = disparity_table(fairness, model=model, width=width)
            if ratios:
                lines.append("")
                lines.append(
                    f"Disparity ratios of {t(model)} to each family's reference slice (Aequitas; {options.confidence:.0%} "
                    f"intervals; verdicts as above, no word: inconclusive)"
                )
                lines.append(ratios)
        detectability = getattr(result, "detectability", None)
        detectable = detectable_texts(detectability, model=model, metric=metric)
        lines.append("")
        lines.append(f"{_metric_label(metric)} of {t(model)} by slice")
        lines.append(
            slice_table(
                result.slices,
                result.comparisons,
                model=model,
                metric=metric,
                alpha=alpha,
                level=options.confidence,
                detectable=detectable,
                width=width,
            )
        )
        lines.append(family_note(result.comparisons, model=model, metric=metric, alpha=alpha, adjust=options.adjust,
                                 adjust_scope=options.adjust_scope))  # fmt: skip
        note = detectability_note(detectability, model=model, metric=metric)
        if note:
            lines.append(note)
        if model != options.scores[0]:
            lines.append(model_digest(result.comparisons, model=model, reference=options.scores[0], metric=metric))
        others = [m for m in options.metrics if m != metric and m in present]
        if others:
            lines.append("")
            lines.append(f"other metrics of {t(model)} (differences at adjusted p < {alpha:g}):")
            lines.extend(
                "  " + metric_digest(result.slices, result.comparisons, model=model, metric=m, alpha=alpha)
                for m in others
            )
        controls = [c for c in options.controls if c in set(result.controlled.get("control", []))]
        if controls and any(c != "none" for c in controls):
            lines.append("")
            lines.append(f"controlled differences T_a = slice - M_a, {_metric_label(metric)} of {t(model)}")
            rows = result.slices[(result.slices["model"] == model) & (result.slices["metric"] == metric)]
            withheld = list(rows.loc[~rows["reported"].astype(bool), "slice"])
            table = controlled_table(
                result.controlled, model=model, metric=metric, controls=controls, withheld=withheld, width=width
            )
            lines.append(table)
    from .selection_table import selection_lines  # evaluation under selection (table selection)

    selection = selection_lines(result)
    if selection:
        lines.append("")
        lines.extend(selection)
    if out_dir is not None:
        lines.append("")
        lines.append(f"the report: {t(Path(out_dir) / 'report.html')} (every table as csv and parquet next to it)")
    return fit_lines("\n".join(lines), width)
