"""The sentences of a benchmark report: one verdict per configuration, one per configuration and
compared metric, and the warnings (outlier runs, high noise, a busy host).

A verdict is the line a benchmarker quotes, so it carries what the table's title and caption say:
the interval with the confidence it has, and for local runs the host they ran on. A local
verdict compares the entries' runs on that host and never calls a machine type faster or slower.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spotcron.core.runs import RunRecord
from spotcron.present.compare import MetricComparison, disagreement, noisy
from spotcron.present.stats import Ratio

# report.py's BenchmarkReport and ConfigRow: report.py imports this module, so not the other way round.
BenchmarkReport = ConfigRow = Any


def verdict(report: BenchmarkReport, row: ConfigRow) -> str:
    """One line a benchmarker can quote: `t4 ran 3.1x faster than highcpu-16 (2.8-3.4), at 0.60x the
    cost per 1k samples`, with the same interval and marks as the table."""
    base = report.row(report.base)
    if row is base:
        return f"{row.name} is the base: {row.runs} run{'s' if row.runs != 1 else ''} on {row.hardware}"
    ratio = row.relative_time
    if ratio is None:
        return f"{row.name}: no time to compare with {base.name} (no measured runs on one side)"
    if report.all_local:
        return _local_verdict(report, row, base, ratio)
    if ratio.supported is False:
        speed = (f"ran neither faster nor slower than {base.name} beyond the spread of the runs "
                 f"({ratio.interval()}{'x its time' if ratio.low != ratio.high else ''})")
    else:
        faster = ratio.value <= 1
        factor = 1 / ratio.value if faster else ratio.value
        speed = f"ran {factor:.1f}x {'faster' if faster else 'slower'} than {base.name}"
        if ratio.low is not None and ratio.high is not None:
            low, high = sorted((1 / ratio.high, 1 / ratio.low) if faster else (ratio.low, ratio.high))
            shown = Ratio(factor, low, high, ratio.confidence, alike=ratio.alike)
            speed += f" ({shown.interval(1)}, {_confidence(ratio)})"
        else:
            speed += " (under 2 runs a side: no interval)"
    cost, per = (row.relative_cost_per_unit, _per_unit(report, row)) if row.relative_cost_per_unit else \
        (row.relative_cost, "run")
    if cost is None:
        return f"{row.name} {speed}"
    mark = f" {cost.mark}" if cost.mark else ""
    return f"{row.name} {speed}, at {cost.value:.2f}x{mark} the cost per {per}"


def _confidence(ratio: Ratio) -> str:
    return f"{ratio.confidence:.0%}" if ratio.confidence is not None else "no interval"


def _local_verdict(report: BenchmarkReport, row: ConfigRow, base: ConfigRow, ratio: Ratio) -> str:
    """A local report's verdict: the entries' runs on this host, never a machine type faster or slower."""
    interval = (f" ({ratio.interval()}, {_confidence(ratio)})" if ratio.interval() is not None
                else " (under 2 runs a side: no interval)")
    spread_note = "; no difference beyond the spread of the runs" if ratio.supported is False else ""
    text = (f"{report.host_words}: the {row.name} entry's runs took {ratio.value:.2f}x the time of the "
            f"{base.name} entry's{interval}{spread_note}")
    cost, per = (row.relative_cost_per_unit, _per_unit(report, row)) if row.relative_cost_per_unit else \
        (row.relative_cost, "run")
    if cost is not None:
        text += f"; priced as their machine types, {cost.value:.2f}x the cost per {per}"
    return text


def metric_verdicts(report: BenchmarkReport, comparison: MetricComparison) -> list[str]:
    """One line per configuration of a per-metric comparison, in the words of `verdict`."""
    base = report.row(report.base).name
    lines = []
    for row in comparison.rows:
        ratio = row.relative_time
        if row.name == base or ratio is None:
            continue
        interval = (f" ({ratio.interval()}, {_confidence(ratio)})" if ratio.interval() is not None
                    else " (no interval)")
        if report.all_local:
            head = f"{comparison.metric}, {report.host_words}: the {row.name} entry took"
        else:
            head = f"{comparison.metric}: {row.name} took"
        text = f"{head} {ratio.value:.2f}x{' ~' if ratio.supported is False else ''} the time of {base}{interval}"
        if row.relative_work_cost is not None:
            text += f", at {row.relative_work_cost.value:.2f}x its work cost"
        lines.append(text)
    return lines


def _per_unit(report: BenchmarkReport, row: ConfigRow) -> str:
    """`1k samples`, `sample`: the unit the cost-per-unit column uses, so verdict and table agree."""
    costs = [r.cost_per_unit.median for r in report.rows if r.cost_per_unit is not None]
    unit = (row.work_unit or "unit").removesuffix("s")
    for scale, label in ((1.0, ""), (1e3, "1k "), (1e6, "1M ")):
        if not costs or max(costs) * scale >= 0.001:
            return f"{label}{unit}{'s' if label else ''}"
    return f"1M {unit}s"


def warnings(rows: Sequence[ConfigRow], measured: Sequence[RunRecord]) -> list[str]:
    """What hyperfine and pyperf would warn of: outlier runs, noisy configurations, a busy host."""
    notes = []
    for row in rows:
        for run, value, share in row.outliers:
            times = f"{share:.2f}" if share < 1 else f"{share:.1f}"
            notes.append(f"{row.name}: run {run} is an outlier ({value:.3g} s, {times}x the median of "
                         f"{row.runs}); it may have shared a busy host or met a slow VM: look at its logs, or rerun "
                         f"with more repeats")
        factor = disagreement([t for _, t, _ in row.samples if t is not None])
        if factor is not None:
            notes.append(f"{row.name}: its 2 runs disagree, one took {factor:.1f}x the other's time; a third run "
                         f"would say which is off (rerun with more repeats)")
        share = noisy(row.time)
        if share is not None:
            notes.append(f"{row.name}: high noise, the IQR is {share:.0%} of the median time (over 10%); more "
                         f"repeats, runs on a quieter host or a longer measured loop narrow it")
    busy = [r for r in measured if r.hardware is not None and r.hardware.busy]
    if busy:
        worst = max(max(x for x in (r.hardware.load_start, r.hardware.load_end) if x is not None) for r in busy)
        notes.append(f"{len(busy)} of {len(measured)} runs ran while the host's load average exceeded its CPUs "
                     f"(up to {worst:.1f}): other work shared the host, so their times measure it too")
    return notes
