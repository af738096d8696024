"""Calibration per slice: the bins table, the expected and the debiased calibration error, observed/expected.

Point values are checked against direct computations (pandas group sums, the library's
``calibration_curve`` for the whole file); the observed/expected bootstrap against a row bootstrap written
here (widths agree within Monte-Carlo error); the calibration error's interval against its definition and,
by simulation, against a calibrated score (it must reach 0).
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
        # the debiased squared error: sum_b p_b (d_b^2 - var(e) / n_b), bins with at least two rows
        e = (group["y"] - group["r"]).groupby(group["bin"])
        stats = pd.DataFrame({"n": e.size(), "d": e.mean(), "v": e.var(ddof=1) / e.size()})
        stats = stats[stats["n"] >= 2]
        squared = float((stats["n"] / len(group) * (stats["d"] ** 2 - stats["v"])).sum())
        ce = summary.loc[(name, "calibration_error")]
        assert ce["estimate"] == pytest.approx(np.sqrt(max(squared, 0.0)), abs=1e-12)
        assert ce["ci_low"] <= ce["estimate"] <= ce["ci_high"] and ce["interval"] == "scaled_chi2"
        assert np.isnan(summary.loc[(name, "expected_calibration_error"), "ci_low"])  # a plug-in: no interval
    # the under-predicted slice b: O/E near 1.5 and above overall, its interval clear of overall's; its
    # calibration error clear of 0, and of overall's calibration
    b = summary.loc[("g=b", "observed_expected_ratio")]
    assert b["estimate"] > 1.3 and b["vs_overall_low"] > 0
    assert summary.loc[("g=b", "calibration_error"), "ci_low"] > 0
    assert summary.loc[("g=b", "calibration_error"), "vs_overall_low"] > 0
    # O/E and its difference from overall are the slices and comparisons tables' (no bootstrap of its own)
    comps = result.comparisons[(result.comparisons["model"] == "r") & (result.comparisons["kind"] == "vs_overall")
                               & (result.comparisons["metric"] == "observed_expected_ratio")].set_index("slice")  # fmt: skip
    assert b["vs_overall"] == comps.loc["g=b", "difference"]
    assert (b["vs_overall_low"], b["vs_overall_high"]) == (comps.loc["g=b", "ci_low"], comps.loc["g=b", "ci_high"])
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


def test_the_bootstrap_spread_of_the_oe_ratio_matches_a_row_bootstrap(data):
    # Without the metric observed_expected_ratio the calibration summary bootstraps it itself, from unit
    # counts on the engine's resampling; a plain row bootstrap written here must give the same spread of
    # the overall O/E: standard deviations within 20% (with B = 400 on each side the ratio of two standard
    # deviations has a relative Monte-Carlo error of about sqrt(2 / (2 x 400)) = 5%, so 20% is 4 of them).
    from disaggregated_eval.audit import audit

    result = audit(data, label="y", scores=["r"], groups=["g"], metrics=["false_positive_rate"], n_resamples=400,
                   n_permutations=0, calibration_bins=8, confidence=0.6827)  # fmt: skip
    row = result.calibration_summary[(result.calibration_summary["slice"] == "overall")
                                     & (result.calibration_summary["statistic"] == "observed_expected_ratio")].iloc[0]  # fmt: skip
    audit_sd = (row["ci_high"] - row["ci_low"]) / 2  # a 68.27% interval is about +- 1 sd
    y, r = data["y"].to_numpy(float), data["r"].to_numpy()
    rng = np.random.default_rng(seeds.seed_sequence(20250101, "test", "oe-row-bootstrap"))
    values = []
    for _ in range(400):
        i = rng.integers(0, len(y), len(y))
        values.append(y[i].sum() / r[i].sum())
    assert audit_sd == pytest.approx(np.std(values, ddof=1), rel=0.2)


def test_the_calibration_error_reaches_zero_for_a_calibrated_score():
    # A calibrated score (y ~ Bernoulli(r)) on three slices of 150-600 rows, decile-like bins: the truth of
    # every slice's calibration error and of its distance from overall's calibration is 0. Over 30 audits,
    # the intervals must reach 0 in at least 26 of the 30 for every slice: each reaches 0 with probability
    # at least about 97.5% by construction (the lower bound is positive only when the test of calibration at
    # level 2.5% rejects; 97-99% seen in the validity study), so 5 or more misses of 30 have probability
    # below 0.005 at exactly 97.5%. The plug-in ECE is positive in every audit (its old BCa interval never
    # reached 0: the simulation, 0% coverage).
    from disaggregated_eval.audit import audit
    from disaggregated_eval.seeds import generator

    reach = np.zeros((2, 4), dtype=int)
    ece_positive = 0
    for r in range(30):
        rng = generator(20250101, "test", "calibrated-score", r)
        n = 1050
        g = rng.choice(["a", "b", "c"], n, p=[4 / 7, 2 / 7, 1 / 7])
        risk = rng.beta(2, 5, n)
        frame = pd.DataFrame({"g": g, "r": risk, "y": (rng.random(n) < risk).astype(int)})
        summary = audit(frame, label="y", scores=["r"], groups=["g"], metrics=["false_positive_rate"],
                        n_resamples=200, n_permutations=0, seed=r).calibration_summary  # fmt: skip
        ce = summary[summary["statistic"] == "calibration_error"].set_index("slice")
        for k, name in enumerate(["overall", "g=a", "g=b", "g=c"]):
            reach[0, k] += int(ce.loc[name, "ci_low"] == 0.0)
            if name != "overall":
                reach[1, k] += int(ce.loc[name, "vs_overall_low"] == 0.0)
        ece = summary[summary["statistic"] == "expected_calibration_error"]
        ece_positive += int((ece["estimate"] > 0).all())
    assert reach[0].min() >= 26 and reach[1, 1:].min() >= 26, reach
    assert ece_positive == 30


def test_unit_counts_and_row_draws_give_the_same_spread(data, monkeypatch):
    # Deciles make few units (cell, label, score): the resamples are multinomial unit counts; with units
    # switched off they are row indices summed by the kernel. Same distribution: the overall O/E's 68%
    # half-widths agree within 20% (2,000 resamples each: the ratio of two half-widths has a relative
    # Monte-Carlo error of about 2-3%).
    from disaggregated_eval.audit import audit, calibration_table

    deciles = data.assign(r=np.ceil(data["r"] * 10) / 10)
    options = dict(label="y", scores=["r"], groups=["g"], metrics=["false_positive_rate"], n_resamples=2000,
                   n_permutations=0, confidence=0.6827)  # fmt: skip

    def half_width(result):
        s = result.calibration_summary
        row = s[(s["slice"] == "overall") & (s["statistic"] == "observed_expected_ratio")].iloc[0]
        return (row["ci_high"] - row["ci_low"]) / 2, row["estimate"]

    with_units = half_width(audit(deciles, **options))
    monkeypatch.setattr(calibration_table, "find_units", lambda *a, **k: None)
    rows = half_width(audit(deciles, **options))
    assert with_units[1] == pytest.approx(rows[1], abs=1e-12)  # the same point estimate (summation order aside)
    assert with_units[0] == pytest.approx(rows[0], rel=0.2)


def test_score_sums_given_category_counts_give_the_row_bootstraps_distribution(monkeypatch):
    # Continuous scores: the resamples draw each (cell, label, bin) category's count exactly and its score
    # sum from the normal with the sum's moments (calibration_table._score_categories). Against the row
    # draws (exact) on the same data, 2,000 resamples a side, the replicates of O/E of every slice:
    # standard deviations within 10% (each has a relative Monte-Carlo error of 1/sqrt(2 x 2000) = 1.6%,
    # the ratio 2.2%: 10% is 4.5 of them; 6,000 resamples and three seeds gave ratios 0.96-1.02) and means
    # within 0.15 standard deviations (Monte-Carlo error of the difference 0.03); point estimates to 1e-12.
    # The same seed repeats exactly.
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
        return table, [reps.copy() for reps in replicates]  # O/E: (n_resamples, 4 slices)

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
