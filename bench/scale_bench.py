"""Scale: one sweep over many VMs, deploying many jobs, and many local runs at once.

(a) sweep: the engine's sweep (spotcron.engine.sweep) over N managed VMs, every Compute and
    Storage call delayed by the same injected latency, against TODAY'S SWEEP: the same code
    reading the record of every live run, as a sweep must whose live index names the runs
    without what the sweep needs. Once with every VM healthy, once with some to reap. Also against a NAIVE
    listing written here, the way the recipe's start/stop functions find VMs (instances.list per
    zone, then instances.get per VM), and over the fake Compute REST server through the real
    client: aggregatedList (spotcron) against per-zone list + get.
(b) deploy: figures from bench/deploy_bench.py (plan and apply of many jobs), when present.
(c) local: N jobs fired at once in local mode, until every result is in the bucket, against
    fewer jobs at once (per-run throughput) and against one run after another (a small
    sample, extrapolated).
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import Figure, Section, median
from spotcron.core.runs import RunState

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
T0 = datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)
PROJECT = "bench-project"


# --- (a) the sweep --------------------------------------------------------------------------------


class Latent:
    """A port whose every listed method waits `latency_s` first, as a remote call would; counts calls."""

    def __init__(self, target: Any, latency_s: float, methods: Iterable[str]):
        self._target = target
        self._latency_s = latency_s
        self._methods = frozenset(methods)
        self._lock = threading.Lock()
        self.calls: dict[str, int] = {}

    def charge(self, method: str) -> None:
        with self._lock:
            self.calls[method] = self.calls.get(method, 0) + 1
        if self._latency_s:
            time.sleep(self._latency_s)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._target, name)
        if name not in self._methods:
            return attribute

        def call(*args, **kwargs):
            self.charge(name)
            return attribute(*args, **kwargs)

        return call

    @property
    def total(self) -> int:
        return sum(self.calls.values())


class PerZoneListing:
    """NAIVE BASELINE, not spotcron: find managed VMs with instances.list in each zone, then
    instances.get on each VM for its status and metadata. Otherwise the same Compute port."""

    def __init__(self, compute: Latent, zones: Iterable[str]):
        self._compute = compute
        self._zones = tuple(zones)

    def list_managed(self) -> list:
        found = []
        for zone in self._zones:
            self._compute.charge("list")  # one instances.list call for this zone
            names = [i.name for i in self._compute.all_instances() if i.zone == zone and i.managed]
            for name in names:
                instance = self._compute.get_instance(zone, name)
                if instance is not None:
                    found.append(instance)
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self._compute, name)


COMPUTE_CALLS = ("create_instance", "get_instance", "list_managed", "delete_instance")
BLOB_CALLS = ("read", "write", "list", "delete")


def populated(n: int, *, dead_every: int | None = 50):
    """Deps with `n` running runs, one managed VM each, spread over three zones, the clock ten
    minutes on. Every `dead_every`-th VM is stopped, and as many are past their deadline (None:
    every VM healthy)."""
    from spotcron.core.settings import Limits, Settings
    from spotcron.core.spec import JobSpec
    from spotcron.engine.deployed import SpecStore
    from spotcron.engine.deps import Deps
    from spotcron.engine.start_job import launch
    from spotcron.testing.memory import FakeClock, MemoryBlobs, MemoryCompute, MemoryEvents
    from spotcron.testing.token_issuer import ClockedIdentity

    clock = FakeClock(T0)
    compute = MemoryCompute(clock)
    # Thousands of live VMs on purpose: the stack limits are raised to let the sweep meet them.
    settings = Settings(project=PROJECT, zones=ZONES, bucket="bench-results", grace=60,
                        job_done_url="https://us-central1-bench.cloudfunctions.net/job_done",
                        limits=Limits(max_live_vms=10_000, max_gpus=10_000, max_vm_hours_per_day=1e6))
    deps = Deps(settings=settings, compute=compute, blobs=MemoryBlobs("bench-results", clock), events=MemoryEvents(),
                identity=ClockedIdentity(clock), clock=clock, user_data=lambda: "#cloud-config\n")
    for i in range(n):
        # timeout 1 min: past its deadline ten minutes later
        short = dead_every is not None and i % dead_every == dead_every // 2
        spec = JobSpec(name=f"job-{i:04d}", schedule="0 */4 * * *", image="bench/job:1",
                       timeout="1m" if short else "1h", machine={"type": "e2-small", "zones": [ZONES[i % 3]]})
        SpecStore(deps.blobs).write(spec)  # deployed, as start_job only ever starts what deploy wrote
        launch(deps, spec, requested_at=clock.now())
    for i, instance in enumerate(sorted(compute.all_instances(), key=lambda x: x.name)):
        if dead_every is not None and i % dead_every == 0:
            compute.set_status(instance.zone, instance.name, "TERMINATED")
    clock.advance(600)
    return deps, compute


def every_run(*_args) -> bool:
    """TODAY'S SWEEP, not the index's: read the record of every live run, as a sweep whose live
    index carried only the runs' names would have to."""
    return True


