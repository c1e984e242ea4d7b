"""Benchmark comparison: time and cost per configuration of a matrix job, relative to a base.

One row per matrix entry, from its succeeded runs (every repeat of every tick): how many, the
median and spread of time, cost and cost per unit of work, and time and cost relative to the
base configuration with an interval (see `spotcron.present.stats`) — the "relative training
time" and "relative cost" of the benchmarks this project's users reproduce, with the spread
those benchmarks left out. A run's cost counts every attempt's VM, preempted ones included,
priced by `spotcron.cost.billing`; its time is the container's wall time, or the metric that the
job's `benchmark.time_metric` names; its work and metrics are what its record kept of its
metrics.json. Pure: records and prices come in as values.

Runs of one configuration that ran on different hardware (as their runners measured it: a
machine type that changed its CPU platform, a local run on another host) are never pooled: the
configuration gets one row per kind of hardware, `t4 [1/2]` and `t4 [2/2]`, the one with the most
runs first (the base's first row is what ratios compare with). A report of local runs says in its
title that the machine types were priced, not measured, and on which host the times were taken.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from spotcron.core.errors import SpotcronError
from spotcron.core.hardware import Hardware
from spotcron.core.runs import RunRecord, RunState
from spotcron.core.spec import JobSpec
from spotcron.cost.billing import DEFAULT_OVERHEADS, Overheads, run_cost, unpriced_reason
from spotcron.cost.prices import PriceTable, PricingError, gpu_key, parse_gpu
from spotcron.present.stats import CONFIDENCE, Ratio, Spread, ratio_of_medians, spread

NO_VARIANT = "(default)"
NOT_RECORDED = "not recorded"
LOCAL_ZONE_PREFIX = "local-"  # local mode's zones: local-zone1-a


@dataclass(frozen=True)
class RunSample:
    """One measured run, as exports carry it: time, cost, work and what it ran on."""

    run_id: str
    seconds: float | None
    cost: float | None
    work: float | None
    work_unit: str | None
    hardware: Hardware | None
    local: bool

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "time_s": self.seconds, "cost_usd": self.cost, "work": self.work,
                "work_unit": self.work_unit, "local": self.local,
                "hardware": self.hardware.model_dump(mode="json") if self.hardware is not None else None}


def is_local(record: RunRecord) -> bool:
    """Whether the run ran in local mode: its runner said so, or (older records) its zone does."""
    if record.hardware is not None:
        return record.hardware.local
    attempt = record.current_attempt
    return bool(attempt and attempt.zone and attempt.zone.startswith(LOCAL_ZONE_PREFIX))


@dataclass(frozen=True)
class ConfigRow:
    variant: str
    machine: str  # "n1-standard-4 + T4 x1, spot"
    runs: int  # succeeded runs measured
    other_runs: int  # ended otherwise (failed, lost, timed out...): not measured
    time: Spread | None = None  # seconds per run
    cost: Spread | None = None  # USD per run
    work_unit: str | None = None  # what metrics.json's work counts: "samples"
    time_per_unit: Spread | None = None
    cost_per_unit: Spread | None = None
    throughput: Spread | None = None  # units per second
    relative_time: Ratio | None = None
    relative_cost: Ratio | None = None
    metrics: dict[str, tuple[float, str]] = field(default_factory=dict)  # name → (median, unit)
    metrics_problems: tuple[tuple[str, str], ...] = ()  # (run id, what is wrong with its metrics.json)
    # Per run, for history and charts: (run id, seconds, USD) of each measured run.
    samples: tuple[tuple[str, float | None, float | None], ...] = ()
    runs_detail: tuple[RunSample, ...] = ()  # the same runs with their work and hardware, for exports
    hardware: str = NOT_RECORDED  # what every run of this row ran on (runs on other hardware: other rows)
    split: tuple[int, int] | None = None  # (this row, of how many) when the configuration ran on several
    relative_cost_per_unit: Ratio | None = None
    unmeasured: tuple[tuple[str, str], ...] = ()  # (run id, "failed: its reason") of the runs ended otherwise

    @property
    def name(self) -> str:
        """The configuration, and which of its hardware rows this is when it has several."""
        return f"{self.variant} [{self.split[0]}/{self.split[1]}]" if self.split else self.variant

    @property
    def median_seconds(self) -> float | None:
        return self.time.median if self.time else None

    @property
    def cost_per_run(self) -> float | None:
        return self.cost.median if self.cost else None

    def to_json(self) -> dict[str, Any]:
        def part(value: Any) -> Any:
            return value.to_json() if value is not None else None

        return {
            "variant": self.variant, "name": self.name, "machine": self.machine, "hardware": self.hardware,
            "hardware_row": list(self.split) if self.split else None,
            "runs": self.runs, "other_runs": self.other_runs,
            "time_s": part(self.time), "cost_usd": part(self.cost), "work_unit": self.work_unit,
            "time_per_unit_s": part(self.time_per_unit), "cost_per_unit_usd": part(self.cost_per_unit),
            "throughput_per_s": part(self.throughput),
            "relative_time": part(self.relative_time), "relative_cost": part(self.relative_cost),
            "relative_cost_per_unit": part(self.relative_cost_per_unit),
            "metrics": {name: {"median": value, "unit": unit} for name, (value, unit) in self.metrics.items()},
            "metrics_problems": [{"run_id": run, "problem": text} for run, text in self.metrics_problems],
            "samples": [run.to_json() for run in self.runs_detail],
            "unmeasured": [{"run_id": run, "why": why} for run, why in self.unmeasured],
        }


@dataclass(frozen=True)
class BenchmarkReport:
    job: str
    base: str
    time_basis: str  # "container time" or the metrics.json metric the times came from
    price_table: str
    rows: tuple[ConfigRow, ...]
    confidence: float = CONFIDENCE
    local_runs: int = 0  # measured runs that ran in local mode
    cloud_runs: int = 0
    local_hosts: tuple[str, ...] = ()  # the hosts they ran on, as their runners recorded them

    def row(self, variant: str) -> ConfigRow:
        """The configuration's row; its first (most runs) when it ran on several kinds of hardware."""
        for row in self.rows:
            if row.variant == variant:
                return row
        raise KeyError(variant)

    @property
    def measured_where(self) -> str | None:
        """What a title must say when the times are not the machine types': None when none are local."""
        if not self.local_runs:
            return None
        # Quoted and called a host: a host name such as `vm` must not read as "on a VM".
        named = ", ".join(f'"{h}"' for h in self.local_hosts)
        hosts = (f"the host {named}" if len(self.local_hosts) == 1 else f"the hosts {named}") if named \
            else "an unrecorded host"
        if not self.cloud_runs:
            return f"local runs on {hosts}: machine types were priced, not measured"
        return (f"{self.local_runs} of {self.local_runs + self.cloud_runs} runs local on {hosts}: their machine "
                f"types were priced, not measured")

    @property
    def split_variants(self) -> list[str]:
        return list(dict.fromkeys(row.variant for row in self.rows if row.split))

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "base": self.base, "time_basis": self.time_basis, "price_table": self.price_table,
                "confidence": self.confidence, "interval": "bootstrap of the ratio of medians (percentile, seeded)",
                "measured": self.measured_where or "on the machine types named", "local_hosts": list(self.local_hosts),
                "rows": [{**r.to_json(), "verdict": verdict(self, r)} for r in self.rows]}


