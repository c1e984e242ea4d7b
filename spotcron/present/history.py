"""A benchmark's history: each configuration's median time and cost per tick, across weeks, and
whether the latest tick left the band of the ones before it (the rule is in `spotcron.present.stats`).

A tick is the scheduled time the run belongs to (every repeat of a tick shares it); a manual
request ("run now", `spotcron up --once`) counts as a tick of its own. Pure: the runs come in as the report's per-run samples.

A configuration is one series however many kinds of hardware it ran on; a tick whose hardware
(as the runners measured it) differs from the tick before is flagged `hardware changed`, since a
jump there is the hardware's, not a regression of the job.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from spotcron.core.runs import RunRecord
from spotcron.present.report import BenchmarkReport
from spotcron.present.stats import MIN_HISTORY, Band, regression_band
from spotcron.present.tick_labels import tick_label

__all__ = ["BenchmarkHistory", "Series", "TickPoint", "benchmark_history", "regressions", "tick_label"]


@dataclass(frozen=True)
class TickPoint:
    tick: str  # "2026-11-23 03:00"
    runs: int
    seconds: float | None  # median of the tick's runs
    cost: float | None
    hardware: tuple[str, ...] = ()  # what the tick's runs ran on (labels, sorted)
    hardware_changed: bool = False  # differs from the tick before


@dataclass(frozen=True)
class Series:
    variant: str
    points: tuple[TickPoint, ...]
    time_band: Band | None
    cost_band: Band | None

    def flag_text(self) -> str:
        words = ["hardware changed"] if self.points and self.points[-1].hardware_changed else []
        if self.time_band and self.time_band.flag:
            words.append("slower" if self.time_band.flag == "higher" else "faster")
        if self.cost_band and self.cost_band.flag:
            words.append("costlier" if self.cost_band.flag == "higher" else "cheaper")
        return "! " + ", ".join(words) if words else ""

    def to_json(self) -> dict[str, Any]:
        return {"variant": self.variant,
                "ticks": [{"tick": p.tick, "runs": p.runs, "time_s": p.seconds, "cost_usd": p.cost,
                           "hardware": list(p.hardware), "hardware_changed": p.hardware_changed}
                          for p in self.points],
                "time_band": self.time_band.to_json() if self.time_band else None,
                "cost_band": self.cost_band.to_json() if self.cost_band else None}


@dataclass(frozen=True)
class BenchmarkHistory:
    job: str
    time_basis: str
    series: tuple[Series, ...]

    @property
    def flagged(self) -> list[Series]:
        return [s for s in self.series if s.flag_text()]

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "time_basis": self.time_basis,
                "rule": "latest tick outside median +- max(3.5/0.6745 MAD, 5% of median) of up to 12 earlier "
                        "ticks, at least 4",
                "series": [s.to_json() for s in self.series]}


def regressions(history: BenchmarkHistory) -> str:
    """`regressions: ...` for the history's caption: the flagged configurations, `none` when the
    latest tick was judged and passed, and `not judged yet` when too few ticks came before it."""

    flagged = "; ".join(f"{s.variant} {s.flag_text().removeprefix('! ')}" for s in history.flagged)
    if flagged:
        return f"regressions: {flagged}"
    if any(s.time_band or s.cost_band for s in history.series):
        return "regressions: none"
    ticks = max((len(s.points) for s in history.series), default=0)
    return (f"regressions: not judged yet ({ticks} tick{'s' if ticks != 1 else ''}; the latest is judged against "
            f"at least {MIN_HISTORY} ticks before it)")


def benchmark_history(report: BenchmarkReport, records: Iterable[RunRecord]) -> BenchmarkHistory:
    """Per configuration of `report`, its runs grouped by tick, oldest first, with the bands."""
    ticks = {(r.job, r.run_id): tick_label(r) for r in records if r.job == report.job}
    variants: dict[str, list] = {}
    for row in report.rows:  # a configuration split by hardware is still one series
        variants.setdefault(row.variant, []).extend(zip(row.samples, [row.hardware] * len(row.samples), strict=True))
    series = []
    for variant, runs in variants.items():
        by_tick: dict[str, list[tuple[float | None, float | None, str]]] = {}
        for (run_id, seconds, cost), hardware in runs:
            tick = ticks.get((report.job, run_id))
            if tick is not None:
                by_tick.setdefault(tick, []).append((seconds, cost, hardware))
        points: list[TickPoint] = []
        for tick, values in sorted(by_tick.items()):
            hardware = tuple(sorted({h for _, _, h in values}))
            changed = bool(points) and hardware != points[-1].hardware
            points.append(TickPoint(tick, len(values), _median([s for s, _, _ in values]),
                                    _median([c for _, c, _ in values]), hardware, changed))
        series.append(Series(variant, tuple(points),
                             regression_band([p.seconds for p in points if p.seconds is not None]),
                             regression_band([p.cost for p in points if p.cost is not None])))
    return BenchmarkHistory(report.job, report.time_basis, tuple(series))


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None
