"""The event loop over fake time: scheduler ticks, Pub/Sub deliveries, VM lives, sweeps, checks.

Everything reaches the engine through the three functions (functions-framework test clients on
functions/main.py), exactly as Cloud Scheduler, Pub/Sub and the VMs would call them.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.runs import scheduled_run_id
from spotcron.core.settings import Limits, Settings
from spotcron.engine.deployed import SpecStore
from spotcron.engine.deps import Deps
from spotcron.engine.messages import encode_start
from spotcron.engine.ports import Instance, InstanceRequest
from spotcron.runtime import entrypoints
from spotcron.testing.identity import ClockedIdentity
from spotcron.testing.memory import FakeClock, MemoryMinter
from spotcron.testing.simulation.adversary import Adversary, hostile_job
from spotcron.testing.simulation.jobs import SimJob, make_jobs
from spotcron.testing.simulation.ledger import Ledger
from spotcron.testing.simulation.report import Report
from spotcron.testing.simulation.vm import Checkpoints, SimVm
from spotcron.testing.simulation.world import (
    FaultDice,
    Functions,
    SimBlobs,
    SimCompute,
    SimConfig,
    SimEvents,
    Stockouts,
)

JOB_DONE_URL = "https://us-central1-sim-project.cloudfunctions.net/job_done"
CREDENTIALS_URL = "https://us-central1-sim-project.cloudfunctions.net/credentials"
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
MAX_DELIVERIES = 30  # then the message is dropped (a dead-letter topic would take it)
INTERLEAVE_POINTS = (("create", 1), ("record", 1), ("record", 2), ("record", 3))


@dataclass
class Message:
    job: SimJob
    payload: bytes
    published: datetime
    attributes: dict[str, str]
    message_id: str
    failures: int = 0
    interleave: tuple[str, int] | None = None  # deliver a copy inside the first delivery, at this point


@dataclass(order=True)
class _Event:
    at: float
    seq: int
    step: Callable[[], None] = field(compare=False)
    when: datetime = field(compare=False)


class Simulation:
    def __init__(self, config: SimConfig, progress: Callable[[str], None] | None = None):
        self.config = config
        self.progress = progress
        self.dice = FaultDice(config.seed, config.faults)
        self.clock = FakeClock(config.start)
        if config.adversary:  # one of the jobs is the hostile one
            self.jobs = make_jobs(random.Random(config.seed), config.jobs - 1) + [hostile_job()]
        else:
            self.jobs = make_jobs(random.Random(config.seed), config.jobs)
        self.by_name = {job.spec.name: job for job in self.jobs}
        # Limits sized for the simulated jobs: the month is about faults, and the guards have their
        # own tests (tests/security); the adversary's rogue messages must not get near them anyway.
        self.settings = Settings(project="sim-project", zones=ZONES, bucket="sim-results",
                                 job_done_url=JOB_DONE_URL, credentials_url=CREDENTIALS_URL,
                                 sweep_interval=config.sweep_interval,
                                 limits=Limits(max_live_vms=10_000, max_gpus=10_000, max_vm_hours_per_day=1e6))
        self.end_of_ticks = config.start + timedelta(days=config.days)
        self.end = self.end_of_ticks + timedelta(hours=config.drain_hours)
        zones = sorted({zone for job in self.jobs for spec in job.spec.variants()
                        for zone in (spec.machine.zones or self.settings.zones)})
        self.stockouts = Stockouts(self.dice, zones, config.start, (self.end - config.start).total_seconds() / 3600)
        self.compute = SimCompute(self.clock, self.dice, self.stockouts, self._vm_created,
                                  lambda: self._interleave("create"))
        self.blobs = SimBlobs("sim-results", self.clock, self.dice, lambda: self._interleave("record"))
        self.ledger = Ledger(self)
        self.events = SimEvents(self.ledger.on_event)
        # 1024-bit: signing is most of a callback's cost, and a month has tens of thousands
        self.identity = ClockedIdentity(self.clock, key_size=1024)
        self.minter = MemoryMinter()
        self.deps = Deps(settings=self.settings, compute=self.compute, blobs=self.blobs, events=self.events,
                         identity=self.identity, clock=self.clock, user_data=lambda: "#cloud-config\n",
                         minter=self.minter)
        self.adversary = Adversary(self) if config.adversary else None
        self.checkpoints = Checkpoints(self)
        self.functions: Functions | None = None
        self.vms: dict[str, SimVm] = {}
        self._queue: list[_Event] = []
        self._seq = itertools.count()
        self._messages = itertools.count(1)
        self._armed: list | None = None  # [point, countdown, action]

    # --- the loop -----------------------------------------------------------------------------
    def schedule(self, at: datetime, step: Callable[[], None]) -> None:
        heapq.heappush(self._queue, _Event(at.timestamp(), next(self._seq), step, at))

    def run(self) -> Report:
        started = time.perf_counter()
        entrypoints.use(self.deps)
        previous_disable = logging.root.manager.disable
        logging.disable(logging.CRITICAL)  # the functions log every call; the report says what matters
        try:
            self.functions = Functions(self.clock, self.dice, on_error=self.ledger.function_error)
            self._start()
            while self._queue and self._queue[0].at <= self.end.timestamp():
                event = heapq.heappop(self._queue)
                if event.when > self.clock.now():
                    self.clock.set(event.when)
                event.step()
            self.clock.set(max(self.clock.now(), self.end))
            states = self.ledger.close()
        finally:
            if self.functions is not None:
                self.functions.close()
            logging.disable(previous_disable)
            entrypoints.use(None)
        return Report.build(self, states, time.perf_counter() - started)

    def _start(self) -> None:
        start = self.config.start
        deployed = SpecStore(self.deps.blobs)
        for job in self.jobs:
            deployed.write(job.spec)  # what deploy does before any scheduler entry fires
        for job in self.jobs:
            cron, tz = parse_schedule(job.spec.schedule), load_time_zone(job.spec.time_zone)
            first = cron.next_after(start - timedelta(seconds=1), tz)
            self.schedule(first, lambda job=job, cron=cron, tz=tz, tick=first: self._fire(job, cron, tz, tick))
        at = start
        while self.config.sweeps and at <= self.end:
            self.schedule(at, self._sweep)
            at += timedelta(seconds=self.settings.sweep_interval)
        if self.adversary is not None:
            self.adversary.schedule()
        for day in range(1, int(self.config.days) + 1):
            self.schedule(start + timedelta(days=day), lambda day=day: self._report_day(day))

    def _report_day(self, day: int) -> None:
        if self.progress:
            alive = len(self.compute.all_instances())
            self.progress(f"day {day}/{self.config.days:g}: runs={len(self.ledger.seen)} "
                          f"ended={len(self.ledger.finished)} vms_alive={alive} "
                          f"faults={sum(self.dice.injected.values())}")

    # --- Cloud Scheduler and Pub/Sub ---------------------------------------------------------------
    def _fire(self, job: SimJob, cron, tz, tick: datetime) -> None:
        if tick >= self.end_of_ticks:
            return
        following = cron.next_after(tick, tz)
        self.schedule(following, lambda: self._fire(job, cron, tz, following))
        spec, dice, rng = job.spec, self.dice, self.dice.rng
        self.ledger.counts["ticks"] += 1
        if not spec.paused:
            for variant in spec.variants():
                self.ledger.expect(spec.name, scheduled_run_id(tick, variant.run_suffix))
        message = self._message(job, tick + timedelta(seconds=rng.uniform(0.05, 1.5)), {})
        if dice.roll("late_delivery"):
            self._deliver_at(tick + timedelta(seconds=spec.starting_deadline + rng.uniform(5, 900)), message)
        else:
            first = message.published + timedelta(seconds=rng.uniform(0.05, 2))
            if dice.roll("concurrent_delivery"):
                message.interleave = rng.choice(INTERLEAVE_POINTS)
            self._deliver_at(first, message)
            if dice.roll("duplicate_delivery"):
                self._deliver_at(first + timedelta(seconds=rng.uniform(1, 300)), message)
        if dice.roll("stale_delivery"):
            self._deliver_at(tick + timedelta(hours=rng.uniform(1, 12)), message)
        if dice.roll("manual_run"):
            nonce = f"{rng.getrandbits(16):04x}"
            self.ledger.expect_manual(spec.name, nonce, len(spec.variants()))
            at = tick + timedelta(seconds=rng.uniform(60, 1800))
            manual = self._message(job, at, {"trigger": "manual", "nonce": nonce})
            self._deliver_at(at + timedelta(seconds=rng.uniform(0.05, 2)), manual)
            if dice.roll("duplicate_delivery"):
                self._deliver_at(at + timedelta(seconds=rng.uniform(1, 300)), manual)

    def _message(self, job: SimJob, published: datetime, attributes: dict[str, str]) -> Message:
        return Message(job, encode_start(job.spec), published, attributes, f"m{next(self._messages)}")

    def _deliver_at(self, at: datetime, message: Message) -> None:
        self.schedule(at, lambda: self._deliver(message))

    def _deliver(self, message: Message) -> None:
        assert self.functions is not None
        if message.interleave is not None:
            point, countdown = message.interleave
            message.interleave = None
            self._armed = [point, countdown, lambda: self._deliver(message)]
            self.ledger.counts["interleaved deliveries"] += 1
        status = self.functions.start(message.payload, message.published, message.attributes, message.message_id)
        self.ledger.counts["deliveries"] += 1
        if self._armed is not None:  # the copy found no point to cut in: it arrives right after
            action, self._armed = self._armed[2], None
            action()
        if status >= 500:
            message.failures += 1
            self.ledger.counts["redeliveries"] += 1
            if message.failures >= MAX_DELIVERIES:
                self.ledger.problem("dropped_messages", f"{message.job.spec.name}: {message.message_id}")
                return
            backoff = min(600.0, 10.0 * 2 ** (message.failures - 1)) * self.dice.rng.uniform(0.8, 1.2)
            self._deliver_at(self.clock.now() + timedelta(seconds=backoff), message)

    def _interleave(self, point: str) -> None:
        armed = self._armed
        if armed is None or armed[0] != point:
            return
        armed[1] -= 1
        if armed[1] <= 0:
            self._armed = None
            armed[2]()

    def _sweep(self) -> None:
        assert self.functions is not None
        self.ledger.counts["sweeps"] += 1
        if self.functions.sweep() >= 500:
            self.ledger.counts["sweeps failed"] += 1

    # --- Compute Engine's side ----------------------------------------------------------------
    def _vm_created(self, request: InstanceRequest, instance: Instance) -> None:
        vm = SimVm(self, request, instance, self.by_name[request.labels["job"]])
        self.vms[instance.instance_id] = vm
        lag = 0.0
        if self.dice.roll("max_run_late"):
            lag = self.dice.rng.uniform(60, 1800)
            self.compute.delay_max_run_duration(instance.zone, instance.name, lag)
        self.schedule(vm.deadline + timedelta(seconds=lag + 0.5), self._enforce_max_run_duration)
        self.schedule_check(vm.deadline, self.settings.sweep_interval, vm, "leaked_vms")
        vm.begin()

    def _enforce_max_run_duration(self) -> None:
        self.ledger.counts["vms deleted by maxRunDuration"] += len(self.compute.enforce_max_run_duration())

    def schedule_check(self, since: datetime | None, allowed_s: float, vm: SimVm, problem: str) -> None:
        """Flag `problem` if `vm` still exists `allowed_s` after `since` (checked at that very moment)."""
        if since is None:
            return

        def check() -> None:
            if vm.alive():
                self.ledger.problem(problem, f"{vm.instance.name} ({vm.instance.zone}) still exists "
                                             f"{allowed_s:.0f}s after {since:%Y-%m-%d %H:%M:%S}")

        self.schedule(since + timedelta(seconds=allowed_s + 0.001), check)


def simulate(config: SimConfig, progress: Callable[[str], None] | None = None) -> Report:
    """Run one seeded simulation and return its figures."""
    return Simulation(config, progress).run()
