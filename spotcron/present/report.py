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
title, in every verdict and on every chart that the machine types were priced, not measured, and on
which host the times were taken; its verdicts compare the entries' runs on that host and never call
a machine type faster or slower.

Beside the VM-life cost, each row has the cost of its measured work and the median phases of its
runs; `benchmark.compare` adds one comparison per named time metric (spotcron.present.compare).
Rounds (ticks) whose runs disagree beyond their spread are not pooled: the report keeps the latest
and says so (spotcron.present.rounds).
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
from spotcron.cost.local_wait import without_wait, work_cost_usd
from spotcron.cost.prices import PriceTable, PricingError, gpu_key, parse_gpu
from spotcron.present.compare import (
    COST_BASIS,
    MetricComparison,
    Phases,
    compare_metric,
    hourly_price,
    median_phases,
    outliers,
    overall,
    run_phases,
    work_cost_basis,
)
from spotcron.present.stats import CONFIDENCE, Ratio, Spread, ratio_of_medians, reciprocal, spread
from spotcron.present.verdicts import metric_verdicts, verdict, warnings

__all__ = ["BenchmarkReport", "ConfigRow", "RunSample", "benchmark_report", "metric_verdicts", "verdict"]

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
    tick: str = ""  # the round it belongs to, as --history and --tick name it
    work_cost: float | None = None  # time x the machine's per-second price (no minimum, no boot)
    phases: dict[str, float | None] = field(default_factory=dict)  # compare.PHASES and "vm", seconds
    metrics: dict[str, tuple[float, str]] = field(default_factory=dict)  # every metric it wrote: (value, unit)
    hourly: float | None = None  # the machine's and GPUs' price per hour

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "tick": self.tick, "time_s": self.seconds, "cost_usd": self.cost,
                "work_cost_usd": self.work_cost, "work": self.work, "work_unit": self.work_unit, "local": self.local,
                "phases_s": self.phases,
                "metrics": {name: {"value": value, "unit": unit} for name, (value, unit) in self.metrics.items()},
                "hardware": self.hardware.model_dump(mode="json") if self.hardware is not None else None}


def is_local(record: RunRecord) -> bool:
    """Whether the run ran in local mode: its runner said so, or, where the runner
    recorded no hardware (lost before it measured), its zone does."""
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
    throughput: Spread | None = None  # units per second: 1 / time_per_unit, statistic by statistic
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
    work_cost: Spread | None = None  # USD of the measured work per run: time x per-second price
    relative_work_cost: Ratio | None = None
    phases: Phases | None = None  # median seconds of each phase
    outliers: tuple[tuple[str, float, float], ...] = ()  # (run id, time, x the median) far from the others

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
            "work_cost_usd": part(self.work_cost), "relative_work_cost": part(self.relative_work_cost),
            "phases": part(self.phases),
            "outliers": [{"run_id": run, "time_s": value, "of_median": share} for run, value, share in self.outliers],
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
    comparisons: tuple[MetricComparison, ...] = ()  # one per benchmark.compare metric
    overall: MetricComparison | None = None  # the geometric mean of the per-metric ratios
    warnings: tuple[str, ...] = ()  # outliers, noise, a busy host, rounds not pooled
    rounds: str = "every round"  # which rounds (ticks) the figures pool

    @property
    def all_local(self) -> bool:
        return bool(self.local_runs) and not self.cloud_runs

    @property
    def cost_basis(self) -> str:
        return COST_BASIS

    @property
    def work_cost_basis(self) -> str:
        return work_cost_basis(self.time_basis)

    @property
    def host_words(self) -> str:
        """`local host vm, not the machine types`: what every local verdict and chart says."""
        hosts = ", ".join(self.local_hosts) or "an unrecorded host"
        return f"measured on local host {hosts}, not on the machine types"

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
                "cost_basis": self.cost_basis, "work_cost_basis": self.work_cost_basis, "rounds": self.rounds,
                "confidence": self.confidence,
                "interval": "exact rank (Mann-Whitney) interval of the ratio; each ratio states its confidence",
                "measured": self.measured_where or "on the machine types named", "local_hosts": list(self.local_hosts),
                "warnings": list(self.warnings),
                "rows": [{**r.to_json(), "verdict": verdict(self, r)} for r in self.rows],
                "comparisons": [{**c.to_json(), "verdicts": metric_verdicts(self, c)}
                                for c in (*self.comparisons, *([self.overall] if self.overall else []))]}