@contextlib.contextmanager
def reading_every_record(today: bool) -> Iterator[None]:
    """With `today`, the engine's sweep with its pick of the runs to read (`needs_attention`)
    replaced by `every_run`: the same code otherwise, so the two differ only in what they read.
    The replacement lives here, not as a parameter of the sweep, because only the bench wants it."""
    from spotcron.engine import sweep

    if not today:
        yield
        return
    picked = sweep.needs_attention
    sweep.needs_attention = every_run
    try:
        yield
    finally:
        sweep.needs_attention = picked


def timed_sweep(n: int, latency_s: float, *, naive: bool = False, today: bool = False,
                healthy: bool = False) -> dict:
    from spotcron.engine.sweep import _sweep

    deps, memory = populated(n, dead_every=None if healthy else 50)
    compute = Latent(memory, latency_s, COMPUTE_CALLS)
    blobs = Latent(deps.blobs, latency_s, BLOB_CALLS)
    port = PerZoneListing(compute, ZONES) if naive else compute
    swept = dataclasses.replace(deps, compute=port, blobs=blobs)
    with reading_every_record(today):
        started = time.perf_counter()
        report = _sweep(swept)
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "compute": compute.total, "storage": blobs.total,
            "deleted": sorted(name for name, _ in report.deleted_vms), "ended": len(report.ended_runs),
            "retried": len(report.retried_runs),
            "left": len(memory.all_instances())}


def sweep_section(quick: bool = False) -> Section:
    started = time.perf_counter()
    n, latency_s = (100, 0.002) if quick else (1000, 0.01)
    ms = latency_s * 1000
    section = Section("scale-sweep", f"Scale (a): one sweep over {n:,} live VMs",
                      baseline="today's sweep: the same code reading the record of every live run (as it "
                               "must without state, attempt, zone, VM and deadline in the live index)")
    for healthy, label in ((True, f"{n:,} healthy live VMs"), (False, f"{n:,} live VMs, {n // 25} to reap")):
        ours = timed_sweep(n, latency_s, healthy=healthy)
        today = timed_sweep(n, latency_s, healthy=healthy, today=True)
        if (ours["deleted"], ours["ended"], ours["retried"]) != (today["deleted"], today["ended"], today["retried"]):
            raise AssertionError("the index's sweep did other work than today's; the comparison is void")
        section.add(f"{label}: Storage API calls", ours["storage"], today["storage"], "calls")
        section.add(f"{label}: Compute API calls", ours["compute"], today["compute"], "calls")
        section.add(f"{label}: seconds, {ms:g} ms per API call (in memory)", ours["seconds"], today["seconds"], "s")
        if not healthy:
            work = ours
    # Only its call count is reported: without the latency it does not spend 20,000 calls x 10 ms
    # (over three minutes) of the bench's ten.
    naive = timed_sweep(n, 0.0, naive=True)
    if naive["deleted"] != work["deleted"]:
        raise AssertionError("the naive listing reaped other VMs than spotcron's; the comparison is void")
    section.add(f"{n:,} live VMs, {n // 25} to reap: Compute API calls", work["compute"], naive["compute"], "calls",
                baseline_label="NAIVE: instances.list per zone + instances.get per VM")
    rest = rest_listing(n)
    if rest is not None:
        section.add("REST fake, list managed VMs: HTTP requests", rest["ours_requests"], rest["naive_requests"], "calls",
                    baseline_label="NAIVE per-zone list + get")
        section.add("REST fake, list managed VMs: seconds", rest["ours_s"], rest["naive_s"], "s",
                    baseline_label="NAIVE per-zone list + get")
    section.notes += [
        f"Goal at 1,000 live VMs: at most 5 Compute calls, at most 10 Storage calls, under 2 s at "
        f"10 ms per call. Healthy: one aggregated VM list and one listing of the live index, whose marker names "
        f"say which runs need attention; no record is read. With {n // 25} VMs to reap (stopped, or past their "
        f"deadline) the calls follow that work: {len(work['deleted'])} deletes, and the records of those "
        f"runs only; it ended {work['ended']} runs and retried {work['retried']}, as today's sweep did.",
        f"Latency is injected into every Compute and Storage call alike ({ms:g} ms); "
        "spotcron.testing.memory.MemoryCompute(latency_s) only delays create and delete, so the bench wraps the ports itself.",
        "REST rows: spotcron.gcp.compute.GoogleCompute.list_managed (one filtered aggregatedList, 500 per page) "
        "against per-zone instances.list + instances.get, both through google-cloud-compute against "
        "tests/fakes/gcp/compute.py on 127.0.0.1 (the bench adds the per-zone list route).",
    ]
    if rest is None:
        section.notes.append("REST rows skipped: tests/fakes/gcp/compute.py is not importable from here.")
    section.seconds = time.perf_counter() - started
    return section


