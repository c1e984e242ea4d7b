"""What a job, and a whole stack, will cost a month: pure arithmetic over a price table.

The projection counts a month as 30 days, like the recipe this project grew from, and compares
each job with that recipe's "classic" design: a stopped VM kept between runs (its persistent disk
billed all month), started and stopped by two scheduler rules per job. A run's own price is
`spotcron.cost.billing`; this module prices schedules for `spotcron cost` and the benchmarks, so
it never ships to the functions.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from spotcron.core.runs import Outcome, RunRecord
from spotcron.core.spec import JobSpec
from spotcron.cost.billing import DEFAULT_OVERHEADS, FunctionUse, Overheads, vm_items
from spotcron.cost.local_wait import work_vm_seconds
from spotcron.cost.prices import FunctionPrice, PriceTable

MONTH_DAYS = 30
SECONDS_PER_MONTH = MONTH_DAYS * 86400
MONTHLY_ITEMS = ("compute", "gpu", "disk", "scheduler", "functions", "storage")


# --- runs per month ----------------------------------------------------------------------------


def runs_per_month(schedule: str, time_zone: str, start: datetime) -> float:
    """Fire times per 30 days, averaged over the 365 days after `start`.

    A year, not one 30-day window, so that a monthly or quarterly job does not count 0 or 2
    depending on the day one asks, and DST changes average out. A schedule that fires at least
    hourly on average is counted over four whole weeks instead (weekday patterns stay exact) and
    scaled to 30 days: the same figure within DST noise, without walking 500,000 minutes.
    """
    from spotcron.core.cron.schedule import load_time_zone, parse_schedule

    tz = load_time_zone(time_zone)
    cron = parse_schedule(schedule)
    weeks = _count_fires(cron, tz, start, start + timedelta(days=28))
    if weeks >= 28 * 24:
        return weeks * MONTH_DAYS / 28
    return (weeks + _count_fires(cron, tz, start + timedelta(days=28), start + timedelta(days=365))) \
        * MONTH_DAYS / 365


def _count_fires(cron, tz, start: datetime, end: datetime, chunk: int = 1000) -> int:
    """Fire instants in [start, end).

    Asked for in chunks that start small and double: a weekly job's window holds a few fires, and
    computing a thousand of them to find that out made `spotcron cost` slow.
    """
    after, count, size = start - timedelta(microseconds=1), 0, 16
    while True:
        times = cron.upcoming(after, tz, size)
        inside = sum(1 for t in times if t < end)
        count += inside
        if inside < len(times) or not times:
            return count
        after, size = times[-1], min(size * 2, chunk)


# --- monthly projection ------------------------------------------------------------------------


@dataclass(frozen=True)
class VariantLoad:
    """One VM per tick: its machine and how long it lives per run."""

    variant: str | None
    machine_type: str
    spot: bool
    gpu: str | None
    disk_gb: int
    vm_seconds: float
    basis: str  # "runtime" or "median of N recent runs"
    external_ip: bool = False
    # Why the table prices nothing of this VM (a machine type or GPU it lacks); None: priced.
    unpriced: str | None = None


@dataclass(frozen=True)
class JobProjection:
    job: str
    runs_per_month: float
    variants: tuple[VariantLoad, ...]
    items: dict[str, float]
    classic_items: dict[str, float]
    functions_use: FunctionUse = field(default_factory=FunctionUse)
    scheduler_entries: int = 1

    @property
    def monthly_usd(self) -> float:
        return sum(self.items.values())

    @property
    def classic_monthly_usd(self) -> float:
        return sum(self.classic_items.values())

    @property
    def vms_per_month(self) -> float:
        """Runs a month, each on its own VM: every tick starts one per matrix entry and repeat."""
        return self.runs_per_month * max(1, len(self.variants))

    @property
    def unpriced(self) -> dict[str, str]:
        """Configuration (or job) name → why its VM is left out of the figures."""
        return {v.variant or self.job: v.unpriced for v in self.variants if v.unpriced}

    def to_json(self) -> dict:
        return {
            "job": self.job,
            "monthly_usd": round(self.monthly_usd, 6),
            "classic_monthly_usd": round(self.classic_monthly_usd, 6),
            "items": {k: round(v, 6) for k, v in self.items.items()},
            "classic_items": {k: round(v, 6) for k, v in self.classic_items.items()},
            "runs_per_month": round(self.runs_per_month, 3),  # ticks a month (the name scripts read)
            "ticks_per_month": round(self.runs_per_month, 3),
            "vms_per_month": round(self.vms_per_month, 3),
            "vm_seconds_per_run": {v.variant or self.job: round(v.vm_seconds, 1) for v in self.variants},
            "vm_basis": {v.variant or self.job: v.basis for v in self.variants},
            "unpriced": self.unpriced,
        }


def project_job(spec: JobSpec, *, runs_per_month: float, runtime_s: float, table: PriceTable, region: str,
                history: Mapping[tuple[str, str | None], tuple[float, int]] | None = None,
                usage: Overheads = DEFAULT_OVERHEADS, retention_days: int = 90) -> JobProjection:
    """Monthly cost of `spec` and of the classic design, itemised.

    VM seconds per run come from `history` ((job, variant) → (median seconds, runs), see
    `vm_seconds_from_history`) where it has the variant, else `runtime_s`. The same seconds are
    used for both designs: in the classic one the stop rule must leave that much uptime.
    """
    runs = 0.0 if spec.paused else runs_per_month
    table.region_factor(region)  # an unknown region is the user's to fix: it refuses, naming the known ones
    loads = []
    for variant in spec.variants():
        seen = (history or {}).get((spec.name, variant.variant))
        runs_seen = f"{seen[1]} recent run{'s' if seen[1] != 1 else ''}" if seen else ""
        seconds, basis = (seen[0], f"median of {runs_seen}") if seen else (float(runtime_s), "runtime")
        machine = variant.machine
        gpu = f"{machine.gpu.type} x{machine.gpu.count}" if machine.gpu else None
        loads.append(VariantLoad(variant.variant, machine.type, machine.spot, gpu, machine.disk_gb, seconds, basis,
                                 variant.external_ip))

    price = table.functions
    items = dict.fromkeys(MONTHLY_ITEMS, 0.0)
    classic = dict.fromkeys(MONTHLY_ITEMS, 0.0)
    for number, load in enumerate(loads):
        missing = table.missing_price(load.machine_type, load.gpu)
        if missing is not None:
            # A machine type the table lacks leaves that VM out and says so; the rest is still priced.
            loads[number] = replace(load, unpriced=missing)
            continue
        per_run = vm_items(load.machine_type, load.spot, load.gpu, load.disk_gb, load.vm_seconds,
                           table, region, usage.disk_type, external_ip=load.external_ip)
        for key in ("compute", "gpu", "disk"):
            items[key] += per_run[key] * runs
        if "external_ip" in per_run:  # an item of its own only for a job that has one
            items["external_ip"] = items.get("external_ip", 0.0) + per_run["external_ip"] * runs
        classic["compute"] += per_run["compute"] * runs
        classic["gpu"] += per_run["gpu"] * runs
        # The classic VM is stopped, not deleted: its disk bills the whole month.
        classic["disk"] += load.disk_gb * table.disk_gb_month(usage.classic_disk_type, region)
    stored_gb = runs * len(loads) * usage.results_mb_per_run / 1024 * retention_days / MONTH_DAYS
    ops = runs * len(loads)
    items["storage"] = (stored_gb * table.storage.gb_month + ops * usage.class_a_per_run / 10_000
                        * table.storage.class_a_per_10k + ops * usage.class_b_per_run / 10_000
                        * table.storage.class_b_per_10k)
    items["scheduler"] = table.scheduler.job_month
    use = FunctionUse.of(price, runs, usage.start_seconds) + FunctionUse.of(price, runs * len(loads),
                                                                            usage.done_seconds)
    items["functions"] = use.usd(price)
    classic["scheduler"] = 2 * table.scheduler.job_month
    # The recipe's functions start/stop every instance with the job's label: two calls per tick.
    classic["functions"] = FunctionUse.of(price, 2 * runs, usage.classic_function_seconds).usd(price)
    return JobProjection(spec.name, runs, tuple(loads), items, classic, use)


RECENT_RUNS = 20  # how many of a configuration's newest ended runs set its VM time per run


def vm_seconds_from_history(records: Iterable[RunRecord], recent: int = RECENT_RUNS
                            ) -> dict[tuple[str, str | None], tuple[float, int]]:
    """(job, variant) → (median VM-alive seconds per run over its `recent` newest ended runs, how many).

    A run's VM-alive time counts every attempt (boot to delete). The median, because one run
    stuck until its timeout should not set the price of every future run; the newest runs,
    because a job that changed should be priced as it is now. A run whose host lacked its
    hardware (a local GPU entry on a host without that GPU) never measured the configuration, so
    its seconds price nothing. A local VM's wait for its turn on the host is left out
    (cost/local_wait.py): a VM of its own would not have waited.
    """
    ended: dict[tuple[str, str | None], list[RunRecord]] = {}
    for record in records:
        if any(a.outcome == Outcome.UNAVAILABLE for a in record.attempts):
            continue
        if record.terminal and any(a.vm_seconds is not None for a in record.attempts):
            ended.setdefault((record.job, record.variant), []).append(record)
    history = {}
    for key, runs in ended.items():
        newest = sorted(runs, key=lambda r: (r.created_at, r.run_id))[-recent:]
        history[key] = (statistics.median(work_vm_seconds(r) for r in newest), len(newest))
    return history


SCHEDULING_MODES = ("per-job", "shared")
MINUTES_PER_MONTH = SECONDS_PER_MONTH // 60


@dataclass(frozen=True)
class StackProjection:
    jobs: tuple[JobProjection, ...]
    # What the jobs share, by part: "sweep", and "dispatch" in shared mode; each itemised.
    overhead: dict[str, dict[str, float]]
    free_tier_usd: float  # scheduler and function free tiers of one billing account (a credit, >= 0)
    scheduling: str = "per-job"

    @property
    def shared_items(self) -> dict[str, float]:
        total = dict.fromkeys(MONTHLY_ITEMS, 0.0)
        for items in self.overhead.values():
            for key, value in items.items():
                total[key] = total.get(key, 0.0) + value
        return total

    @property
    def monthly_usd(self) -> float:
        """Before free tiers, like the per-job figures."""
        return sum(j.monthly_usd for j in self.jobs) + sum(self.shared_items.values())

    @property
    def monthly_after_free_tier_usd(self) -> float:
        return max(0.0, self.monthly_usd - self.free_tier_usd)

    @property
    def classic_monthly_usd(self) -> float:
        return sum(j.classic_monthly_usd for j in self.jobs)

    def items(self) -> dict[str, float]:
        total = dict.fromkeys(MONTHLY_ITEMS, 0.0)
        for part in [j.items for j in self.jobs] + [self.shared_items]:
            for key, value in part.items():
                # Some items are a job's own (external_ip, only where a job has an address).
                total[key] = total.get(key, 0.0) + value
        return total


# Cloud Logging (https://cloud.google.com/stackdriver/pricing, "Cloud Logging pricing summary"):
# $0.50 per GiB streamed into log buckets, the first 50 GiB per project per month free; the
# default 30-day retention costs nothing more.
LOGGING_USD_PER_GIB = 0.50
LOGGING_FREE_GIB = 50.0
# One run-end entry as Cloud Logging stores it: our JSON line (about 600 bytes for a run, a little
# more for a missed record) plus the entry's own fields (timestamp, resource, labels, insertId).
# An upper bound, not a measurement of Google's accounting.
RUN_LOG_ENTRY_BYTES = 2048


@dataclass(frozen=True)
class LoggingMonth:
    entries: float
    gib: float
    usd: float  # after the project's free 50 GiB


def run_log_month(runs_per_month: float, *, other_gib: float = 0.0) -> LoggingMonth:
    """The month's run-end entries (engine/run_log.py) and what they cost on top of `other_gib`
    the project already logs."""
    gib = runs_per_month * RUN_LOG_ENTRY_BYTES / 2**30
    billable = max(0.0, gib + other_gib - LOGGING_FREE_GIB) - max(0.0, other_gib - LOGGING_FREE_GIB)
    return LoggingMonth(entries=runs_per_month, gib=gib, usd=billable * LOGGING_USD_PER_GIB)


def project_stack(jobs: Sequence[JobProjection], *, table: PriceTable, sweep_interval_s: int,
                  usage: Overheads = DEFAULT_OVERHEADS, scheduling: str = "per-job",
                  fire_minutes: float | None = None) -> StackProjection:
    """The jobs plus what they share: the sweep, and in shared mode the dispatcher.

    per-job: a scheduler entry per job and one for the sweep. shared: one entry firing every
    minute; the dispatcher's invocations, seconds and Storage operations are counted in full
    (a cursor read and write in each of `fire_minutes` a month, the minutes in which some job fires,
    default as many as runs, the most there can be; and what a cold instance reads), and the
    sweep rides its entry.
    """
    if scheduling not in SCHEDULING_MODES:
        raise ValueError(f"scheduling {scheduling!r}: use one of {', '.join(SCHEDULING_MODES)}")
    price, storage = table.functions, table.storage
    shared = scheduling == "shared"
    if shared:  # no entry of their own
        jobs = [replace(j, items={**j.items, "scheduler": 0.0}, scheduler_entries=0) for j in jobs]
    sweeps = SECONDS_PER_MONTH / sweep_interval_s
    sweep_use = FunctionUse.of(price, sweeps, usage.sweep_seconds)
    sweep = dict.fromkeys(MONTHLY_ITEMS, 0.0)
    sweep["scheduler"] = 0.0 if shared else table.scheduler.job_month
    sweep["functions"] = sweep_use.usd(price)
    sweep["storage"] = sweeps * usage.sweep_lists / 10_000 * storage.class_a_per_10k
    overhead = {"sweep": sweep}
    use = sum((j.functions_use for j in jobs), sweep_use)
    if shared:
        ticks = sum(j.runs_per_month for j in jobs)
        minutes = min(float(MINUTES_PER_MONTH), ticks if fire_minutes is None else fire_minutes)
        dispatch_use = FunctionUse(MINUTES_PER_MONTH, MINUTES_PER_MONTH * price.billed_seconds(usage.dispatch_seconds)
                                   + ticks * usage.publish_seconds)
        dispatch = dict.fromkeys(MONTHLY_ITEMS, 0.0)
        dispatch["scheduler"] = table.scheduler.job_month
        dispatch["functions"] = dispatch_use.usd(price)
        cold = usage.dispatch_cold_starts_per_day * MONTH_DAYS
        dispatch["storage"] = ((minutes + cold) / 10_000 * storage.class_a_per_10k
                               + (minutes + cold * (1 + len(jobs))) / 10_000 * storage.class_b_per_10k)
        overhead["dispatch"] = dispatch
        use = use + dispatch_use
    entries = sum(j.scheduler_entries for j in jobs) + 1
    scheduler_credit = min(entries, table.scheduler.free_jobs) * table.scheduler.job_month
    return StackProjection(tuple(jobs), overhead, scheduler_credit + function_free_tier(use, price), scheduling)


def fire_minutes_per_month(specs: Sequence[JobSpec], start: datetime) -> float:
    """Distinct minutes per 30 days in which at least one unpaused job fires (the dispatcher writes
    its cursor in those only), counted over the four weeks after `start`."""
    from spotcron.core.cron.schedule import load_time_zone, parse_schedule

    end = start + timedelta(days=28)
    minutes: set[datetime] = set()
    for schedule, zone in sorted({(s.schedule, s.time_zone) for s in specs if not s.paused}):
        cron, tz, after = parse_schedule(schedule), load_time_zone(zone), start - timedelta(microseconds=1)
        while len(minutes) < 28 * 1440 and (after := cron.next_after(after, tz)) < end:
            minutes.add(after)
    return len(minutes) * MONTH_DAYS / 28


def function_free_tier(use: FunctionUse, price: FunctionPrice) -> float:
    """The part of `use` that the monthly free tier covers: invocations and, where the table
    splits an instance-second into CPU and memory, those seconds too."""
    credit = min(use.invocations, price.free_invocations) * price.per_million_invocations / 1e6
    if price.per_100ms is None:
        credit += min(use.seconds * price.cpu, price.free_cpu_seconds) * price.cpu_second
        credit += min(use.seconds * price.memory_gb, price.free_memory_seconds) * price.memory_second
    return credit


def project_specs(specs: Sequence[JobSpec], *, table: PriceTable, region: str, now: datetime,
                  runtime_s: float, records: Iterable[RunRecord] = (), sweep_interval_s: int = 300,
                  retention_days: int = 90, usage: Overheads = DEFAULT_OVERHEADS,
                  scheduling: str = "per-job") -> StackProjection:
    """The monthly projection of a whole stack: each job from its schedule, then what they share.

    `records` (from the bucket, or none) replace `runtime_s` for the configurations they cover.
    """
    jobs = project_jobs(specs, table=table, region=region, now=now, runtime_s=runtime_s, records=records,
                        retention_days=retention_days, usage=usage)
    minutes = fire_minutes_per_month(specs, now) if scheduling == "shared" else None
    return project_stack(jobs, table=table, sweep_interval_s=sweep_interval_s, usage=usage, scheduling=scheduling,
                         fire_minutes=minutes)


def project_jobs(specs: Sequence[JobSpec], *, table: PriceTable, region: str, now: datetime, runtime_s: float,
                 records: Iterable[RunRecord] = (), retention_days: int = 90,
                 usage: Overheads = DEFAULT_OVERHEADS) -> list[JobProjection]:
    """Each job's own monthly projection, whatever the scheduling mode (`project_stack` adds that)."""
    history = vm_seconds_from_history(records)
    return [project_job(spec, runs_per_month=runs_per_month(spec.schedule, spec.time_zone, now),
                        runtime_s=runtime_s, table=table, region=region, history=history, usage=usage,
                        retention_days=retention_days)
            for spec in specs]
