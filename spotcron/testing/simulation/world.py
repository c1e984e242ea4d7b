"""The simulated cloud: in-memory backends with seeded faults, and the three functions' clients.

Faults are drawn from one seeded random stream in event order, so a seed replays exactly.
Transient errors hit every Compute and Storage call of the engine's own (while a function is
running), never the runner's uploads or the simulator's checks; create faults follow Compute
Engine's order of checks: a name that exists answers 409 before capacity or quota are looked at.
The functions read a clock of their own, which now and then is off for one call (`JumpyClock`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from spotcron.core.errors import CreateFailed, Transient
from spotcron.engine.ports import Instance, InstanceRequest
from spotcron.testing import harness
from spotcron.testing.memory import MemoryBlobs, MemoryCompute

STOCKOUT_REASONS = ("ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS")
# How far off a function instance's clock may be, either way. Inside the 10 s that production's
# token check allows (spotcron/gcp/id_tokens.py): a clock further off refuses every token, by design.
CLOCK_JUMP_S = 8.0


@dataclass(frozen=True)
class FaultRates:
    """Probabilities per opportunity (per delivery, per create call, per VM, per engine call)."""

    duplicate_delivery: float = 0.03  # the same message again, 1 s to 5 min later
    concurrent_delivery: float = 0.02  # the same message again, interleaved with the first delivery
    late_delivery: float = 0.005  # the only delivery arrives after the job's starting_deadline
    stale_delivery: float = 0.003  # one more copy, 1-12 h later (an ack lost, redelivered from retention)
    manual_run: float = 0.002  # per tick: someone also presses "run now"
    zone_stockouts_per_day: float = 1.0  # Spot stockout windows per zone per day (10 min to 2 h)
    region_stockouts_per_day: float = 0.2  # windows when every zone is out of Spot capacity
    quota: float = 0.003
    permission: float = 0.001
    image: float = 0.001  # rare, but every seeded month of the tests must meet it
    create_timeout_succeeded: float = 0.01  # the insert landed, the caller saw a timeout
    create_timeout_failed: float = 0.005
    slow_create: float = 0.05  # the insert takes 20-90 s of (fake) time
    storage_write: float = 0.003
    storage_read: float = 0.001
    storage_list: float = 0.001
    storage_delete: float = 0.002
    compute_get: float = 0.002  # transient errors (503, deadline) on the engine's other Compute calls
    compute_list: float = 0.002
    compute_delete: float = 0.002
    # per tick: the delivery hangs 2-60 min, inside its insert or (half of them) while it lists the
    # live VMs for its admission, before its last look at what is deployed; Pub/Sub delivers a copy
    stalled_delivery: float = 0.004
    forged_callback: float = 0.02  # per VM: someone with the job_done URL posts a forged or replayed token
    clock_jump: float = 0.02  # per function call: that instance's clock is off by up to CLOCK_JUMP_S
    preempt: float = 0.08  # per Spot VM: before the container starts, mid-run, during or after upload
    preempt_notice: float = 0.5  # the runner gets its 30 s notice and reports "preempted"
    stopped: float = 0.005  # the VM powers off mid-run (host error): it stays, STOPPED/TERMINATED
    hang: float = 0.01  # the runner hangs after the container ends: no upload, no callback
    lost_callback: float = 0.03  # every callback try is lost on the way
    duplicate_callback: float = 0.03  # the callback is delivered again (same or fresh token)
    max_run_late: float = 0.1  # Compute Engine enforces maxRunDuration up to 30 min late


@dataclass(frozen=True)
class SimConfig:
    days: float = 3.0
    jobs: int = 50
    seed: int = 7
    start: datetime = datetime(2026, 10, 20, tzinfo=UTC)  # crosses the EU, Egyptian and US fall-back
    sweep_interval: int = 300
    drain_hours: float = 12.0  # no new ticks; VMs, retries and sweeps play out
    faults: FaultRates = field(default_factory=FaultRates)
    sweeps: bool = True  # False only to show that the checks catch what the sweep is there for
    adversary: bool = True  # a rogue publisher and one hostile job (simulation/adversary.py)
    # The stack's VM-hours per UTC day: tight enough that starts queue at the daily peaks and days
    # end with admissions open across midnight (every day's accounting is checked at the end).
    vm_hours_per_day: float = 1e6
    deploy_every_h: float = 0.0  # a job paused, resumed, redeployed or put back this often (0: never)


class FaultDice:
    """The seeded random stream, plus a tally of every fault it decided to inject."""

    def __init__(self, seed: int, rates: FaultRates):
        self.rng = random.Random(seed)
        self.rates = rates
        self.injected: Counter[str] = Counter()
        self.armed = 0  # > 0 while engine code runs
        self.suspended = 0  # > 0 while the simulator itself reads

    def roll(self, name: str, rate: float | None = None) -> bool:
        hit = self.rng.random() < (getattr(self.rates, name) if rate is None else rate)
        if hit:
            self.injected[name] += 1
        return hit

    def call(self, kind: str) -> bool:
        """Whether the engine's call of this kind (storage_read, compute_get, ...) meets a transient error."""
        if self.armed <= 0 or self.suspended > 0:
            return False
        return self.roll(kind)

    @contextmanager
    def quiet(self) -> Iterator[None]:
        """The simulator's own reads: no fault, no draw, even inside a function's call."""
        self.suspended += 1
        try:
            yield
        finally:
            self.suspended -= 1

    @contextmanager
    def disarmed(self) -> Iterator[None]:
        """The world goes on while a function's call hangs: what happens meanwhile is not that call's."""
        armed, self.armed = self.armed, 0
        try:
            yield
        finally:
            self.armed = armed


