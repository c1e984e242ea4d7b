"""A report's figures never contradict each other: a rate is the reciprocal of the time per unit
beside it, an outlier is a run far from its configuration's median on a ratio scale, and an
interval of width 0 says why instead of showing `1.93 (1.93-1.93)`."""

from __future__ import annotations

import json

import pytest

from spotcron.core.metrics import parse_metrics
from spotcron.present import exports
from spotcron.present.report import benchmark_report, verdict
from spotcron.present.stats import Ratio, ratio_of_medians
from tests.present.test_benchmark_comparisons import run, spec


def _with_work(record, work: float):
    metrics = json.loads(json.dumps({"work": {"value": work, "unit": "numbers"},
                                     "metrics": {"train_seconds": {"value": record.metrics.metrics[
                                         "train_seconds"].value, "unit": "s"}}}))
    return record.model_copy(update={"metrics": parse_metrics(json.dumps(metrics).encode())})


@pytest.mark.parametrize("runs", [
    [(2.2e-3, 1e6), (22.2e-3, 1e6)],  # the newcomer's 2 repeats: 2.2 ns and 22.2 ns a number
    [(1.0, 1e6), (3.0, 2e6), (2.0, 4e6), (9.0, 1e6)],  # 4 repeats of unequal work and time
])
def test_the_rate_is_the_reciprocal_of_the_time_per_unit(runs):
    records = [_with_work(run("base", i, {"mlp": seconds}), work) for i, (seconds, work) in enumerate(runs, 1)]
    records += [_with_work(run("e2", i, {"mlp": seconds * 2}), work) for i, (seconds, work) in enumerate(runs, 1)]
    report = benchmark_report("bench", records, None, "us-central1", spec=spec())
    for row in report.rows:
        assert row.throughput.median * row.time_per_unit.median == pytest.approx(1.0)
        assert row.throughput.low * row.time_per_unit.high == pytest.approx(1.0)
        assert row.throughput.high * row.time_per_unit.low == pytest.approx(1.0)
    assert "units/s: 1 / the time per unit" in exports.report_caption(report)


def _times(variant: str, seconds: list[float]):
    return [run(variant, i, {"mlp": s}) for i, s in enumerate(seconds, 1)]


def test_a_run_far_below_its_median_is_an_outlier_and_one_at_0_9x_never_is():
    # highcpu-16's third run at 0.9x beside two alike; e2's third run at 1.0 s against 8.5 s and 16 s.
    runs = _times("base", [14.4, 14.5, 13.0]) + _times("e2", [8.5, 16.0, 1.0])
    report = benchmark_report("bench", runs, None, "us-central1", spec=spec())
    warnings = " ".join(report.warnings)
    assert "base-r3 is an outlier" not in warnings
    assert "run 20261123-0300-e2-r3 is an outlier (1 s, 0.12x the median of 3)" in warnings
    assert "run 20261123-0300-e2-r2 is an outlier (16 s, 1.9x the median of 3)" in warnings


def test_a_slow_run_is_an_outlier_and_two_runs_far_apart_are_said_to_disagree():
    runs = _times("base", [10.0, 10.5, 31.0]) + _times("e2", [1.0, 16.0])
    warnings = " ".join(benchmark_report("bench", runs, None, "us-central1", spec=spec()).warnings)
    assert "run 20261123-0300-base-r3 is an outlier (31 s, 3.0x the median of 3)" in warnings
    assert "e2: its 2 runs disagree, one took 16.0x the other's time" in warnings


def test_an_interval_of_width_zero_says_why():
    alike = ratio_of_medians([1.93, 1.93], [1.0, 1.0])
    assert exports.format_ratio(alike) == "1.93x (no spread: runs alike)"
    tie = Ratio(1.93, 1.93, 1.93, 0.9)
    assert exports.format_ratio(tie) == "1.93x (no spread: ratios tie)"
    close = Ratio(1.93, 1.9301, 1.9349, 0.9)  # apart, but not at two decimals
    assert exports.format_ratio(close) == "1.93x (1.930-1.935)"
    closer = Ratio(0.39, 0.38996, 0.38997, 0.9)  # runs billed the one-minute minimum: costs a hair apart
    assert exports.format_ratio(closer) == "0.39x (under 0.01 wide)"
    assert exports.format_ratio(Ratio(1.93)) == "1.93x ?"


def test_a_verdict_never_shows_an_interval_of_one_value():
    runs = _times("base", [10.0, 10.0, 10.0]) + _times("e2", [20.0, 20.0, 20.0])
    report = benchmark_report("bench", runs, None, "us-central1", spec=spec())
    text = verdict(report, report.row("e2")) + " ".join(exports.report_cells(report)[1])
    assert "2.0-2.0" not in text and "2.00-2.00" not in text
    assert "no spread: runs alike" in text
