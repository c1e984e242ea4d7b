"""The event loop over fake time: scheduler ticks, Pub/Sub deliveries, VM lives, sweeps, checks.

Everything reaches the engine through the three functions (functions-framework test clients on
functions/main.py), exactly as Cloud Scheduler, Pub/Sub and the VMs would call them.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.runs import scheduled_run_id
from spotcron.core.settings import Limits, Settings
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.deps import Deps
from spotcron.engine.ports import Instance, InstanceRequest
from spotcron.engine.sweep import LIST_LAG
from spotcron.runtime import entrypoints
from spotcron.testing.memory import FakeClock, MemoryMinter
from spotcron.testing.simulation.adversary import HOSTILE, Adversary, hostile_job, victim_of
from spotcron.testing.simulation.figures import Report
from spotcron.testing.simulation.jobs import SimJob, make_jobs
from spotcron.testing.simulation.ledger import Ledger
from spotcron.testing.simulation.timeline import Timeline, Watch
from spotcron.testing.simulation.vm import Checkpoints, SimVm, VmTokens, VmWorld
from spotcron.testing.simulation.world import (
    FaultDice,
    Functions,
    JumpyClock,
    SimBlobs,
    SimCompute,
    SimConfig,
    SimEvents,
    Stockouts,
)
from spotcron.testing.token_issuer import ClockedIdentity

JOB_DONE_URL = "https://us-central1-sim-project.cloudfunctions.net/job_done"
CREDENTIALS_URL = "https://us-central1-sim-project.cloudfunctions.net/credentials"
ZONES = ("us-central1-a", "us-central1-b", "us-central1-c")
MAX_DELIVERIES = 30  # then the message is dropped (a dead-letter topic would take it)
INTERLEAVE_POINTS = (("create", 1), ("record", 1), ("record", 2), ("record", 3))
FORGERIES = ("other-vm", "instance-id", "zone", "account", "replay")


@dataclass
class Message:
    job: SimJob
    payload: bytes
    published: datetime
    attributes: dict[str, str]
    message_id: str
    failures: int = 0
    interleave: tuple[str, int] | None = None  # deliver a copy inside the first delivery, at this point
    stall_s: float | None = None  # the first delivery's insert hangs this long
    stall_at: str = "create"  # ... inside its insert, or while it lists the live VMs ("list")


@dataclass
class _Cut:
    """Something to do inside a function's call, at the `countdown`th call at `point`."""

    point: str
    countdown: int
    action: Callable[[], None]
    or_after: bool  # when the call never got there: do it right after the call instead


