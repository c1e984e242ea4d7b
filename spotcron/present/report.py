"""Benchmark comparison: time and cost per configuration of a matrix job, relative to a base.

One row per matrix entry, from its succeeded runs: median time per run, median cost per run
(every attempt's VM, preempted ones included, priced by `spotcron.cost.billing`), and both relative to
the base configuration — the "relative training time" and "relative cost" of the benchmarks
this project's users want to reproduce. Pure: records, metrics and prices come in as values.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from spotcron.core.durations import format_duration
from spotcron.core.errors import SpotcronError
from spotcron.core.runs import RunRecord, RunState
from spotcron.core.spec import JobSpec
from spotcron.cost.billing import DEFAULT_USAGE, Usage, run_cost
from spotcron.cost.prices import PriceTable, gpu_key, parse_gpu

NO_VARIANT = "(default)"


@dataclass(frozen=True)
class ConfigRow:
    variant: str
    machine: str  # "n1-standard-4 + nvidia-tesla-t4 x1, spot"
    runs: int  # succeeded runs measured
    other_runs: int  # ended otherwise (failed, lost, timed out...): not measured
    median_seconds: float | None
    cost_per_run: float | None
    relative_time: float | None = None
    relative_cost: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)  # medians of numeric metrics.json values

    def to_json(self) -> dict[str, Any]:
        return {
            "variant": self.variant, "machine": self.machine, "runs": self.runs, "other_runs": self.other_runs,
            "median_seconds": _round(self.median_seconds, 3), "cost_per_run_usd": _round(self.cost_per_run, 8),
            "relative_time": _round(self.relative_time, 4), "relative_cost": _round(self.relative_cost, 4),
            "metrics": self.metrics,
        }


@dataclass(frozen=True)
class BenchmarkReport:
    job: str
    base: str
    time_basis: str  # "container time" or the metrics.json key the times came from
    price_table: str
    rows: tuple[ConfigRow, ...]

    def row(self, variant: str) -> ConfigRow:
        for row in self.rows:
            if row.variant == variant:
                return row
        raise KeyError(variant)

    def to_json(self) -> dict[str, Any]:
        return {"job": self.job, "base": self.base, "time_basis": self.time_basis,
                "price_table": self.price_table, "rows": [r.to_json() for r in self.rows]}


def benchmark_report(job: str, records: Iterable[RunRecord], table: PriceTable | None, region: str, *,
                     spec: JobSpec | None = None, base: str | None = None,
                     metrics: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                     time_metric: str | None = None, usage: Usage = DEFAULT_USAGE) -> BenchmarkReport:
    """Rows in matrix order (spec given) or by name; `base` defaults to the first configuration.

    `metrics` maps a variant to the metrics.json documents of its runs; numeric values are
    reported as medians, and `time_metric` (e.g. "train_seconds") replaces the container time
    as the time per run — the container time includes pulling the image and loading data.
    With no `table`, a run's cost is the one its record stored when it ended.
    """
    ours = [r for r in records if r.job == job]
    order = [v.variant or NO_VARIANT for v in spec.configurations()] if spec is not None else []
    # Entries since removed from the matrix still have records: list them after the current ones.
    order += sorted({r.variant or NO_VARIANT for r in ours} - set(order))
    if not order:
        raise SpotcronError(f"job {job!r}: no run records to report on; run it first (spotcron up --once)")
    base = base or resolve_base(spec, ours) or order[0]
    if metrics is not None:  # without metrics.json documents, container time is all there is
        time_metric = time_metric or _setting(spec, ours, "time_metric")
    if spec is None and base in order:  # no matrix order to follow: the base first, then by name
        order.remove(base)
        order.insert(0, base)
    if base not in order:
        raise SpotcronError(f"job {job!r} has no configuration {base!r} for --base; "
                            f"choose one of {', '.join(order)}")

    by_variant: dict[str, list[RunRecord]] = {name: [] for name in order}
    for record in ours:
        by_variant.setdefault(record.variant or NO_VARIANT, []).append(record)

    rows = []
    for name in order:
        done = [r for r in by_variant[name] if r.state == RunState.SUCCEEDED]
        other = [r for r in by_variant[name] if r.terminal and r.state != RunState.SUCCEEDED]
        docs = list((metrics or {}).get(name, ()))
        if time_metric is not None:
            times = [float(d[time_metric]) for d in docs if _number(d.get(time_metric))]
        else:
            times = [r.duration_seconds for r in done if r.duration_seconds is not None]
        if table is not None:
            costs = [run_cost(r, table, region, usage=usage).total_usd for r in done]
        else:
            costs = [r.cost_usd for r in done if r.cost_usd is not None]
        rows.append(ConfigRow(
            variant=name, machine=_machine(spec, name, by_variant[name]), runs=len(done), other_runs=len(other),
            median_seconds=statistics.median(times) if times else None,
            cost_per_run=statistics.median(costs) if costs else None,
            metrics=_median_metrics(docs),
        ))
    base_row = next(r for r in rows if r.variant == base)
    rows = [
        ConfigRow(**{**row.__dict__,
                     "relative_time": _ratio(row.median_seconds, base_row.median_seconds),
                     "relative_cost": _ratio(row.cost_per_run, base_row.cost_per_run)})
        for row in rows
    ]
    return BenchmarkReport(job, base, time_metric or "container time",
                           table.name if table is not None else "as recorded", tuple(rows))


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


def rich_tables(report: BenchmarkReport) -> list:
    """The report as rich Tables: time and cost, then the metrics when there are any.

    rich is imported here: only terminal output needs it.
    """
    from rich import box
    from rich.table import Table

    def new_table(title: str | None) -> Table:
        return Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 0, 0, 1))

    main = new_table(f"{report.job}: median per run, relative to {report.base}")
    main.caption = (f"runs: succeeded/ended; time: {report.time_basis}; prices: {report.price_table}; "
                    f"* = base")
    main.add_column("configuration", overflow="fold", min_width=min(max(len(r.variant) for r in report.rows) + 2, 24))
    main.add_column("machine", overflow="fold", min_width=12)
    main.add_column("runs", justify="right", no_wrap=True)
    for header in ("time", "cost", "rel.\ntime", "rel.\ncost"):
        main.add_column(header, justify="right", no_wrap=True)
    for row in report.rows:
        main.add_row(
            row.variant + (" *" if row.variant == report.base else ""), row.machine,
            f"{row.runs}/{row.runs + row.other_runs}",
            format_duration(row.median_seconds) if row.median_seconds is not None else "-",
            format_usd(row.cost_per_run), format_ratio(row.relative_time), format_ratio(row.relative_cost),
        )
    tables = [main]
    metric_keys = sorted({k for row in report.rows for k in row.metrics})
    if metric_keys:
        extra = new_table(f"{report.job}: metrics.json, median per run")
        extra.add_column("configuration", overflow="fold")
        for key in metric_keys:
            extra.add_column(key, justify="right", overflow="fold")
        for row in report.rows:
            extra.add_row(row.variant, *(f"{row.metrics[k]:.4g}" if k in row.metrics else "-" for k in metric_keys))
        tables.append(extra)
    return tables


def format_usd(value: float | None) -> str:
    """$12.35, $0.0508, $0.00022: cents for dollars, four decimals for cents, two digits below."""
    if value is None:
        return "-"
    if value >= 1:
        return f"${value:,.2f}"
    if value >= 0.001:
        return f"${value:.4f}"
    return f"${value:.2g}" if value > 0 else "$0"


def format_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


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


def _median_metrics(docs: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    values: dict[str, list[float]] = {}
    for doc in docs:
        for key, value in doc.items():
            if _number(value):
                values.setdefault(key, []).append(float(value))
    return {key: statistics.median(vals) for key, vals in sorted(values.items())}


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _ratio(value: float | None, base: float | None) -> float | None:
    if value is None or base is None or base == 0:
        return None
    return value / base


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
