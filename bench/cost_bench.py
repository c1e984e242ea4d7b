"""Cost: the recipe's reference workload priced for spotcron's design and for the classic design.

The workload is the one in Max Woolf's recipe: a bot on a Spot (preemptible) n1-standard-1,
every 4 hours, 2 minutes of work. Both designs are priced by spotcron.cost.billing from the same price
table, so the ratio shows the design, not a price change:

- spotcron: a fresh VM per run, deleted when the work ends (its disk only while it exists),
  one scheduler entry per job, start_job + job_done per run, one shared sweep;
- classic: a stopped VM between runs whose 10 GB disk bills all month, a "start" and a "stop"
  scheduler rule per job, start/stop functions that wait about 60 s for their operation.

Free tiers (3 Cloud Scheduler jobs and the functions' free invocations and seconds, per billing
account) are applied to both designs in the stack rows.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

from bench import Section
from spotcron.core.spec import JobSpec
from spotcron.cost.billing import (
    DEFAULT_USAGE,
    FunctionUse,
    StackProjection,
    function_free_tier,
    project_job,
    project_stack,
    runs_per_month,
)
from spotcron.cost.prices import PriceTable, load_prices

SCHEDULE = "0 */4 * * *"
RUNTIME_S = 120.0
MACHINE = "n1-standard-1"
SWEEP_INTERVAL_S = 300
# A fixed instant, so runs per month (averaged over the year after it) does not drift between runs.
AS_OF = datetime(2026, 11, 22, tzinfo=UTC)
STACK_SIZES = (1, 10, 100)


def reference_job(name: str = "hello-bot") -> JobSpec:
    return JobSpec(name=name, schedule=SCHEDULE, image="spotcron/hello-bot",
                   machine={"type": MACHINE, "spot": True, "disk_gb": 10}, timeout=600)


def classic_free_tier(stack: StackProjection, table: PriceTable) -> float:
    """The classic design's share of the same free tiers: two scheduler rules per job, and the
    start/stop function calls (two per tick, each about `classic_function_seconds`)."""
    rules = 2 * len(stack.jobs)
    scheduler = min(rules, table.scheduler.free_jobs) * table.scheduler.job_month
    calls = sum(2 * job.runs_per_month for job in stack.jobs)
    use = FunctionUse.of(table.functions, calls, DEFAULT_USAGE.classic_function_seconds)
    return scheduler + function_free_tier(use, table.functions)


def stack_of(n: int, table: PriceTable, runs: float) -> StackProjection:
    jobs = [project_job(reference_job(f"bot-{i:03d}"), runs_per_month=runs, runtime_s=RUNTIME_S, table=table,
                        region=table.region) for i in range(n)]
    return project_stack(jobs, table=table, sweep_interval_s=SWEEP_INTERVAL_S)


def run(quick: bool = False) -> Section:
    started = time.perf_counter()
    section = Section("cost", "Cost: monthly USD for the recipe's workload (n1-standard-1 Spot, every 4 h, 2 min)",
                      baseline="classic design: stopped VM + 10 GB disk all month + start and stop rules, same prices")
    spec = reference_job()
    runs = runs_per_month(spec.schedule, spec.time_zone, AS_OF)
    current = load_prices()
    recipe = load_prices("recipe-2018")

    for table in (current, recipe):
        job = project_job(spec, runs_per_month=runs, runtime_s=RUNTIME_S, table=table, region=table.region)
        label = f"1 job, per job-month, prices {table.name}"
        section.add(label, job.monthly_usd, job.classic_monthly_usd, "usd")
        if table is current:
            for item in ("compute", "disk", "scheduler", "functions"):
                section.add(f"  of which {item}", job.items[item], job.classic_items[item], "usd")

    for n in STACK_SIZES:
        stack = stack_of(n, current, runs)
        ours = stack.monthly_after_free_tier_usd / n
        classic = max(0.0, stack.classic_monthly_usd - classic_free_tier(stack, current)) / n
        section.add(f"{n} job{'s' if n > 1 else ''}, per job-month after free tiers, incl. sweep", ours, classic,
                    "usd")

    section.notes += [
        f"{runs:.0f} runs a month, {RUNTIME_S:.0f} s of VM time per run in both designs; prices "
        f"{current.name} (as of {current.as_of}) and {recipe.name} (the article's own prices).",
        "Free tiers: Cloud Scheduler's 3 free jobs per billing account cover spotcron's sweep plus 2 jobs, "
        "but only 1 classic job (2 rules each); the functions' free invocations and seconds apply to both.",
        "spotcron's stack rows include its sweep (every 5 minutes), shared by all jobs.",
    ]
    section.seconds = time.perf_counter() - started
    return section
