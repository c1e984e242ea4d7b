"""The report's statistics on samples whose answers are known: spread, the ratio's interval, the flag."""

from __future__ import annotations

import pytest

from spotcron.present.stats import (
    REPEATS_FOR_CONFIDENCE,
    Ratio,
    _u_counts,
    achieved_confidence,
    ratio_of_medians,
    regression_band,
    spread,
)


def test_spread_of_a_known_sample():
    s = spread([7, 1, 3, 5])  # sorted 1 3 5 7
    assert (s.n, s.median, s.low, s.high) == (4, 4, 1, 7)
    # Inclusive quartiles: positions 0.75 and 2.25 between the order statistics.
    assert (s.q1, s.q3, s.iqr) == (2.5, 5.5, 3.0)
    assert s.stdev == pytest.approx(2.5819889, rel=1e-6)
    one = spread([42.0])
    assert (one.median, one.q1, one.q3, one.iqr, one.stdev) == (42, 42, 42, 0, None)
    assert spread([]) is None
    assert spread([10, 12, 11]).to_json() == {"n": 3, "median": 11, "q1": 10.5, "q3": 11.5, "iqr": 1.0,
                                             "stdev": 1.0, "min": 10, "max": 12}


def test_the_interval_is_the_exact_rank_interval_of_the_pairwise_ratios():
    base, sample = [9.0, 10.0, 11.0, 12.5], [18.0, 19.5, 20.0, 23.0]
    ratio = ratio_of_medians(sample, base)
    assert ratio.value == pytest.approx(19.75 / 10.5)
    pairwise = sorted(a / b for a in sample for b in base)
    # 4 runs a side: C(8, 4) = 70 orderings, P(U = 0) = 1/70, P(U <= 1) = 2/70 > 2.5%: k = 1, the extremes.
    assert (ratio.low, ratio.high) == (pairwise[0], pairwise[-1])
    assert ratio.confidence == pytest.approx(1 - 2 / 70)
    assert ratio.low < ratio.value < ratio.high and ratio.supported is True and ratio.mark == ""


def test_the_stated_confidence_is_what_the_run_counts_allow():
    """Before: every interval said 95%; at 3 runs a side the bootstrap's held the true ratio 90.7% of
    the time (BENCHMARKS.md), because 3 a side can give no more than 1 - 2/C(6, 3) = 90%."""
    assert ratio_of_medians([10, 11, 12], [20, 21, 25]).confidence == pytest.approx(0.9)
    assert achieved_confidence(3, 3) == pytest.approx(0.9)
    assert achieved_confidence(5, 5) == pytest.approx(1 - 2 * 4 / 252)  # k = 3: P(U <= 2) = 4/252
    assert achieved_confidence(REPEATS_FOR_CONFIDENCE, REPEATS_FOR_CONFIDENCE) >= 0.95
    assert achieved_confidence(REPEATS_FOR_CONFIDENCE - 1, REPEATS_FOR_CONFIDENCE - 1) < 0.95
    assert achieved_confidence(300, 300) == pytest.approx(0.95, abs=0.002)  # the normal approximation


def test_u_counts_are_the_orderings():
    counts = _u_counts(3, 3)
    assert counts.sum() == 20 and counts.tolist() == [1, 1, 2, 3, 3, 3, 3, 2, 1, 1]


def test_many_runs_use_bisection_and_agree_with_the_pairwise_answer(monkeypatch):
    sample = [1.0 + (i * 7919 % 1000) / 1000 for i in range(60)]
    base = [2.0 + (i * 104729 % 1000) / 500 for i in range(50)]
    exact = ratio_of_medians(sample, base)
    monkeypatch.setattr("spotcron.present.stats.EXACT_PAIRS", 10)
    bisected = ratio_of_medians(sample, base)
    assert bisected.low == pytest.approx(exact.low, rel=1e-9) and bisected.high == pytest.approx(exact.high, rel=1e-9)


def test_identical_runs_give_a_point_interval():
    assert ratio_of_medians([20, 20, 20], [10, 10, 10]) == Ratio(2.0, 2.0, 2.0, 0.9, alike=True)


def test_an_overlapping_spread_does_not_support_a_difference():
    ratio = ratio_of_medians([10.2, 9.1, 11.0, 10.4], [10.0, 9.5, 10.8, 9.9])
    assert ratio.low < 1 < ratio.high
    assert ratio.supported is False and ratio.mark == "~"


def test_under_two_runs_there_is_no_interval():
    ratio = ratio_of_medians([20.0], [10.0, 11.0, 12.0])
    assert (ratio.value, ratio.low, ratio.high, ratio.supported, ratio.mark) == (20 / 11, None, None, None, "?")
    assert ratio_of_medians([], [1.0]) is None and ratio_of_medians([1.0], [0.0]) is None


def test_regression_flag_on_a_known_history():
    steady = [100, 102, 98, 101, 99]
    # MAD of the earlier ticks is 1: the band is 100 ± max(3.5 / 0.6745, 5) = ±5.19.
    band = regression_band([*steady, 106])
    assert band.center == 100 and band.high == pytest.approx(100 + 3.5 / 0.6745)
    assert band.flag == "higher" and band.history == 5
    assert regression_band([*steady, 105]).flag is None
    assert regression_band([*steady, 94]).flag == "lower"
    # A perfectly flat history still allows 5%: no flag for noise.
    flat = regression_band([50, 50, 50, 50, 52])
    assert (flat.low, flat.high, flat.flag) == (47.5, 52.5, None)
    # Too short a history: no band, no flag.
    assert regression_band([100, 101, 99, 150]) is None
    # Only the last 12 earlier ticks count: an old slow era does not hide today's regression.
    band = regression_band([500] * 10 + [100] * 12 + [120])
    assert band.history == 12 and band.center == 100 and band.flag == "higher"