class JumpyClock:
    """The functions' clock: the true time, or for one call now and then off by up to CLOCK_JUMP_S
    either way (an instance whose clock stepped). Compute Engine and Cloud Storage keep true time."""

    def __init__(self, clock):
        self.clock = clock
        self.offset = timedelta(0)

    def now(self) -> datetime:
        return self.clock.now() + self.offset

    @contextmanager
    def off_by(self, seconds: float) -> Iterator[None]:
        offset, self.offset = self.offset, timedelta(seconds=seconds)
        try:
            yield
        finally:
            self.offset = offset


class Stockouts:
    """Windows of time when a zone (or every zone) has no Spot capacity."""

    def __init__(self, dice: FaultDice, zones: list[str], start: datetime, hours: float):
        rng, rates = dice.rng, dice.rates
        self.windows: dict[str | None, list[tuple[datetime, datetime]]] = {}
        for zone, per_day in [*((z, rates.zone_stockouts_per_day) for z in zones),
                              (None, rates.region_stockouts_per_day)]:
            windows, at = [], start
            while per_day > 0:
                at += timedelta(hours=rng.expovariate(per_day / 24.0))
                if at >= start + timedelta(hours=hours):
                    break
                windows.append((at, at + timedelta(minutes=rng.uniform(10, 120))))
            self.windows[zone] = windows

    def out(self, zone: str, now: datetime) -> bool:
        return any(a <= now < b for key in (zone, None) for a, b in self.windows.get(key, ()))


class SimCompute(MemoryCompute):
    """MemoryCompute whose inserts meet stockouts, quota and permission errors, timeouts and slowness,
    and whose other calls meet transient errors."""

    def __init__(self, clock, dice: FaultDice, stockouts: Stockouts,
                 on_created: Callable[[InstanceRequest, Instance], None], before_create: Callable[[], None],
                 before_list: Callable[[], None] = lambda: None):
        super().__init__(clock)
        self.dice = dice
        self.stockouts = stockouts
        self.on_created = on_created
        self.before_create = before_create
        self.before_list = before_list
        self.create_delay_s = self._delay
        self.fault = lambda call, name: call in ("get", "list", "delete") and dice.call(f"compute_{call}")

    def _delay(self, request: InstanceRequest) -> float:
        return self.dice.rng.uniform(20, 90) if self.dice.roll("slow_create") else 0.0

    def list_managed(self) -> list[Instance]:
        self.before_list()
        return super().list_managed()

    def create_instance(self, request: InstanceRequest) -> Instance:
        self.before_create()
        if self.peek(request.zone, request.name) is not None:
            return super().create_instance(request)  # 409, before any other check
        dice, now = self.dice, self.clock.now()
        if dice.roll("create_timeout_failed"):
            raise Transient(f"deadline exceeded inserting {request.name}")
        if request.spot and self.stockouts.out(request.zone, now):
            dice.injected["stockout"] += 1
            raise CreateFailed(CreateFailed.STOCKOUT, dice.rng.choice(STOCKOUT_REASONS))
        if dice.roll("quota"):
            raise CreateFailed(CreateFailed.QUOTA, f"QUOTA_EXCEEDED: Quota 'CPUS' exceeded in {request.zone[:-2]}")
        if dice.roll("permission"):
            raise CreateFailed(CreateFailed.PERMISSION, "Required 'compute.instances.create' permission")
        if dice.roll("image"):
            raise CreateFailed(CreateFailed.IMAGE, "The resource 'cos-stable' was not found")
        instance = super().create_instance(request)
        self.on_created(request, instance)
        if dice.roll("create_timeout_succeeded"):
            raise Transient(f"deadline exceeded inserting {request.name} (it was created)")
        return instance