def rest_listing(n: int) -> dict | None:
    """aggregatedList (spotcron's GoogleCompute) vs per-zone list + get, over the fake REST server."""
    try:
        from tests.fakes.gcp import compute as fake_compute
    except ImportError:
        return None
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import compute_v1

    from spotcron.gcp.compute import MANAGED_FILTER, GoogleCompute

    class PerZoneFake(fake_compute.FakeComputeEngine):
        """The fake plus instances.list for one zone (GET .../zones/Z/instances), paged like the API."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.route("GET", fake_compute.INSTANCES_PATH, self._list_zone)

        def start(self):
            super().start()
            # Without it, a reply written in two pieces waits out the client's delayed ACK
            # (~40 ms a request on loopback), which would bill the naive side for the fake.
            self._server.RequestHandlerClass.disable_nagle_algorithm = True
            return self

        def _list_zone(self, request, project: str, zone: str):
            keep = fake_compute._parse_filter(request.param("filter", "") or "")
            size = int(request.param("maxResults") or self.page_size)
            start = int(request.param("pageToken") or 0)
            names = sorted(k for k, r in self.instances.items() if k[:2] == (project, zone) and keep(r))
            reply: dict[str, Any] = {"kind": "compute#instanceList", "items": [self.instances[k]
                                                                               for k in names[start:start + size]]}
            if start + size < len(names):
                reply["nextPageToken"] = str(start + size)
            return 200, reply

    with PerZoneFake(zones=ZONES, project=PROJECT) as fake:
        for i in range(n):
            fake.add_instance(ZONES[i % 3], f"sc-job-{i:04d}-a1",
                              labels={"spotcron": "1", "job": f"job-{i:04d}", "run": "20261122-1200"})
        options = {"api_endpoint": fake.endpoint}
        ours = GoogleCompute(PROJECT, ZONES, client_options=options, credentials=AnonymousCredentials())
        client = compute_v1.InstancesClient(transport="rest", client_options=options,
                                            credentials=AnonymousCredentials())

        def naive() -> list:
            found = []
            for zone in ZONES:
                for listed in client.list(request={"project": PROJECT, "zone": zone, "filter": MANAGED_FILTER}):
                    found.append(client.get(project=PROJECT, zone=zone, instance=listed.name))
            return found

        # Warm both clients (imports, connections) before timing.
        ours.get_instance(ZONES[0], "warm-up")
        client.list(request={"project": PROJECT, "zone": ZONES[0], "max_results": 1})
        result = {}
        for key, action in (("ours", ours.list_managed), ("naive", naive)):
            before = len(fake.requests)
            started = time.perf_counter()
            found = action()
            result[f"{key}_s"] = time.perf_counter() - started
            result[f"{key}_requests"] = len(fake.requests) - before
            if len(found) != n:
                raise AssertionError(f"{key} listing found {len(found)} of {n} managed VMs")
        return result


# --- (b) deploy -----------------------------------------------------------------------------------


def deploy_section(quick: bool = False) -> Section:
    started = time.perf_counter()
    n_jobs, latency_s = (100, 0.005) if quick else (1000, 0.02)
    section = Section("scale-deploy", f"Scale (b): deploy plan and apply, {n_jobs:,} jobs",
                      baseline="as bench/deploy_bench.py measures it")
    try:
        from bench import deploy_bench
    except ImportError:
        section.unavailable = "deploy bench: not available yet"
        return section
    result = deploy_bench.run(n_jobs=n_jobs, latency_s=latency_s)
    figures, notes = deploy_figures(result)
    section.figures += figures
    section.notes += notes
    if not figures:
        section.unavailable = f"deploy bench returned no figure beside a baseline (keys: {', '.join(result)})"
    section.seconds = time.perf_counter() - started
    return section


def deploy_figures(result: Any) -> tuple[list[Figure], list[str]]:
    """Figures from what deploy_bench.run returned. Accepted shapes, in its dict:
    "figures": [{"name", "spotcron", "baseline", "unit", "better"?}], or
    NAME: {"spotcron", "baseline", "unit"?}; "notes": [str] or "baseline": str. Other numbers become notes."""
    figures: list[Figure] = []
    notes: list[str] = []
    if not isinstance(result, dict):
        return [], [f"deploy bench returned {type(result).__name__}, not a dict"]
    entries = result.get("figures")
    if isinstance(entries, dict):
        entries = [{"name": k, **v} for k, v in entries.items() if isinstance(v, dict)]
    entries = list(entries or [])
    for key, value in result.items():
        if key in ("figures", "notes", "baseline"):
            continue
        if isinstance(value, dict) and {"spotcron", "baseline"} <= value.keys():
            entries.append({"name": key, **value})
        elif isinstance(value, int | float | str):
            notes.append(f"{key}: {value}")
    for entry in entries:
        try:
            figures.append(Figure(str(entry["name"]), float(entry["spotcron"]), float(entry["baseline"]),
                                  entry.get("unit", "count"), entry.get("better", "lower"),
                                  entry.get("baseline_label", "")))
        except (KeyError, TypeError, ValueError) as exc:
            notes.append(f"unreadable figure {entry!r}: {exc}")
    extra = result.get("notes") or []
    notes += [extra] if isinstance(extra, str) else list(extra)
    if isinstance(result.get("baseline"), str):
        notes.insert(0, f"baseline: {result['baseline']}")
    return figures, notes


# --- (c) local mode, many at once -------------------------------------------------------------------

BURST_JOB = """\
schedule: "0 3 * * *"
image: spotcron/bench-burst:latest
timeout: 5m
concurrency: allow
machine: {type: e2-small}
local:
  command: [python3, -c, "import os, pathlib; (pathlib.Path(os.environ['SPOTCRON_RESULTS_DIR']) / 'out.json').write_text('{}')"]