def benchmark_report(job: str, records: Iterable[RunRecord], table: PriceTable | None, region: str, *,
                     spec: JobSpec | None = None, usage: Overheads = DEFAULT_OVERHEADS, tick: str | None = None,
                     since: Any = None, pool_rounds: bool = False) -> BenchmarkReport:
    """Rows in matrix order (spec given), else the base first and the rest by name.

    The base and the time metric are the job's `benchmark:` settings: from `spec` when given,
    else from the newest run record's resolved spec, so the page and the report agree.
    With no `table`, a run's cost is the one its record stored when it ended.
    `tick` ("latest" or a tick as --history prints it) and `since` (a datetime) choose rounds;
    without them, rounds that disagree beyond their spread are not pooled unless `pool_rounds`.
    """
    from spotcron.present.rounds import choose_rounds

    ours = [r for r in records if r.job == job]
    order = [v.variant or NO_VARIANT for v in spec.configurations()] if spec is not None else []
    # Entries since removed from the matrix still have records: list them after the current ones.
    order += sorted({r.variant or NO_VARIANT for r in ours} - set(order))
    if not order:
        raise SpotcronError(f"job {job!r}: no run records to report on; run it first (spotcron up --once)")
    base = resolve_base(spec, ours) or order[0]
    time_metric = _setting(spec, ours, "time_metric")
    ours, rounds, round_notes = choose_rounds(ours, lambda r: run_seconds(r, time_metric), tick=tick, since=since,
                                              pool=pool_rounds)
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
    base_work = [run.work_cost for run in base_row.runs_detail if run.work_cost is not None]
    rows = [replace(row, relative_work_cost=ratio_of_medians(
        [run.work_cost for run in row.runs_detail if run.work_cost is not None], base_work)) for row in rows]
    measured = [r for r in ours if r.state == RunState.SUCCEEDED]
    local = [r for r in measured if is_local(r)]
    hosts = tuple(sorted({r.hardware.host for r in local if r.hardware is not None and r.hardware.host}))
    compared = _compared(spec, ours, time_metric)
    comparisons = tuple(
        compare_metric(metric, {row.name: [(_metric_seconds(run, metric), run.hourly and run.hourly / 3600)
                                            for run in row.runs_detail] for row in rows}, base_row.name)
        for metric in compared)
    total = overall(comparisons, {row.name: [{m: _metric_seconds(run, m) for m in compared}
                                             for run in row.runs_detail] for row in rows},
                    base_row.name) if _setting(spec, ours, "overall") else None
    return BenchmarkReport(job, base, time_metric or "container time",
                           table.name if table is not None else "as recorded", tuple(rows),
                           local_runs=len(local), cloud_runs=len(measured) - len(local), local_hosts=hosts,
                           comparisons=comparisons, overall=total,
                           warnings=(*round_notes, *_unwritten(comparisons, rows), *warnings(rows, measured)),
                           rounds=rounds)


def _unwritten(comparisons: Sequence[MetricComparison], rows: Sequence[ConfigRow]) -> list[str]:
    """A compared metric no run wrote in a unit of time: a typo, or a job that does not write it."""
    from spotcron.core.catalog import suggest

    written = sorted({name for row in rows for run in row.runs_detail for name in run.metrics})
    notes = []
    for comparison in comparisons:
        if all(r.time is None for r in comparison.rows) and any(row.runs for row in rows):
            hint = suggest(comparison.metric, written)
            known = f"did you mean {hint!r}?" if hint else f"metrics there: {', '.join(written) or 'none'}"
            notes.append(f"benchmark.compare {comparison.metric!r}: no run wrote it in a unit of time (s, ms, us, min, "
                         f"h); {known}")
    return notes


