"""The metric registry: one record per metric, every per-metric table derived from it, checked at import."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import types
from pathlib import Path

import pytest

from disaggregated_eval import registry, vocabulary
from disaggregated_eval.audit.comparison_tests import PERMUTATION_DESIGNS
from disaggregated_eval.audit.fairness import FAIRNESS_METRICS
from disaggregated_eval.audit.withheld import DENOMINATOR
from disaggregated_eval.engine import sums
from disaggregated_eval.intervals import INTERVAL_METHODS
from disaggregated_eval.registry import (
    FAIRNESS_RECORDS,
    FAIRNESS_REGISTRY,
    METRIC_RECORDS,
    METRIC_REGISTRY,
    RegistryError,
    check_fairness_records,
    check_metric_records,
)

REGISTRY_SOURCE = Path(registry.__file__).read_text(encoding="utf-8")


def _replaced(name: str, **changes) -> tuple[registry.MetricRecord, ...]:
    """The registry with the record ``name`` changed."""
    return tuple(dataclasses.replace(r, **changes) if r.name == name else r for r in METRIC_RECORDS)


# ---- derived tables -------------------------------------------------------------------------------
def test_every_per_metric_table_is_read_off_the_records():
    names = tuple(r.name for r in METRIC_RECORDS)
    assert vocabulary.METRICS == names == tuple(METRIC_REGISTRY)
    assert set(sums.METRIC_SLOTS) == set(names) and set(INTERVAL_METHODS) == set(names)
    assert set(PERMUTATION_DESIGNS) == set(names)
    assert {r.name: r.label for r in METRIC_RECORDS} == vocabulary.METRIC_LABELS
    assert {r.name: r.higher_is_better for r in METRIC_RECORDS} == vocabulary.METRIC_HIGHER_IS_BETTER
    assert tuple(r.name for r in METRIC_RECORDS if r.pipeline) == vocabulary.PIPELINE_METRICS
    assert tuple(r.name for r in METRIC_RECORDS if r.audit_default) == vocabulary.AUDIT_METRICS
    assert tuple(r.name for r in METRIC_RECORDS if r.needs_score) == vocabulary.SCORE_METRICS
    assert set(sums.PROPORTIONS) == {r.name for r in METRIC_RECORDS if r.proportion}
    assert set(sums.RATIOS_OF_SUMS) == {r.name for r in METRIC_RECORDS if r.ratio_of_sums}
    for record in METRIC_RECORDS:
        assert INTERVAL_METHODS[record.name] == record.interval
        assert sums.terms_for([record.name]) == record.terms
        among, within = PERMUTATION_DESIGNS[record.name]
        assert tuple(registry.CATEGORIES[c] for c in among) == record.design[0] and within == record.design[1]
        assert DENOMINATOR.get(record.name, "rows") == record.size_denominator


def test_the_tables_hold_the_values_the_audit_was_written_with():
    # The values the per-metric tables had before the registry (spelled out here as the reference).
    tn, fp, fn, tp = range(4)
    assert sums.PROPORTIONS["sensitivity"] == ((tp,), (tp, fn))
    assert sums.PROPORTIONS["precision"] == ((tp,), (tp, fp))
    assert sums.PROPORTIONS["accuracy"] == ((tp, tn), (tn, fp, fn, tp))
    assert PERMUTATION_DESIGNS["false_positive_rate"] == ((tn, fp), None)
    assert PERMUTATION_DESIGNS["auc"] == ((tn, fp, fn, tp), "label")
    assert PERMUTATION_DESIGNS["observed_expected_ratio"] == ((tn, fp, fn, tp), "score")
    assert PERMUTATION_DESIGNS["log_loss"] == ((tn, fp, fn, tp), None)
    assert DENOMINATOR == {
        "sensitivity": "positives",
        "false_negative_rate": "positives",
        "specificity": "negatives",
        "false_positive_rate": "negatives",
        "precision": "predicted positives",
        "auc": "smaller class",
        "balanced_accuracy": "smaller class",
    }
    assert {m: INTERVAL_METHODS[m] for m in ("auc", "log_loss", "net_benefit", "label_rate")} == {
        "auc": "auc_score",
        "log_loss": "bca",
        "net_benefit": "bca",
        "label_rate": "wilson",
    }
    assert vocabulary.DISPARITY_METRICS == ("predicted_positive_rate", "false_positive_rate", "false_negative_rate")
    assert set(FAIRNESS_METRICS) == {
        "predicted_positive_rate",
        "sensitivity",
        "false_positive_rate",
        "false_negative_rate",
    }


def test_ratio_of_sums_values_are_the_records_row_values():
    import numpy as np

    y = np.array([0.0, 1.0, 1.0, 0.0])
    r = np.array([0.2, 0.7, 0.4, 0.9])
    a, b = sums.ratio_of_sums_values("observed_expected_ratio", y, r, threshold=0.5, odds=0.25)
    assert a.tolist() == y.tolist() and b.tolist() == r.tolist()
    a, b = sums.ratio_of_sums_values("net_benefit", y, r, threshold=0.5, odds=0.25)
    assert a.tolist() == [0.0, 1.0, 0.0, -0.25] and b.tolist() == [1.0] * 4  # TN, TP, FN, FP
    with pytest.raises(ValueError, match="'auc' is not a ratio of sums"):
        sums.ratio_of_sums_values("auc", y, r, threshold=0.5, odds=1.0)


def test_fairness_statistics_have_one_record_each():
    assert tuple(s.name for s in FAIRNESS_RECORDS) == vocabulary.FAIRNESS_STATISTICS
    assert {s.name: s.label for s in FAIRNESS_RECORDS} == vocabulary.FAIRNESS_LABELS
    assert tuple(s.name for s in FAIRNESS_RECORDS if s.over == "family") == vocabulary.FAMILY_STATISTICS
    for s in FAIRNESS_RECORDS:
        assert s.equality == (1.0 if s.name.endswith("ratio") else 0.0)  # the names say their kind
    assert FAIRNESS_REGISTRY["disparity_ratio"].over == "pair"


# ---- the checks -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "changes", "match"),
    [
        ("auc", dict(interval="percentile"), r"'auc': interval must be one of"),
        ("auc", dict(denominator=None), r"'auc': denominator \(of the minimum-size rule\) must be one of"),
        ("auc", dict(permuted_among=None), r"'auc': permuted_among .* must be a tuple of distinct categories"),
        ("log_loss", dict(permuted_within="bins"), r"'log_loss': permuted_within must be one of"),
        ("log_loss", dict(interval="wilson"), r"'log_loss': the 'wilson' interval is the proportions'"),
        ("brier_score", dict(ratio_of_sums=None), r"'brier_score': the 'bca' interval needs ratio_of_sums"),
        ("sensitivity", dict(interval="bca"), r"'sensitivity': the 'wilson' interval is the proportions'"),
        ("sensitivity", dict(denominator="positives"), r"a proportion's test design and denominator follow"),
        ("sensitivity", dict(proportion=(("TP",), ("TP", "TN"))), r"no minimum-size rule for the denominator"),
        ("sensitivity", dict(proportion=(("TP", "FN"), ("TP", "FN"))), r"must be a proper subset"),
        ("sensitivity", dict(proportion=(("XX",), ("TP", "FN"))), r"numerator must be a tuple of distinct categories"),
        ("precision", dict(fairness=("predictive_parity",)), r"unknown fairness statistics \['predictive_parity'\]"),
        ("accuracy", dict(label=""), r"'accuracy' has no label"),
        ("accuracy", dict(higher_is_better="yes"), r"higher_is_better must be True, False or None"),
        ("auc", dict(interval="mover_wilson"), r"'mover_wilson' interval is that of a mean of proportions"),
        (
            "auc",
            dict(interval="mover_wilson", mean_of=("sensitivity", "false_negative_rate")),
            r"disjoint denominators",
        ),
        ("auc", dict(interval="mover_wilson", mean_of=("sensitivity", "auc")), r"at least two proportion metrics"),
    ],
)
def test_an_incomplete_or_inconsistent_record_is_named(name, changes, match):
    with pytest.raises(RegistryError, match=match):
        check_metric_records(_replaced(name, **changes))


def test_names_are_distinct_identifiers_and_some_metric_is_in_each_list():
    with pytest.raises(RegistryError, match="metric 'auc' has two records"):
        check_metric_records((*METRIC_RECORDS, METRIC_REGISTRY["auc"]))
    with pytest.raises(RegistryError, match="lower-case identifier; got 'F1 score'"):
        check_metric_records((*METRIC_RECORDS, dataclasses.replace(METRIC_REGISTRY["auc"], name="F1 score")))
    with pytest.raises(RegistryError, match="no metric record has pipeline=True"):
        check_metric_records(tuple(dataclasses.replace(r, pipeline=False) for r in METRIC_RECORDS))
    check_metric_records(METRIC_RECORDS)  # the registry itself passes
    with pytest.raises(RegistryError, match="kind must be 'difference' or 'ratio'; got 'gap'"):
        check_fairness_records((dataclasses.replace(FAIRNESS_RECORDS[0], kind="gap"),))


def test_the_engine_check_names_a_record_without_formula_and_a_slot_without_record():
    new = dataclasses.replace(METRIC_REGISTRY["auc"], name="f1_score")
    with pytest.raises(RegistryError, match=r"records \['f1_score'\] have no slot in engine/sums.py"):
        sums.check_engine_records((*METRIC_RECORDS, new))
    # a slot but no formula: metrics_from_sums never writes it
    slots = {**sums.METRIC_SLOTS, "f1_score": sums.N_METRIC_SLOTS}
    with pytest.raises(RegistryError, match=r"metrics_from_sums writes no value for \['f1_score'\]"):
        sums.check_engine_records((*METRIC_RECORDS, new), slots)
    with pytest.raises(RegistryError, match=r"engine/sums.py has slots for \['auc'\], which have no metric record"):
        sums.check_engine_records(tuple(r for r in METRIC_RECORDS if r.name != "auc"))
    with pytest.raises(RegistryError, match=r"needs the row terms \['entropy'\]"):
        sums.check_engine_records(_replaced("log_loss", terms=("entropy",)))
    with pytest.raises(RegistryError, match=r"ratio_of_sums names \['weight'\]"):
        sums.check_engine_records(_replaced("brier_score", ratio_of_sums=("brier", "weight")))
    sums.check_engine_records(METRIC_RECORDS)


@pytest.mark.parametrize(
    "name, proportion",
    [
        ("precision", (("FP",), ("FP", "TP"))),  # the false discovery rate's record over precision's formula
        ("sensitivity", (("TN",), ("TN", "FP"))),  # specificity's categories
        ("false_positive_rate", (("FP",), ("TN", "FP", "FN", "TP"))),  # a share of all rows
    ],
)
def test_a_proportion_whose_record_and_formula_disagree_fails_the_check(name, proportion):
    """A metric's record (its categories: its Wilson interval, exact test and size rule) and its formula in
    metrics_from_sums define one proportion; a record over other categories than the formula's is refused,
    naming the metric, the two values and the tallies."""
    with pytest.raises(RegistryError, match=rf"metric record '{name}' is the share of .* but its formula"):
        sums.check_engine_records(_replaced(name, proportion=proportion))


def _import_edited_registry(old: str, new: str) -> None:
    """Run the registry's source with ``old`` replaced by ``new``, as an import of the edited file would."""
    assert REGISTRY_SOURCE.count(old) == 1, old
    module = types.ModuleType("edited_registry")
    module.__dict__["__name__"] = "edited_registry"
    sys.modules["edited_registry"] = module  # dataclasses look their module up
    try:
        exec(compile(REGISTRY_SOURCE.replace(old, new), registry.__file__, "exec"), module.__dict__)
    finally:
        del sys.modules["edited_registry"]


