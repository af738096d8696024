"""Calibration per slice: the bins table, the expected calibration error and the observed/expected ratio.

Point values are checked against direct computations (pandas group sums, the library's
``calibration_curve`` for the whole file); the bootstrap against a row bootstrap written here (widths
agree within Monte-Carlo error); the BCa interval's acceleration against the generic jackknife.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from disaggregated_eval import seeds

FAST = dict(n_resamples=300, n_permutations=0)


def synthetic(n: int = 2500, seed: int = 11) -> pd.DataFrame:
    rng = np.random.default_rng(seeds.seed_sequence(seed, "test", "calibration-data"))
    data = pd.DataFrame({"g": rng.choice(["a", "b", "c"], n, p=[0.6, 0.3, 0.1])})
    risk = rng.beta(2, 5, n)
    data["y"] = rng.binomial(1, np.clip(risk * (1.0 + 0.5 * (data["g"] == "b")), 0, 1))  # b is under-predicted
    data["r"] = risk
    data["w"] = rng.uniform(0.5, 2.0, n)
    data["hard"] = (risk >= 0.3).astype(float)
    return data


@pytest.fixture(scope="module")
def data():
    return synthetic()


@pytest.fixture(scope="module")
def result(data):
    from disaggregated_eval.audit import audit

    return audit(data, label="y", scores=["r", "hard"], groups=["g"], calibration_bins=8,
                 metrics=["observed_expected_ratio", "false_positive_rate"], **FAST)  # fmt: skip


def _bins(scores: np.ndarray, k: int) -> np.ndarray:
    from disaggregated_eval.audit.calibration_table import score_bins

    return score_bins(scores, k)[0]


def test_overall_bins_are_the_librarys_calibration_curve(data, result):
    from disaggregated_eval.calibration import calibration_curve

    curve = calibration_curve(data["y"].to_numpy(float), data["r"].to_numpy(), n_bins=8)
    rows = result.calibration[(result.calibration["model"] == "r") & (result.calibration["slice"] == "overall")]
    assert list(rows["bin"]) == list(curve["bin"]) and list(rows["n"]) == list(curve["n"])
    # same sums, another summation order; Wilson by statsmodels there, by disaggregated_eval.intervals here
    for ours, theirs in (("mean_predicted", "mean_score"), ("observed", "fraction_positive"), ("ci_low", "ci_low"),
                         ("ci_high", "ci_high")):  # fmt: skip
        np.testing.assert_allclose(rows[ours].to_numpy(), curve[theirs].to_numpy(), rtol=0, atol=1e-12)


def test_slice_bins_ece_and_oe_equal_direct_sums(data, result):
    frame = data.assign(bin=_bins(data["r"].to_numpy(), 8))
    summary = result.calibration_summary[result.calibration_summary["model"] == "r"].set_index(["slice", "statistic"])
    bins = result.calibration[result.calibration["model"] == "r"]
    for level, group in frame.groupby("g"):
        name = f"g={level}"
        sums = group.groupby("bin").agg(n=("y", "size"), y=("y", "sum"), r=("r", "sum"))
        ours = bins[bins["slice"] == name].set_index("bin")
        assert (ours.loc[sums.index, "n"] == sums["n"]).all()
        np.testing.assert_allclose(ours.loc[sums.index, "observed"], sums["y"] / sums["n"], atol=1e-12)
        np.testing.assert_allclose(ours.loc[sums.index, "mean_predicted"], sums["r"] / sums["n"], atol=1e-12)
        ece = float(np.abs(sums["y"] - sums["r"]).sum() / len(group))
        assert summary.loc[(name, "expected_calibration_error"), "estimate"] == pytest.approx(ece, abs=1e-12)
        oe = group["y"].sum() / group["r"].sum()
        assert summary.loc[(name, "observed_expected_ratio"), "estimate"] == pytest.approx(oe, abs=1e-12)
    # the under-predicted slice b: O/E near 1.5 and above overall, its interval clear of overall's
    b = summary.loc[("g=b", "observed_expected_ratio")]
    assert b["estimate"] > 1.3 and b["vs_overall_low"] > 0
    # the observed/expected interval is the slices table's (the audit computed that metric)
    slices = result.slices[(result.slices["model"] == "r") & (result.slices["metric"] == "observed_expected_ratio")]
    oe = summary.xs("observed_expected_ratio", level="statistic")
    for row in slices.itertuples():
        assert (oe.loc[row.slice, "ci_low"], oe.loc[row.slice, "ci_high"]) == (row.ci_low, row.ci_high)


def test_a_model_of_hard_predictions_has_no_calibration(result):
    assert set(result.calibration["model"]) == {"r"} and set(result.calibration_summary["model"]) == {"r"}


def test_weighted_bins_use_weights_and_the_effective_size(data):
    from disaggregated_eval.audit import audit
    from disaggregated_eval.intervals import wilson_interval

    result = audit(data, label="y", scores=["r"], groups=["g"], sample_weight="w", calibration_bins=5,
                   metrics=["false_positive_rate"], **FAST)  # fmt: skip
    frame = data.assign(bin=_bins(data["r"].to_numpy(), 5))
    group = frame[(frame["g"] == "a") & (frame["bin"] == 2)]
    row = result.calibration[(result.calibration["slice"] == "g=a") & (result.calibration["bin"] == 2)].iloc[0]
    w = group["w"].to_numpy()
    observed = float(np.sum(w * group["y"]) / w.sum())
    assert row["observed"] == pytest.approx(observed, abs=1e-12)
    assert row["mean_predicted"] == pytest.approx(float(np.sum(w * group["r"]) / w.sum()), abs=1e-12)
    low, high = wilson_interval(np.array(observed), np.array(w.sum() ** 2 / np.sum(w * w)), 0.95)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((float(low), float(high)), abs=1e-12)
    ece = result.calibration_summary[(result.calibration_summary["slice"] == "g=a")
                                     & (result.calibration_summary["statistic"] == "expected_calibration_error")]  # fmt: skip
    part = frame[frame["g"] == "a"]
    d = (part["w"] * (part["y"] - part["r"])).groupby(part["bin"]).sum()
    assert ece["estimate"].iloc[0] == pytest.approx(float(np.abs(d).sum() / part["w"].sum()), abs=1e-12)


def test_the_bootstrap_spread_of_ece_matches_a_row_bootstrap(data):
    # The audit's ECE replicates come from unit counts on the engine's resampling; a plain row bootstrap
    # written here must give the same spread of the overall ECE: standard deviations within 20% (with
    # B = 400 on each side the ratio of two standard deviations has a relative Monte-Carlo error of about
    # sqrt(2 / (2 x 400)) = 5%, so 20% is 4 of them).
    from disaggregated_eval.audit import audit

    result = audit(data, label="y", scores=["r"], groups=["g"], metrics=["false_positive_rate"], n_resamples=400,
                   n_permutations=0, calibration_bins=8, confidence=0.6827)  # fmt: skip
    row = result.calibration_summary[(result.calibration_summary["slice"] == "overall")
                                     & (result.calibration_summary["statistic"] == "expected_calibration_error")].iloc[0]  # fmt: skip
    audit_sd = (row["ci_high"] - row["ci_low"]) / 2  # a 68.27% interval is about +- 1 sd
    y, r = data["y"].to_numpy(float), data["r"].to_numpy()
    bins = _bins(r, 8)
    rng = np.random.default_rng(seeds.seed_sequence(20250101, "test", "ece-row-bootstrap"))
    values = []
    for _ in range(400):
        i = rng.integers(0, len(y), len(y))
        d = np.bincount(bins[i], weights=y[i] - r[i], minlength=8)
        values.append(np.abs(d).sum() / len(y))
    assert audit_sd == pytest.approx(np.std(values, ddof=1), rel=0.2)


def test_ece_acceleration_is_the_jackknife_of_the_ece():
    from disaggregated_eval.audit.calibration_table import _ece_accelerations
    from disaggregated_eval.audit.slices import Attribute, plan_slices
    from disaggregated_eval.intervals import jackknife_acceleration

    rng = np.random.default_rng(seeds.seed_sequence(20250101, "test", "ece-jackknife"))
    n = 120
    codes = rng.integers(0, 2, n)
    plan = plan_slices([Attribute("g", ("a", "b"), codes)], intersections=1)
    y, r = rng.binomial(1, 0.4, n).astype(float), rng.uniform(size=n)
    bins = rng.integers(0, 4, n)
    w = np.ones(n)
    acc = _ece_accelerations(plan, y, r, w, bins, 4)
    for s, rows in ((0, np.arange(n)), (1, np.flatnonzero(codes == 0)), (2, np.flatnonzero(codes == 1))):
        loo = []
        for i in rows:
            keep = rows[rows != i]
            d = np.bincount(bins[keep], weights=y[keep] - r[keep], minlength=4)
            loo.append(np.abs(d).sum() / keep.size)
        assert acc[s] == pytest.approx(jackknife_acceleration(np.array(loo)), abs=1e-10)


def test_unit_counts_and_row_draws_give_the_same_spread(data, monkeypatch):
    # Deciles make few units (cell, label, score): the resamples are multinomial unit counts; with units
    # switched off they are row indices summed by the kernel. Same distribution: the overall ECE's
    # 68% half-widths agree within 20%. With one bin per decile the ECE's bootstrap distribution is
    # lumpy (a sum of |.| of few cell sums), so its half-width from 400 resamples is noisier than a
    # smooth statistic's (ratio 0.80 seen); 2,000 resamples each bring the ratio's Monte-Carlo error
    # well inside 20% (with 4,000: 0.95-1.10 over three seeds).
    from disaggregated_eval.audit import audit, calibration_table

    deciles = data.assign(r=np.ceil(data["r"] * 10) / 10)
    options = dict(label="y", scores=["r"], groups=["g"], metrics=["false_positive_rate"], n_resamples=2000,
                   n_permutations=0, confidence=0.6827)  # fmt: skip

    def half_width(result):
        s = result.calibration_summary
        row = s[(s["slice"] == "overall") & (s["statistic"] == "expected_calibration_error")].iloc[0]
        return (row["ci_high"] - row["ci_low"]) / 2, row["estimate"]

    with_units = half_width(audit(deciles, **options))
    monkeypatch.setattr(calibration_table, "find_units", lambda *a, **k: None)
    rows = half_width(audit(deciles, **options))
    assert with_units[1] == pytest.approx(rows[1], abs=1e-12)  # the same point estimate (summation order aside)
    assert with_units[0] == pytest.approx(rows[0], rel=0.2)


def test_score_sums_given_category_counts_give_the_row_bootstraps_distribution(monkeypatch):
    # Continuous scores: the resamples draw each (cell, label, bin) category's count exactly and its score
    # sum from the normal with the sum's moments (calibration_table._score_categories). Against the row
    # draws (exact) on the same data, 2,000 resamples a side, the replicates of ECE and O/E of every slice:
    # standard deviations within 10% (each has a relative Monte-Carlo error of 1/sqrt(2 x 2000) = 1.6%,
    # the ratio 2.2%: 10% is 4.5 of them; 6,000 resamples and three seeds gave ratios 0.96-1.02) and means
    # within 0.15 standard deviations (Monte-Carlo error of the difference 0.03); point estimates to 1e-12.
    # (Not the BCa widths: on the smallest slice the ECE's BCa endpoints sit at extreme percentiles and
    # vary 0.7-2.3x between seeds on either path.) The same seed repeats exactly.
    from disaggregated_eval.audit import audit, calibration_table

    data = synthetic(n=12000, seed=5).drop(columns=["w", "hard"])
    options = dict(label="y", scores=["r"], groups=["g"], metrics=["false_positive_rate"], n_resamples=2000,
                   n_permutations=0, calibration_bins=10)  # fmt: skip
    y, r = data["y"].to_numpy(float), data["r"].to_numpy()
    cells = pd.factorize(data["g"])[0]
    bins = calibration_table.score_bins(r, 10)[0]
    units, spread = calibration_table._score_categories(cells, y, np.ones(len(y)), [r], [bins])
    assert units is not None and units.n_units == 3 * 2 * 10 and np.all(spread.sd > 0)

    replicates = []
    bca = calibration_table.bca_interval
    monkeypatch.setattr(calibration_table, "bca_interval", lambda reps, *a: replicates.append(reps) or bca(reps, *a))

    def run():
        replicates.clear()
        table = audit(data, **options).calibration_summary
        return table, [reps.copy() for reps in replicates]  # ECE, then O/E: (n_resamples, 4 slices)

    approximate, draws = run()
    again, draws_again = run()
    pd.testing.assert_frame_equal(approximate, again, check_exact=True)
    assert all(np.array_equal(a, b) for a, b in zip(draws, draws_again))
    monkeypatch.setattr(calibration_table, "_score_categories", lambda *a, **k: (None, None))
    rows, row_draws = run()
    assert np.allclose(approximate["estimate"], rows["estimate"], rtol=0, atol=1e-12)
    for a, b in zip(draws, row_draws):
        sd = b.std(axis=0, ddof=1)
        assert a.shape == (2000, 4) and np.all(sd > 0)
        assert np.all(np.abs(a.std(axis=0, ddof=1) / sd - 1) < 0.10), a.std(axis=0, ddof=1) / sd
        assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) < 0.15 * sd)
