"""The report's statistics on samples whose answers are known: spread, the ratio's interval, the flag."""

from __future__ import annotations

import itertools
import statistics

import pytest

from spotcron.present.stats import Ratio, ratio_of_medians, regression_band, spread


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


def _exact_interval(sample, base, tail=0.025):
    """Every equally likely pair of resamples, enumerated: the distribution the bootstrap samples."""
    ratios = sorted(statistics.median(a) / statistics.median(b)
                    for a in itertools.product(sample, repeat=len(sample))
                    for b in itertools.product(base, repeat=len(base)))
    return ratios[int(tail * len(ratios))], ratios[int((1 - tail) * len(ratios)) - 1]


def test_the_interval_is_the_bootstrap_distribution_of_the_ratio_of_medians():
    base, sample = [9.0, 10.0, 11.0, 12.5], [18.0, 19.5, 20.0, 23.0]
    ratio = ratio_of_medians(sample, base)
    assert ratio.value == pytest.approx(19.75 / 10.5)
    low, high = _exact_interval(sample, base)
    # 4000 seeded resamples land on the exact percentiles up to a neighbouring ratio.
    assert ratio.low == pytest.approx(low, rel=0.03) and ratio.high == pytest.approx(high, rel=0.03)
    assert ratio.low < ratio.value < ratio.high and ratio.supported is True and ratio.mark == ""
    assert ratio_of_medians(sample, base) == ratio  # seeded: the same runs give the same interval


def test_identical_runs_give_a_point_interval():
    assert ratio_of_medians([20, 20, 20], [10, 10, 10]) == Ratio(2.0, 2.0, 2.0)


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