"""


def publish_all(stack, specs: list) -> dict[str, str]:
    """A manual trigger for every spec at once (the message stack.run_now sends); job → nonce.

    stack.run_now waits for each run's record before returning, which would fire the jobs one
    after another."""
    from spotcron.engine.deployed import SpecStore, start_message

    nonces = {}
    for spec in specs:
        nonces[spec.name] = secrets.token_hex(2)
        SpecStore(stack.deps.blobs).write(spec)
        stack.bus.publish(stack.settings.start_topic, start_message(spec),
                          {"trigger": "manual", "nonce": nonces[spec.name]})
    return nonces


def burst(stack, specs: list, *, timeout_s: float = 300, stall_s: float = 30, poll_s: float = 0.25) -> dict:
    """Fire `specs` at once; seconds until every run has ended, and how many left their results.

    The local bucket serves one request at a time, so the watching must not compete with the
    runs: one listing of runs/ per poll until every run exists, then one listing of the live/
    index per poll (a run leaves it when its record turns terminal, after its results are
    uploaded). Records are read once, at the end. A trigger that made no run for `stall_s`
    while nothing else was live counts as lost."""
    from spotcron.core import layout

    store, blobs = stack.deps.store, stack.deps.blobs
    started = time.perf_counter()
    nonces = publish_all(stack, specs)
    runs: dict[str, str] = {}
    fired = last_new = None
    ended: set[tuple[str, str]] = set()
    deadline = time.monotonic() + timeout_s
    next_sweep = time.monotonic() + stack.settings.sweep_interval
    while time.monotonic() < deadline:
        if len(runs) < len(specs):
            for name in blobs.list(layout.RUNS):
                parsed = layout.parse_record_name(name)
                if parsed and parsed[0] in nonces and parsed[0] not in runs \
                        and parsed[1].startswith("m") and parsed[1].split("-")[2] == nonces[parsed[0]]:
                    runs[parsed[0]] = parsed[1]
                    last_new = time.monotonic()
            if len(runs) == len(specs):
                fired = time.perf_counter() - started
        live = set(store.live_runs())
        if runs and not any(item in live for item in runs.items()):
            # Between a record's creation and its live marker a run looks ended: confirm by reading.
            for item in set(runs.items()) - ended:
                record = store.read(*item)
                if record is not None and record.terminal:
                    ended.add(item)
            stalled = last_new is not None and time.monotonic() - last_new > stall_s
            if len(ended) == len(runs) and (len(runs) == len(specs) or stalled):
                break
        if time.monotonic() >= next_sweep:
            stack.sweep_now()
            next_sweep = time.monotonic() + stack.settings.sweep_interval
        time.sleep(poll_s)
    seconds = time.perf_counter() - started
    records = [r for r in (store.read(*item) for item in runs.items()) if r is not None]
    with_results = [r for r in records if r.state == RunState.SUCCEEDED and r.current_attempt is not None
                    and blobs.read(layout.manifest(r.job, r.run_id, r.current_attempt.number)) is not None]
    alive = [r.current_attempt.vm_seconds for r in with_results if r.current_attempt.vm_seconds is not None]
    problems = [f"{r.state}: {r.reason}" for r in records if r.state != RunState.SUCCEEDED]
    if len(runs) < len(specs):
        problems += [f"trigger made no run within {stall_s:.0f} s of the last new one"] * (len(specs) - len(runs))
    return {"seconds": seconds, "fired_s": fired if fired is not None else float("nan"), "runs": len(specs),
            "done": len(with_results), "alive_median": median(alive), "problems": problems}


def local_section(quick: bool = False) -> Section:
    from bench.overhead_bench import start_stack
    from spotcron.core.loader import load_jobs
    from spotcron.core.settings import Limits

    started = time.perf_counter()
    big, small, sample = (8, 2, 2) if quick else (100, 10, 3)
    section = Section("scale-local", f"Scale (c): {big} local-mode jobs fired at once on this machine",
                      baseline=f"{small} jobs at once (throughput), and one run after another on a {sample}-run "
                               f"sample, extrapolated to {big} (labelled)")
    with tempfile.TemporaryDirectory(prefix="spotcron-bench-") as tmp:
        root = Path(tmp)
        jobs = root / "jobs"
        jobs.mkdir()
        for i in range(big):
            (jobs / f"burst-{i:03d}.yaml").write_text(BURST_JOB)
        specs = load_jobs([jobs])

        def on_fresh_stack(name: str, measure: Callable):
            # A fresh bucket each: the local bucket's writes slow down as it fills up. The limits
            # are raised as a user with this load would: the default 10 live VMs would refuse most.
            stack = start_stack(root / name, root, sweep_interval=60,
                                limits=Limits(max_live_vms=big + 10, max_gpus=0, max_vm_hours_per_day=1e6))
            try:
                return measure(stack)
            finally:
                stack.stop()

        ones = on_fresh_stack("sequential", lambda stack: [burst(stack, [spec]) for spec in specs[:sample]])
        few = on_fresh_stack("few", lambda stack: burst(stack, specs[:small]))
        many = on_fresh_stack("many", lambda stack: burst(stack, specs))
    sequential = sum(o["seconds"] for o in ones) / sample * big
    sample_done = sum(o["done"] for o in ones) / sample
    section.add(f"{big} at once: seconds until every run has ended", many["seconds"], sequential, "s",
                baseline_label=f"sequential, extrapolated from {sample}")
    section.add(f"throughput, {big} at once vs {small} at once", many["runs"] / many["seconds"],
                few["runs"] / few["seconds"], "runs/s", better="higher")
    section.add(f"VM-alive seconds per run, median, {big} at once vs {small} at once", many["alive_median"],
                few["alive_median"], "s")
    section.add(f"{big} at once: runs with results in the bucket", many["done"], sample_done * big, "count",
                better="higher", baseline_label=f"sequential, extrapolated from {sample}")
    for label, result in ((f"{big} at once", many), (f"{small} at once", few)):
        if result["problems"]:
            kinds: dict[str, int] = {}
            for problem in result["problems"]:
                kinds[problem] = kinds.get(problem, 0) + 1
            section.notes.append(f"{label}: {result['done']} of {result['runs']} runs left results; the others: "
                                 + "; ".join(f"{n}x {p}" for p, n in kinds.items()))
    section.notes += [
        f"Sequential baseline: {sample} single runs took "
        + ", ".join(f"{o['seconds']:.2f} s" for o in ones) + f"; times {big}/{sample} (EXTRAPOLATED, not measured).",
        f"start_job had created every run record after {many['fired_s']:.1f} s ({big} at once) and "
        f"{few['fired_s']:.1f} s ({small} at once).",
        "Each job writes one result file; 'in the bucket' = the run is terminal and its manifest is stored. "
        "The bench polls one listing every 0.25 s.",
        "Local-mode VMs are processes sharing this machine's cores, so the VM-alive row shows contention "
        "that separate Spot VMs would not have. Each measurement starts a fresh local stack.",
    ]
    section.seconds = time.perf_counter() - started
    return section


def run(quick: bool = False) -> list[Section]:
    return [part(quick) for part in PARTS.values()]


PARTS: dict[str, Callable[[bool], Section]] = {
    "scale-sweep": sweep_section,
    "scale-deploy": deploy_section,
    "scale-local": local_section,
}
