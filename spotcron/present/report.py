"""Benchmark comparison: time and cost per configuration of a matrix job, relative to a base.

One row per matrix entry, from its succeeded runs (every repeat of every tick): how many, the
median and spread of time, cost and cost per unit of work, and time and cost relative to the
base configuration with an interval (see `spotcron.present.stats`) — the "relative training
time" and "relative cost" of the benchmarks this project's users reproduce, with the spread
those benchmarks left out. A run's cost counts every attempt's VM, preempted ones included,
priced by `spotcron.cost.billing`; its time is the container's wall time, or the metric that the
job's `benchmark.time_metric` names; its work and metrics are what its record kept of its
metrics.json. Pure: records and prices come in as values.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from spotcron.core.errors import SpotcronError
from spotcron.core.runs import RunRecord, RunState
from spotcron.core.spec import JobSpec
from spotcron.cost.billing import DEFAULT_USAGE, Usage, run_cost
from spotcron.cost.prices import PriceTable, gpu_key, parse_gpu
from spotcron.present.stats import CONFIDENCE, Ratio, Spread, ratio_of_medians, spread

NO_VARIANT = "(default)"


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
            "variant": self.variant, "machine": self.machine, "runs": self.runs, "other_runs": self.other_runs,
            "time_s": part(self.time), "cost_usd": part(self.cost), "work_unit": self.work_unit,
            "time_per_unit_s": part(self.time_per_unit), "cost_per_unit_usd": part(self.cost_per_unit),
            "throughput_per_s": part(self.throughput),
            "relative_time": part(self.relative_time), "relative_cost": part(self.relative_cost),
            "metrics": {name: {"median": round(value, 6), "unit": unit} for name, (value, unit) in self.metrics.items()},
            "metrics_problems": [{"run_id": run, "problem": text} for run, text in self.metrics_problems],
        }


@dataclass(frozen=True)
class BenchmarkReport:
    job: str
    base: str
    time_basis: str  # "container time" or the metrics.json metric the times came from
    price_table: str
    rows: tuple[ConfigRow, ...]
    confidence: float = CONFIDENCE

    def row(self, variant: str) -> ConfigRow:
        for row in self.rows:
            if row.variant == variant:
                return row
        raise KeyError(variant)

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "base": self.base, "time_basis": self.time_basis, "price_table": self.price_table,
                "confidence": self.confidence, "interval": "bootstrap of the ratio of medians (percentile, seeded)",
                "rows": [r.to_json() for r in self.rows]}


def benchmark_report(job: str, records: Iterable[RunRecord], table: PriceTable | None, region: str, *,
                     spec: JobSpec | None = None, usage: Usage = DEFAULT_USAGE) -> BenchmarkReport:
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
    rows = [_row(name, spec, by_variant[name], table, region, usage, time_metric) for name in order]
    base_row = next(r for r in rows if r.variant == base)
    base_times = [t for _, t, _ in base_row.samples if t is not None]
    base_costs = [c for _, _, c in base_row.samples if c is not None]
    rows = [
        ConfigRow(**{**row.__dict__,
                     "relative_time": ratio_of_medians([t for _, t, _ in row.samples if t is not None], base_times),
                     "relative_cost": ratio_of_medians([c for _, _, c in row.samples if c is not None], base_costs)})
        for row in rows
    ]
    return BenchmarkReport(job, base, time_metric or "container time",
                           table.name if table is not None else "as recorded", tuple(rows))


def _append_finite(values: list[float], value: float) -> None:
    if math.isfinite(value):
        values.append(value)


def run_seconds(record: RunRecord, time_metric: str | None) -> float | None:
    """A succeeded run's time: its metric `time_metric` in seconds, else the container's wall time."""
    if time_metric is not None:
        return record.metrics.seconds(time_metric) if record.metrics is not None else None
    return record.duration_seconds


def _row(name: str, spec: JobSpec | None, records: list[RunRecord], table: PriceTable | None, region: str,
         usage: Usage, time_metric: str | None) -> ConfigRow:
    done = sorted((r for r in records if r.state == RunState.SUCCEEDED), key=lambda r: r.run_id)
    other = [r for r in records if r.terminal and r.state != RunState.SUCCEEDED]
    samples = []
    for record in done:
        cost = run_cost(record, table, region, usage=usage).total_usd if table is not None else record.cost_usd
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
    return ConfigRow(
        variant=name, machine=_machine(spec, name, records), runs=len(done), other_runs=len(other),
        time=spread([t for _, t, _ in samples if t is not None]),
        cost=spread([c for _, _, c in samples if c is not None]),
        work_unit=unit, time_per_unit=spread(per_time), cost_per_unit=spread(per_cost), throughput=spread(rates),
        metrics=_median_metrics(done),
        metrics_problems=tuple((r.run_id, r.metrics_problem) for r in done if r.metrics_problem),
        samples=tuple(samples),
    )


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