def test_a_record_that_forgets_its_test_design_or_denominator_fails_at_import():
    # The AUC's record without its permutation design and denominator: before the registry, a metric
    # missing from PERMUTATION_DESIGNS failed with a KeyError in the middle of an audit, and one missing
    # from DENOMINATOR fell back to the slice size without a word.
    # (The edited module has its own RegistryError class, a ValueError.)
    auc = 'permuted_among=_ALL_ROWS, permuted_within="label", denominator="smaller class", pipeline=True,'
    with pytest.raises(ValueError, match=r"'auc': permuted_among") as raised:
        _import_edited_registry(auc, "pipeline=True,")
    assert type(raised.value).__name__ == "RegistryError"
    with pytest.raises(ValueError, match=r"'auc': denominator") as raised:
        _import_edited_registry(auc, 'permuted_among=_ALL_ROWS, permuted_within="label", pipeline=True,')
    assert type(raised.value).__name__ == "RegistryError"


def test_a_record_without_a_formula_fails_when_the_engine_is_imported(tmp_path):
    # A complete record that the engine has no slot or formula for: importing the engine (as every
    # audit and pipeline job does) fails with the record's name, before any work.
    code = (
        "import dataclasses\n"
        "from disaggregated_eval import registry\n"
        "new = dataclasses.replace(registry.METRIC_REGISTRY['auc'], name='f1_score')\n"
        "registry.METRIC_RECORDS = (*registry.METRIC_RECORDS, new)\n"
        "import disaggregated_eval.engine\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 1
    assert "RegistryError: metric records ['f1_score'] have no slot in engine/sums.py" in run.stderr