def benchmark_report(job: str, records: Iterable[RunRecord], table: PriceTable | None, region: str, *,
                     spec: JobSpec | None = None, usage: Overheads = DEFAULT_OVERHEADS) -> BenchmarkReport:
    """Rows in matrix order (spec given), else the base first and the rest by name.

    The base and the time metric are the job's `benchmark:` settings: from `spec` when given,
    else from the newest run record's resolved spec, so the page and the report agree.
    With no `table`, a run's cost is the one its record stored when it ended.
    """
    ours = [r for r in records if r.job == job]
    order = [v.variant or NO_VARIANT for v in spec.configurations()] if spec is not None else []
    # Entries since removed from the matrix still have records: list them after the current ones.
    order += sorted({r.variant or NO_VARIANT for r in ours} - set(order))
    if not order:
        raise SpotcronError(f"job {job!r}: no run records to report on; run it first (spotcron up --once)")
    base = resolve_base(spec, ours) or order[0]
    time_metric = _setting(spec, ours, "time_metric")
    if spec is None and base in order:  # no matrix order to follow: the base first, then by name
        order.remove(base)
        order.insert(0, base)
    if base not in order:
        raise SpotcronError(f"job {job!r}: its benchmark.base {base!r} has no runs and is not in the matrix; "
                            f"choose one of {', '.join(order)}")

    by_variant: dict[str, list[RunRecord]] = {name: [] for name in order}
    for record in ours:
        by_variant.setdefault(record.variant or NO_VARIANT, []).append(record)
    rows = []
    for name in order:
        records = by_variant[name]
        done = sorted((r for r in records if r.state == RunState.SUCCEEDED), key=lambda r: r.run_id)
        other = [r for r in records if r.terminal and r.state != RunState.SUCCEEDED]
        groups = _by_hardware(done)
        for index, group in enumerate(groups):
            row = _row(name, spec, group, other if index == 0 else [], table, region, usage, time_metric)
            rows.append(replace(row, split=(index + 1, len(groups))) if len(groups) > 1 else row)
    base_row = next(r for r in rows if r.variant == base)
    base_times = [t for _, t, _ in base_row.samples if t is not None]
    base_costs = [c for _, _, c in base_row.samples if c is not None]
    base_unit_costs = _unit_costs(base_row)
    rows = [
        replace(row, relative_time=ratio_of_medians([t for _, t, _ in row.samples if t is not None], base_times),
                relative_cost=ratio_of_medians([c for _, _, c in row.samples if c is not None], base_costs),
                relative_cost_per_unit=ratio_of_medians(_unit_costs(row), base_unit_costs)
                if row.work_unit is not None and row.work_unit == base_row.work_unit else None)
        for row in rows
    ]
    measured = [r for r in ours if r.state == RunState.SUCCEEDED]
    local = [r for r in measured if is_local(r)]
    hosts = tuple(sorted({r.hardware.host for r in local if r.hardware is not None and r.hardware.host}))
    return BenchmarkReport(job, base, time_metric or "container time",
                           table.name if table is not None else "as recorded", tuple(rows),
                           local_runs=len(local), cloud_runs=len(measured) - len(local), local_hosts=hosts)