class SimBlobs(MemoryBlobs):
    """MemoryBlobs with seeded errors on every call during engine calls and a hook on record writes."""

    def __init__(self, bucket: str, clock, dice: FaultDice, before_record_write: Callable[[], None]):
        super().__init__(bucket, clock)
        self.fail_writes = lambda name: dice.call("storage_write")
        self.fail_reads = lambda name: dice.call("storage_read")
        self.fault = lambda call, name: call in ("list", "delete") and dice.call(f"storage_{call}")
        self.before_record_write = before_record_write

    def write(self, name: str, data: bytes, **kwargs: Any) -> int:
        if name.endswith("/run.json"):
            self.before_record_write()
        return super().write(name, data, **kwargs)


class SimEvents:
    """The events topic: every event goes straight to the simulator's ledger."""

    def __init__(self, on_event: Callable[[Mapping[str, Any]], None]):
        self.on_event = on_event
        self.count = 0

    def publish(self, topic: str, data: Mapping[str, Any], attributes: Mapping[str, str] | None = None) -> str:
        self.count += 1
        self.on_event(data)
        return str(self.count)


class Functions(harness.Functions):
    """The harness's front door to start_job, job_done and sweep, with the dice armed only while a
    function runs (the simulated VMs' own writes never fail), the function's clock off now and
    then, and every crash reported."""

    def __init__(self, clock, dice: FaultDice, *, functions_clock: JumpyClock,
                 on_error: Callable[[BaseException], None]):
        super().__init__(clock)
        self.dice = dice
        self.functions_clock = functions_clock
        self._on_error = on_error

    def open(self) -> None:
        """Hear of every crash from now on (until `close`)."""
        from flask import got_request_exception

        for target in harness.TARGETS:
            got_request_exception.connect(self._error, harness.app(target).application, weak=False)

    def _error(self, sender: Any, exception: BaseException, **_: Any) -> None:
        self._on_error(exception)

    def close(self) -> None:
        from flask import got_request_exception

        for target in harness.TARGETS:
            got_request_exception.disconnect(self._error, harness.app(target).application)

    def post(self, target: str, **kwargs: Any):
        dice = self.dice
        off = dice.rng.uniform(-CLOCK_JUMP_S, CLOCK_JUMP_S) if dice.roll("clock_jump") else 0.0
        dice.armed += 1
        try:
            with self.functions_clock.off_by(off):
                return super().post(target, **kwargs)
        finally:
            dice.armed -= 1

    def start(self, payload: bytes, published: datetime, attributes: Mapping[str, str], message_id: str) -> int:
        return super().start(payload, published, attributes, message_id).status_code

    def sweep(self) -> int:
        return super().sweep().status_code

    def credentials(self, token: str) -> tuple[int, Any]:
        response = self.post("credentials", data="{}", content_type="application/json",
                              headers={"Authorization": f"Bearer {token}"})
        return response.status_code, response.get_json(silent=True)

    def job_done(self, token: str, body: Mapping[str, Any]) -> tuple[int, Any]:
        response = super().job_done(token, body)
        return response.status_code, response.get_json(silent=True)