def _compared(spec: JobSpec | None, records: Sequence[RunRecord], time_metric: str | None) -> tuple[str, ...]:
    """benchmark.compare: from the spec, else the newest record's resolved spec."""
    if spec is not None:
        names: Any = spec.benchmark.compare
    else:
        names = ()
        for record in sorted(records, key=lambda r: r.created_at, reverse=True):
            value = ((record.spec or {}).get("benchmark") or {}).get("compare")
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                names = value
                break
    return tuple(dict.fromkeys(name for name in names))


def _metric_seconds(run: RunSample, name: str) -> float | None:
    from spotcron.core.metrics import TIME_UNITS

    value = run.metrics.get(name)
    if value is None or value[1] not in TIME_UNITS:
        return None
    seconds = value[0] * TIME_UNITS[value[1]]
    return seconds if math.isfinite(seconds) and seconds > 0 else None


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
    from spotcron.present.tick_labels import tick_label

    samples = []
    waits: dict[str, float | None] = {}
    priced: dict[str, RunRecord] = {}
    for record in done:
        # A local VM's wait for its turn on the host is no part of its configuration's cost.
        priced[record.run_id], waits[record.run_id] = without_wait(record)
        if table is not None:
            # Re-priced at `table`, the transfer the run recorded stays: it priced the stack's own sizes.
            cost = _priced(priced[record.run_id], table, region, usage)
            if cost is not None:
                cost += record.cost_items.get("transfer", 0.0)
        else:
            cost = work_cost_usd(record)
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
    detail = []
    for record, (run_id, seconds, cost) in zip(done, samples, strict=True):
        hourly = hourly_price(record, table, region)
        detail.append(RunSample(
            run_id, seconds, cost, works[run_id].value if run_id in works else None,
            works[run_id].unit if run_id in works else None, record.hardware, is_local(record), tick=tick_label(record),
            work_cost=seconds * hourly / 3600 if seconds is not None and hourly is not None else None,
            phases={**run_phases(priced[run_id], seconds if time_metric is not None else None),
                    "wait": waits[run_id]},
            metrics={k: (m.value, m.unit) for k, m in (record.metrics.metrics if record.metrics else {}).items()},
            hourly=hourly))
    hardware = done[0].hardware.label if done and done[0].hardware is not None else NOT_RECORDED
    if done and (done[0].hardware is None or done[0].hardware.threads is None):
        # Where nothing set the job's threads (a cloud VM), the thread count the job reported using.
        reported = sorted({int(r.metrics.metrics["cpu_threads"].value) for r in done
                           if r.metrics is not None and "cpu_threads" in r.metrics.metrics})
        if reported:
            hardware += f", {'/'.join(map(str, reported))} CPU threads (the job's own count)"
    return ConfigRow(
        variant=name, machine=_machine(spec, name, [*done, *other]), runs=len(done), other_runs=len(other),
        time=spread([t for _, t, _ in samples if t is not None]),
        cost=spread([c for _, _, c in samples if c is not None]),
        work_unit=unit, time_per_unit=spread(per_time), cost_per_unit=spread(per_cost),
        throughput=reciprocal(spread(per_time), rates),
        metrics=_median_metrics(done),
        metrics_problems=tuple((r.run_id, r.metrics_problem) for r in done if r.metrics_problem),
        samples=tuple(samples), runs_detail=tuple(detail), hardware=hardware,
        work_cost=spread([run.work_cost for run in detail if run.work_cost is not None]),
        phases=median_phases([run.phases for run in detail]),
        outliers=tuple(outliers([(run_id, t) for run_id, t, _ in samples if t is not None])),
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
        if isinstance(value, str) and value or value is True:
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