def _by_hardware(done: list[RunRecord]) -> list[list[RunRecord]]:
    """The runs split by what they ran on, the kind with the most runs first (then the newest);
    always at least one group, so a configuration without runs still has its row."""
    groups: dict[Any, list[RunRecord]] = {}
    for record in done:
        groups.setdefault(record.hardware.key if record.hardware is not None else None, []).append(record)
    if not groups:
        return [[]]
    return sorted(groups.values(), key=lambda g: (-len(g), -max(r.created_at.timestamp() for r in g)))


def _unit_costs(row: ConfigRow) -> list[float]:
    return [run.cost / run.work for run in row.runs_detail
            if run.cost is not None and run.work and run.work_unit == row.work_unit]


def verdict(report: BenchmarkReport, row: ConfigRow) -> str:
    """One line a benchmarker can quote: `t4 ran 3.1x faster than highcpu-16 (2.8-3.4), at 0.60x the
    cost per 1k samples`, with the same interval and marks as the table."""
    base = report.row(report.base)
    if row is base:
        return f"{row.name} is the base: {row.runs} run{'s' if row.runs != 1 else ''} on {row.hardware}"
    ratio = row.relative_time
    if ratio is None:
        return f"{row.name}: no time to compare with {base.name} (no measured runs on one side)"
    if ratio.supported is False:
        speed = (f"ran neither faster nor slower than {base.name} beyond the spread of the runs "
                 f"({ratio.low:.2f}-{ratio.high:.2f}x its time)")
    else:
        faster = ratio.value <= 1
        factor = 1 / ratio.value if faster else ratio.value
        speed = f"ran {factor:.1f}x {'faster' if faster else 'slower'} than {base.name}"
        if ratio.low is not None and ratio.high is not None:
            low, high = sorted((1 / ratio.high, 1 / ratio.low) if faster else (ratio.low, ratio.high))
            speed += f" ({low:.1f}-{high:.1f})"
        else:
            speed += " (under 2 runs a side: no interval)"
    cost, per = (row.relative_cost_per_unit, _per_unit(report, row)) if row.relative_cost_per_unit else \
        (row.relative_cost, "run")
    if cost is None:
        return f"{row.name} {speed}"
    mark = f" {cost.mark}" if cost.mark else ""
    return f"{row.name} {speed}, at {cost.value:.2f}x{mark} the cost per {per}"


def _per_unit(report: BenchmarkReport, row: ConfigRow) -> str:
    """`1k samples`, `sample`: the unit the cost-per-unit column uses, so verdict and table agree."""
    costs = [r.cost_per_unit.median for r in report.rows if r.cost_per_unit is not None]
    unit = (row.work_unit or "unit").removesuffix("s")
    for scale, label in ((1.0, ""), (1e3, "1k "), (1e6, "1M ")):
        if not costs or max(costs) * scale >= 0.001:
            return f"{label}{unit}{'s' if label else ''}"
    return f"1M {unit}s"


def _append_finite(values: list[float], value: float) -> None:
    if math.isfinite(value):
        values.append(value)


def run_seconds(record: RunRecord, time_metric: str | None) -> float | None:
    """A succeeded run's time: its metric `time_metric` in seconds, else the container's wall time."""
    if time_metric is not None:
        return record.metrics.seconds(time_metric) if record.metrics is not None else None
    return record.duration_seconds


