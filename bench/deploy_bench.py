"""Deploy at scale: plan and apply N jobs against the local fake Google APIs, with latency.

The fake servers of tests/deploy sit behind Google's real client libraries and sleep
`latency_s` on every request, like a remote API. Measured in one run:
- a no-change plan: API calls and seconds, spotcron's list-per-kind reads against the
  baseline of a get per scheduler entry (how a naive per-resource tool reads state);
- apply from nothing: seconds with the default concurrency (16 calls in flight) against the
  same apply one call at a time (concurrency 1), each on a fresh fake.

    python -m bench.deploy_bench [N_JOBS] [LATENCY_S]
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

PROJECT = "bench-proj"
CONCURRENCY = 16


def _jobs(n: int) -> list[Any]:
    from spotcron.core.spec import JobSpec

    return [JobSpec(name=f"job-{i:05d}", schedule=f"{i % 60} * * * *", image="busybox") for i in range(n)]


def _source() -> Any:
    """The archive a real deploy would upload: this checkout's functions and runtime package."""
    from spotcron.deploy.source import build_source

    return build_source(Path(__file__).resolve().parents[1])


def _apply(n_jobs: int, latency_s: float, concurrency: int, source: Any) -> tuple[float, int, Any]:
    """(seconds, API calls) of a deploy from nothing; returns the fake, still running."""
    from spotcron.core.settings import Settings
    from spotcron.deploy.apply import SilentReporter, run_deploy
    from spotcron.gcp.admin.calls import Caller
    from spotcron.gcp.admin.settling import Settling
    from tests.fakes.deploy.cloud import FakeCloud

    # The calls' cost only: no propagation delays (those are Google's minutes, not spotcron's work),
    # and any wait on the fake's virtual clock.
    cloud = FakeCloud(PROJECT, latency_s=latency_s, account_delay_s=0, grant_delay_s=0, agent_delay_s=0,
                      api_delay_s=0).start()
    settings = Settings(project=PROJECT, bucket=f"{PROJECT}-spotcron")
    clients = cloud.clients(pool_size=concurrency)
    started = time.perf_counter()
    run_deploy(settings, _jobs(n_jobs), source, clients, confirm=lambda actions: True, reporter=SilentReporter(),
               concurrency=concurrency, caller=Caller(PROJECT, attempts=3, sleep=lambda s: None), poll_initial=0.01,
               settling=Settling(sleep=cloud.clock.sleep))
    return time.perf_counter() - started, len(cloud.calls()), cloud


def _plan(cloud: Any, n_jobs: int, source: Any) -> tuple[float, int, int]:
    """(seconds, API calls, actions) of a plan over the deployed stack."""
    from spotcron.core.settings import Settings
    from spotcron.deploy.apply import compute_plan
    from spotcron.gcp.admin.calls import Caller

    settings = Settings(project=PROJECT, bucket=f"{PROJECT}-spotcron")
    clients = cloud.clients(pool_size=CONCURRENCY)
    before = len(cloud.calls())
    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        planned = compute_plan(settings, _jobs(n_jobs), source.object_name, clients, Caller(PROJECT), pool)
    return time.perf_counter() - started, len(cloud.calls()) - before, len(planned.actions)


def _naive_plan(cloud: Any, n_jobs: int, source: Any) -> tuple[float, int]:
    """The baseline read: everything a plan reads, but a get per scheduler entry instead of a list."""
    from spotcron.core.settings import Settings
    from spotcron.deploy.naming import Names, scheduler_entry

    names = Names.of(Settings(project=PROJECT, bucket=f"{PROJECT}-spotcron"))
    scheduler = cloud.clients(pool_size=CONCURRENCY).scheduler
    seconds, calls, _ = _plan(cloud, 0, source)  # the other reads, with no scheduler entries wanted
    before = len(cloud.calls())
    started = time.perf_counter()
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        list(pool.map(lambda job: scheduler.get_job(name=names.scheduler_path(scheduler_entry(job.name)), retry=None),
                      _jobs(n_jobs)))
    gets = len(cloud.calls()) - before
    # The plan over no jobs also listed the scheduler once; the naive reader would not have.
    return seconds + time.perf_counter() - started, calls - 1 + gets


def run(n_jobs: int = 1000, latency_s: float = 0.02) -> dict[str, Any]:
    """Figures for python -m bench (see bench/scale_bench.deploy_figures for the shape)."""
    import logging

    logging.getLogger("urllib3").setLevel(logging.ERROR)
    source = _source()

    concurrent_s, apply_calls, cloud = _apply(n_jobs, latency_s, CONCURRENCY, source)
    try:
        plan_s, plan_calls, leftover = _plan(cloud, n_jobs, source)
        if leftover:
            raise AssertionError(f"a re-plan after apply found {leftover} actions; expected none")
        naive_s, naive_calls = _naive_plan(cloud, n_jobs, source)
    finally:
        cloud.stop()
    sequential_s, _, sequential_cloud = _apply(n_jobs, latency_s, 1, source)
    sequential_cloud.stop()

    return {
        "figures": [
            {"name": f"API calls, no-change plan of {n_jobs:,} jobs", "spotcron": plan_calls,
             "baseline": naive_calls, "unit": "calls", "baseline_label": "a get per scheduler entry"},
            {"name": f"seconds, no-change plan of {n_jobs:,} jobs", "spotcron": plan_s, "baseline": naive_s,
             "unit": "s", "baseline_label": f"a get per scheduler entry, {CONCURRENCY} in flight"},
            {"name": f"seconds, apply {n_jobs:,} jobs from nothing", "spotcron": concurrent_s,
             "baseline": sequential_s, "unit": "s", "baseline_label": "one call at a time"},
        ],
        "baseline": (f"the same fake APIs and clients with {latency_s * 1000:.0f} ms per request: a reader that gets "
                     f"each scheduler entry, and an apply with concurrency 1"),
        "notes": [f"apply from nothing made {apply_calls:,} API calls in {concurrent_s:.1f} s "
                  f"({CONCURRENCY} in flight) and ended with a zero-action re-plan"],
        "n_jobs": n_jobs,
        "latency_s": latency_s,
    }


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    latency = float(sys.argv[2]) if len(sys.argv) > 2 else 0.02
    started = time.perf_counter()
    result = run(n, latency)
    for figure in result["figures"]:
        ratio = figure["spotcron"] / figure["baseline"] if figure["baseline"] else float("nan")
        print(f"{figure['name']}: spotcron {figure['spotcron']:.3f}, baseline {figure['baseline']:.3f} "
              f"({figure['baseline_label']}), ratio {ratio:.3f}")
    for note in result["notes"]:
        print(note)
    print(f"total {time.perf_counter() - started:.1f} s")