class Simulation:
    """Builds the world and wires its parts to each other: each part gets only what it uses."""

    def __init__(self, config: SimConfig, progress: Callable[[str], None] | None = None):
        self.config = config
        self.progress = progress
        self.dice = FaultDice(config.seed, config.faults)
        self.clock = FakeClock(config.start)
        self.timeline = Timeline(self.clock)
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
                                 limits=Limits(max_live_vms=10_000, max_gpus=10_000,
                                               max_vm_hours_per_day=config.vm_hours_per_day))
        self.end_of_ticks = config.start + timedelta(days=config.days)
        self.end = self.end_of_ticks + timedelta(hours=config.drain_hours)
        zones = sorted({zone for job in self.jobs for spec in job.spec.variants()
                        for zone in (spec.machine.zones or self.settings.zones)})
        self.stockouts = Stockouts(self.dice, zones, config.start, (self.end - config.start).total_seconds() / 3600)
        self.functions_clock = JumpyClock(self.clock)
        self.compute = SimCompute(self.clock, self.dice, self.stockouts, self._vm_created,
                                  lambda: self._interleave("create"), lambda: self._interleave("list"))
        self.blobs = SimBlobs("sim-results", self.clock, self.dice, lambda: self._interleave("record"))
        self.ledger = Ledger(self.blobs, self.dice.quiet)
        self.watch = Watch(self.timeline, self.ledger.problem)
        self.events = SimEvents(self.ledger.on_event)
        # 1024-bit: signing is most of a callback's cost, and a month has tens of thousands
        self.identity = ClockedIdentity(self.functions_clock, key_size=1024)
        self.minter = MemoryMinter()
        self.deps = Deps(settings=self.settings, compute=self.compute, blobs=self.blobs, events=self.events,
                         identity=self.identity, clock=self.functions_clock, user_data=lambda: "#cloud-config\n",
                         minter=self.minter)
        self.functions = Functions(self.clock, self.dice, functions_clock=self.functions_clock,
                                   on_error=self.ledger.function_error)
        self.tokens = VmTokens(self.identity, self.settings)
        self.checkpoints = Checkpoints(self.blobs, self.ledger.problem)
        self.vms: dict[str, SimVm] = {}
        self._by_attempt: dict[tuple[str, str, int], list[SimVm]] = {}
        self.adversary = Adversary(self.timeline, self.functions, compute=self.compute, blobs=self.blobs,
                                   minter=self.minter, tokens=self.tokens, victim=victim_of(self.jobs),
                                   running_vms=self.vms.values) if config.adversary else None
        self.vm_world = VmWorld(timeline=self.timeline, compute=self.compute, blobs=self.blobs, dice=self.dice,
                                functions=self.functions, tokens=self.tokens, books=self.ledger,
                                checkpoints=self.checkpoints, watch=self.watch,
                                sweep_interval=self.settings.sweep_interval, on_boot=self._on_boot)
        self._messages = itertools.count(1)
        self._armed: _Cut | None = None
        self._stalled = False  # one hanging call at a time: the world runs inside it
        self._after_stall = False  # the insert now landing hung while deploys may have changed its job
        self.deployed = {job.spec.name: job.spec for job in self.jobs}  # what deploy left, per job

    # --- the loop -----------------------------------------------------------------------------
    def schedule(self, at: datetime, step: Callable[[], None]) -> None:
        self.timeline.at(at, step)

    def run(self) -> Report:
        started = time.perf_counter()
        entrypoints.use(self.deps)
        previous_disable = logging.root.manager.disable
        logging.disable(logging.CRITICAL)  # the functions log every call; the report says what matters
        try:
            self.functions.open()
            self._start()
            self.timeline.run_until(self.end)
            states = self.ledger.close(self.compute.created)
            self._check_day_hours()
        finally:
            self.functions.close()
            logging.disable(previous_disable)
            entrypoints.use(None)
        return Report.build(self.config, jobs=len(self.jobs), ledger=self.ledger, states=states,
                            faults=self.dice.injected, checkpoints_restored=self.checkpoints.restored,
                            wall_s=time.perf_counter() - started, adversary=self.adversary)

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
            self.adversary.schedule(start, self.end_of_ticks)
        at = start + timedelta(hours=self.config.deploy_every_h)
        while self.config.deploy_every_h and at < self.end_of_ticks:
            self.schedule(at, self._deploy_change)
            at += timedelta(hours=self.config.deploy_every_h)
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
        spec, dice, rng = self.deployed[job.spec.name], self.dice, self.dice.rng
        if spec.paused and not job.spec.paused:
            return  # paused by `spotcron pause`: its scheduler entry does not fire
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
            elif dice.roll("stalled_delivery"):
                message.stall_at = rng.choice(("create", "list"))
                # A hung insert outlasts the ack deadline; a slow listing (a cold start) does not.
                message.stall_s = rng.uniform(120, 3600) if message.stall_at == "create" else rng.uniform(5, 60)
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
        # The digest deployed when it is published: a deploy may overtake the message before it is handled.
        return Message(job, start_message(self.deployed[job.spec.name]), published, attributes,
                       f"m{next(self._messages)}")

    # --- deploys between ticks ------------------------------------------------------------------
    def _deploy_change(self, only: SimJob | None = None) -> None:
        """`spotcron pause`/`resume`, or a job edited (another image) and deployed, or put back;
        to `only` when given (a deploy that lands while one of its starts hangs)."""
        rng = self.dice.rng
        candidates = [job for job in self.jobs if job.spec.name != HOSTILE and not job.spec.paused]
        if only is not None and only in candidates:
            candidates = [only]
        job = rng.choice(candidates)
        name, now = job.spec.name, self.clock.now()
        current = self.deployed[name]
        if current.paused:
            change, spec = "resume", current.model_copy(update={"paused": False})
            start, _ = self.ledger.paused[name][-1]
            self.ledger.paused[name][-1] = (start, now)
        elif rng.random() < 0.4:
            change, spec = "pause", current.model_copy(update={"paused": True})
            self.ledger.paused.setdefault(name, []).append((now, None))
        elif current.image == job.spec.image:
            change, spec = "redeploy", current.model_copy(update={"image": job.spec.image.replace(":", "-v2:", 1)
                                                                  if ":" in job.spec.image else job.spec.image + "-v2"})
        else:
            change, spec = "restore", current.model_copy(update={"image": job.spec.image})
        with self.dice.quiet():
            SpecStore(self.deps.blobs).write(spec)
        self.deployed[name] = spec
        self.ledger.counts[f"deploys: {change}"] += 1

    def _check_day_hours(self) -> None:
        from spotcron.core import layout

        with self.dice.quiet():
            days = sorted({name[len(layout.LIMITS):].split("/", 1)[0] for name in self.blobs.list(layout.LIMITS)})
            records = [r for job in self.ledger.store.jobs() for r in self.ledger.store.records(job)]
        attempts = [(a.vm_name, r.updated_at if r.terminal and not r.owed else None, a.vm_seconds)
                    for r in records for a in r.attempts if a.created_at is not None]
        self.ledger.check_day_hours(self.settings.limits.max_vm_hours_per_day, attempts, days)

    def _deliver_at(self, at: datetime, message: Message) -> None:
        self.schedule(at, lambda: self._deliver(message))

    def _deliver(self, message: Message) -> None:
        if message.interleave is not None:
            point, countdown = message.interleave
            message.interleave = None
            self._armed = _Cut(point, countdown, lambda: self._deliver(message), or_after=True)
            self.ledger.counts["interleaved deliveries"] += 1
        elif message.stall_s is not None and not self._stalled:
            seconds, message.stall_s = message.stall_s, None
            inside_insert = message.stall_at == "create"
            self._armed = _Cut(message.stall_at, 1, lambda: self._stall(message, seconds, inside_insert=inside_insert),
                               or_after=False)
        status = self.functions.start(message.payload, message.published, message.attributes, message.message_id)
        self.ledger.counts["deliveries"] += 1
        if self._armed is not None:  # the copy found no point to cut in: it arrives right after
            cut, self._armed = self._armed, None
            if cut.or_after:
                cut.action()
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
        if armed is None or armed.point != point:
            return
        armed.countdown -= 1
        if armed.countdown <= 0:
            self._armed = None
            armed.action()

    def _stall(self, message: Message, seconds: float, *, inside_insert: bool = True) -> None:
        """The delivery hangs while the world goes on: VMs run and call back, sweeps run, deploys
        land, and Pub/Sub, past its ack deadline, delivers the message again. Then it goes on.

        Inside its insert call, nothing can stop the VM from landing (the engine deletes it once it
        hears back); hung before its insert (listing the live VMs for its admission), it must take
        a last look at what is deployed, so that VM is checked like any other."""
        self.ledger.counts["stalled inserts" if inside_insert else "stalled admissions"] += 1
        now = self.clock.now()
        if inside_insert:
            self._deliver_at(now + timedelta(seconds=self.dice.rng.uniform(10, 600)), message)
        elif self.config.deploy_every_h and self.dice.rng.random() < 0.5:
            # Within the ack deadline, no copy comes; as often as not, its own job is deployed meanwhile.
            self.schedule(now + timedelta(seconds=self.dice.rng.uniform(1, seconds)),
                          lambda: self._deploy_change(message.job))
        self._stalled = True
        try:
            with self.dice.disarmed(), self.functions_clock.off_by(0):
                self.timeline.run_until(min(now + timedelta(seconds=seconds), self.end))
        finally:
            self._stalled = False
            self._after_stall = inside_insert

    def _sweep(self) -> None:
        self.ledger.counts["sweeps"] += 1
        if self.functions.sweep() >= 500:
            self.ledger.counts["sweeps failed"] += 1

    # --- Compute Engine's side ----------------------------------------------------------------
    def _vm_created(self, request: InstanceRequest, instance: Instance) -> None:
        stalled, self._after_stall = self._after_stall, False
        if not stalled:  # an insert that hung an hour may land after a deploy: the engine deletes it
            self._check_still_deployed(request)
        vm = SimVm(self.vm_world, request, instance, self.by_name[request.labels["job"]])
        self.vms[instance.instance_id] = vm
        same = self._by_attempt.setdefault(vm.key, [])
        self.ledger.vm_created(vm.key, alive=1 + sum(other.alive() for other in same), before=len(same))
        if same:
            # Made again after the attempt's first VM was gone: the engine deletes it at once, or when
            # that delete failed, the first sweep that may call it stray does (past the list lag).
            allowed = LIST_LAG.total_seconds() + self.settings.sweep_interval
            self.watch.gone_by(instance.created_at, allowed, instance.name, instance.zone, vm.alive, "duplicate_vms")
        same.append(vm)
        lag = 0.0
        if self.dice.roll("max_run_late"):
            lag = self.dice.rng.uniform(60, 1800)
            self.compute.delay_max_run_duration(instance.zone, instance.name, lag)
        self.schedule(vm.deadline + timedelta(seconds=lag + 0.5), self._enforce_max_run_duration)
        if self.dice.roll("forged_callback"):
            how = self.dice.rng.choice(FORGERIES)
            self.dice.injected[f"forged:{how}"] += 1
            self.schedule(instance.created_at + timedelta(seconds=self.dice.rng.uniform(30, 900)),
                          lambda: vm.forged_callback(how))
        self.watch.gone_by(vm.deadline, self.settings.sweep_interval, instance.name, instance.zone, vm.alive,
                           "leaked_vms")
        vm.begin()

    def _check_still_deployed(self, request: InstanceRequest) -> None:
        """A VM is created only for a run whose job is deployed as the run recorded it."""
        from spotcron.engine.still_deployed import deployed_problem

        with self.dice.quiet():
            record = self.deps.store.read(request.labels["job"], request.labels["run"])
            problem = deployed_problem(self.deps, record) if record is not None else None
        if problem is not None:
            self.ledger.problem("vm_for_undeployed_spec", f"{request.name}: {problem}")

    def _on_boot(self, vm: SimVm) -> None:
        if self.adversary is not None and vm.job.spec.name == HOSTILE:
            self.adversary.attack_from(vm)

    def _enforce_max_run_duration(self) -> None:
        self.ledger.counts["vms deleted by maxRunDuration"] += len(self.compute.enforce_max_run_duration())


def simulate(config: SimConfig, progress: Callable[[str], None] | None = None) -> Report:
    """Run one seeded simulation and return its figures."""
    return Simulation(config, progress).run()
