"""Billed overhead in local mode: how long spotcron keeps a VM alive beyond the work itself.

Runs two jobs through the whole local pipeline (start_job → runner process → upload →
job_done → delete): one that does nothing and one that sleeps 5 seconds. For every run the
overhead is VM-alive seconds (attempt created_at → deleted_at in the run record) minus
container seconds (started_at → finished_at).

Baseline: the classic recipe's fixed stop rule. Its VM runs until the "stop" cron fires two
minutes after the "start" cron, whatever the work took, so its overhead is 120 s − work.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from bench import Section, maximum, median
from spotcron.core.runs import RunRecord, RunState
from spotcron.cost.billing import billed_vm_seconds

CLASSIC_UPTIME_S = 120.0  # start at 0 */4, stop at 2 */4: two minutes of uptime per run
GRACE_S = 30
SWEEP_INTERVAL_S = 10
JOBS = {
    "noop": '["true"]',
    "sleep5": '["sleep", "5"]',
}
JOB_TEMPLATE = """\
schedule: "0 */4 * * *"
image: spotcron/bench-{name}:latest
timeout: 2m
concurrency: allow
machine: {{type: n1-standard-1}}
local:
  command: {command}
"""


def write_jobs(directory: Path, jobs: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, command in jobs.items():
        (directory / f"{name}.yaml").write_text(JOB_TEMPLATE.format(name=name, command=command))


def start_stack(state_dir: Path, cwd: Path, *, grace: int = GRACE_S, sweep_interval: int = SWEEP_INTERVAL_S,
                limits=None):
    """A local stack on a private state dir that runs every job's `local.command` (no containers)."""
    from spotcron.local.stack import LocalStack

    return LocalStack(state_dir, environ=dict(os.environ), cwd=cwd, sweep_interval=sweep_interval, grace=grace,
                      runtime_for=lambda image: None, limits=limits).start()


def run_batches(stack, spec, runs: int, at_once: int, *, timeout_s: float = 180) -> list[RunRecord]:
    """`runs` manual runs of `spec`, `at_once` in flight at a time; their final records."""
    records: list[RunRecord] = []
    while len(records) < runs:
        batch = []
        for _ in range(min(at_once, runs - len(records))):
            batch += stack.run_now(spec)
        records += stack.wait(batch, timeout=timeout_s, poll_s=0.2)
    return records


def overheads(records: list[RunRecord]) -> tuple[list[float], list[float], list[float]]:
    """(VM-alive − container seconds, container seconds, VM-alive seconds) of each finished attempt."""
    extra, work, alive = [], [], []
    for record in records:
        attempt = record.current_attempt
        if record.state != RunState.SUCCEEDED or attempt is None:
            continue
        if attempt.vm_seconds is None or attempt.container_seconds is None:
            continue
        extra.append(attempt.vm_seconds - attempt.container_seconds)
        work.append(attempt.container_seconds)
        alive.append(attempt.vm_seconds)
    return extra, work, alive


def run(quick: bool = False) -> Section:
    from spotcron.core.loader import load_jobs

    started = time.perf_counter()
    runs, at_once = (3, 3) if quick else (20, 4)
    section = Section("overhead", f"Billed overhead, local mode: VM-alive minus container seconds, {runs} runs per job",
                      baseline=f"classic fixed stop rule: VM up {CLASSIC_UPTIME_S:.0f} s per run, overhead = "
                               f"{CLASSIC_UPTIME_S:.0f} s − work")
    with tempfile.TemporaryDirectory(prefix="spotcron-bench-") as tmp:
        root = Path(tmp)
        write_jobs(root / "jobs", JOBS)
        specs = {s.name: s for s in load_jobs([root / "jobs"], grace=GRACE_S)}
        stack = start_stack(root / "state", root)
        try:
            for name in JOBS:
                records = run_batches(stack, specs[name], runs, at_once)
                extra, work, alive = overheads(records)
                failed = [f"{r.run_id}: {r.state} ({r.reason})" for r in records if r.state != RunState.SUCCEEDED]
                classic = [CLASSIC_UPTIME_S - w for w in work]
                section.add(f"{name}: overhead per run, median", median(extra), median(classic), "s")
                section.add(f"{name}: overhead per run, max", maximum(extra), maximum(classic), "s")
                section.add(f"{name}: billed VM seconds per run (1-min minimum), median",
                            median(billed_vm_seconds(a) for a in alive), CLASSIC_UPTIME_S, "s")
                section.notes.append(f"{name}: {len(extra)} of {len(records)} runs succeeded, work median "
                                     f"{median(work):.2f} s, {at_once} runs at a time"
                                     + (f"; not succeeded: {'; '.join(failed[:3])}" if failed else ""))
        finally:
            stack.stop()
    section.notes += [
        "Local mode: a 'VM' is a runner process, so boot and image pull are not in these figures; on Google "
        "Cloud both designs also pay the boot (the classic one inside its 2 minutes).",
        "Compute Engine bills at least one minute per VM: spotcron's billed time is max(60 s, alive).",
    ]
    section.seconds = time.perf_counter() - started
    return section