def _row(name: str, spec: JobSpec | None, done: list[RunRecord], other: list[RunRecord], table: PriceTable | None,
         region: str, usage: Overheads, time_metric: str | None) -> ConfigRow:
    samples = []
    for record in done:
        cost = _priced(record, table, region, usage) if table is not None else record.cost_usd
        samples.append((record.run_id, run_seconds(record, time_metric), cost))
    works = {r.run_id: r.metrics.work for r in done if r.metrics is not None and r.metrics.work is not None}
    unit = Counter(w.unit for w in works.values()).most_common(1)[0][0] if works else None
    per_time, per_cost, rates = [], [], []
    for run_id, seconds, cost in samples:
        work = works.get(run_id)
        if work is None or work.unit != unit:
            continue
        # A job's work may be tiny (5e-324 is finite and > 0): a quotient that is no number is left out.
        if seconds is not None:
            _append_finite(per_time, seconds / work.value)
            if seconds > 0:
                _append_finite(rates, work.value / seconds)
        if cost is not None:
            _append_finite(per_cost, cost / work.value)
    detail = tuple(
        RunSample(run_id, seconds, cost, works[run_id].value if run_id in works else None,
                  works[run_id].unit if run_id in works else None, record.hardware, is_local(record))
        for record, (run_id, seconds, cost) in zip(done, samples, strict=True))
    hardware = done[0].hardware.label if done and done[0].hardware is not None else NOT_RECORDED
    return ConfigRow(
        variant=name, machine=_machine(spec, name, [*done, *other]), runs=len(done), other_runs=len(other),
        time=spread([t for _, t, _ in samples if t is not None]),
        cost=spread([c for _, _, c in samples if c is not None]),
        work_unit=unit, time_per_unit=spread(per_time), cost_per_unit=spread(per_cost), throughput=spread(rates),
        metrics=_median_metrics(done),
        metrics_problems=tuple((r.run_id, r.metrics_problem) for r in done if r.metrics_problem),
        samples=tuple(samples), runs_detail=detail, hardware=hardware,
        unmeasured=tuple((r.run_id, f"{r.state}: {r.reason or 'no reason recorded'}")
                         for r in sorted(other, key=lambda r: r.run_id)),
    )


def _priced(record: RunRecord, table: PriceTable, region: str, usage: Overheads) -> float | None:
    """The run's cost at `table`'s prices; None (a dash, and `unpriced_lines` says why) where the table
    lacks its machine type."""
    try:
        return run_cost(record, table, region, usage=usage).total_usd
    except PricingError:
        if unpriced_reason(record, table) is None:
            raise  # not the machine's price (an unknown region): the user's to fix
        return None


def resolve_base(spec: JobSpec | None, records: Iterable[RunRecord]) -> str | None:
    """The job's base configuration: the spec's, else the one its newest run record carries.

    The report (which has the job file) and the results page (which has only run records) both
    come here, so they compare against the same configuration.
    """
    if spec is not None:
        return spec.benchmark_base or NO_VARIANT
    return _setting(None, records, "base")


def _setting(spec: JobSpec | None, records: Iterable[RunRecord], name: str) -> str | None:
    """A `benchmark:` setting of the job file, else of the newest run record's resolved spec."""
    if spec is not None:
        return getattr(spec.benchmark, name)
    for record in sorted(records, key=lambda r: r.created_at, reverse=True):
        value = ((record.spec or {}).get("benchmark") or {}).get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _machine(spec: JobSpec | None, variant: str, records: Sequence[RunRecord]) -> str:
    """`n1-standard-8 + T4 x1, spot`: from the spec when it has the entry, else the last attempt."""
    names = {v.variant or NO_VARIANT for v in spec.configurations()} if spec is not None else set()
    if spec is not None and variant in names:
        resolved = spec.variant_named(None if variant == NO_VARIANT else variant).machine
        gpu = f" + {gpu_key(resolved.gpu.type)} x{resolved.gpu.count}" if resolved.gpu else ""
        return f"{resolved.type}{gpu}, {'spot' if resolved.spot else 'on-demand'}"
    attempts = [a for r in records for a in r.attempts]
    if not attempts:
        return "?"
    last = attempts[-1]
    gpu = ""
    if last.gpu:
        gpu_type, count = parse_gpu(last.gpu)
        gpu = f" + {gpu_key(gpu_type)} x{count}"
    return f"{last.machine_type}{gpu}, {'spot' if last.provisioning_model == 'SPOT' else 'on-demand'}"


def _median_metrics(records: Sequence[RunRecord]) -> dict[str, tuple[float, str]]:
    """Each named metric's median over the runs that wrote it in its most common unit."""
    values: dict[str, list[tuple[float, str]]] = {}
    for record in records:
        for name, measure in (record.metrics.metrics if record.metrics else {}).items():
            values.setdefault(name, []).append((measure.value, measure.unit))
    medians = {}
    for name, pairs in sorted(values.items()):
        unit = Counter(u for _, u in pairs).most_common(1)[0][0]
        medians[name] = (statistics.median(v for v, u in pairs if u == unit), unit)
    return medians
