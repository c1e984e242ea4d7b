"""Hypothesis explores the interleavings: a RuleBasedStateMachine over the real functions.

Rules are what the world does to spotcron: scheduled ticks and their redeliveries (at once, late,
or stalled right before the insert while the run goes on), manual runs with and without nonces,
preemption at any point (with or without the runner's notice), callbacks that arrive, get lost,
come twice, come late or are forged, transient errors on any Compute, Storage or Pub/Sub call, a
handler killed right after any call it makes (a BaseException: a timeout, an OOM kill, a recycled
instance), sweeps at any moment, clock jumps (to just before UTC midnight too, with starts in
flight), a Compute Engine that enforces maxRunDuration late, stockouts in any zone with capacity
advice that calls zones unlikely, and deploys between any two steps or inside a handler, before
any of its calls up to its insert (a job paused, resumed, removed, or deployed again with another
image, while a start lists the live VMs, writes its admission or places its run). The stack allows two live VMs and a few VM-hours
a day, so runs queue for room. After every step the invariants of RELIABILITY.md are checked,
among them: no VM is ever created for a run whose job is not deployed as the run recorded it;
each UTC day's accounting holds its limit and counts a VM's hours once, settled on every day;
a run that failed for capacity tried every allowed zone; an attempt's insert never lands twice. Everything goes through the harness's
functions-framework clients on the in-memory backends.

`make test` runs a bounded number of examples; `make explore` runs many more with a printed seed
(Hypothesis shrinks any failure to a minimal list of steps and prints it).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from spotcron.core import layout
from spotcron.core.cron.schedule import load_time_zone, parse_schedule
from spotcron.core.descriptor import METADATA_KEY, RunDescriptor
from spotcron.core.errors import CreateFailed
from spotcron.core.runs import RunRecord, RunState
from spotcron.core.settings import Limits
from spotcron.core.zone_advice import Advice, ZoneAdvice
from spotcron.engine.day_hours import days_between, read_day
from spotcron.engine.deployed import SpecStore, start_message
from spotcron.engine.ports import ALIVE_STATUSES
from spotcron.engine.still_deployed import deployed_problem
from spotcron.engine.sweep import LIST_LAG
from spotcron.engine.writer import finished_event_id
from spotcron.testing.harness import Harness, make_spec

EXAMPLES = int(os.environ.get("SPOTCRON_EXPLORE_EXAMPLES", "12"))
STEPS = int(os.environ.get("SPOTCRON_EXPLORE_STEPS", "30"))
# In the suite the short sample is the same on every run, so the gate says the same of the same
# code; `make explore` (which sets the examples) draws new cases and prints its seed.
IN_SUITE = "SPOTCRON_EXPLORE_EXAMPLES" not in os.environ

JOBS = {
    "bot": make_spec(name="bot", schedule="*/30 * * * *", timeout="10m", concurrency="forbid",
                     retries={"preemption": 2, "failure": 1}, starting_deadline="10m"),
    "bench": make_spec(name="bench", schedule="15 */2 * * *", timeout="20m", concurrency="allow",
                       matrix=[{"name": "cpu"}, {"name": "big", "machine": {"type": "e2-standard-4"}}],
                       history_limit=6),
    "swap": make_spec(name="swap", schedule="45 * * * *", timeout="15m", concurrency="replace",
                      retries={"preemption": 1}, starting_deadline="20m"),
}
# What a redeploy changes: another image, so the deployed spec's digest changes too.
REDEPLOYED = {name: spec.model_copy(update={"image": "us-docker.pkg.dev/p/r/other:2"}) for name, spec in JOBS.items()}
MAX_VM_HOURS = 3.0  # a few runs a day: starts queue for hours too, and days end with reservations open
PLACEMENT = {"regions": ["us-west4"], "zones": {"us-west4": ["us-west4-a", "us-west4-b"]},
             "image_gb": 0.0, "results_gb": 0.0}
CALLS = ("compute:create", "compute:get", "compute:delete", "compute:list",
         "storage:read", "storage:write", "storage:list", "storage:delete", "events:publish")
# Where a deploy may land inside a handler: any call before the insert's last look. (Inside the
# insert call itself nothing can stop the VM: start_job's last read is the deployed spec's.)
DEPLOY_POINTS = ("compute:list", "compute:get", "storage:read", "storage:write", "storage:list")
MAX_LIVE_VMS = 2  # three runs can be due at once (bot and bench's two entries): some queue


class Crash(BaseException):
    """The handler's instance dies: nothing after this point of the handler runs."""


class NoAnswer:
    """What a caller sees of a handler that died: no answer (Pub/Sub and the runner try again)."""

    status_code = 599
    json: dict = {}


class Explore(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.h = Harness(limits=Limits(max_live_vms=MAX_LIVE_VMS, max_vm_hours_per_day=MAX_VM_HOURS),
                         placement=PLACEMENT)
        self.deployed = dict(JOBS)  # job → the spec deployed now (None: removed)
        for spec in JOBS.values():
            SpecStore(self.h.blobs).write(spec)  # what deploy leaves for start_job
        self.inserts: list[tuple[str, str, bool, datetime]] = []  # (VM, zone, spot, when) of every insert that landed
        self.insert_problems: list[str] = []  # what the insert check found (_check_inserts)
        self._check_inserts()
        self.interval = timedelta(seconds=self.h.settings.sweep_interval)
        self.next_sweep = self.h.clock.now() + self.interval
        self.messages: list[dict] = []  # every start message published: redeliverable at any time
        self.callbacks: list[dict] = []  # every callback a runner sent or will retry
        self.callbacks_due: list[dict] = []  # answered 503: the runner tries again
        self.armed: tuple[str, int] | None = None  # one transient error on the nth matching call
        self.crash: tuple[str, int] | None = None  # die at the first call after the nth matching one
        # A deploy that lands inside the next handler, right before its nth matching call: (call, nth, job, change).
        self.deploy_inside: tuple[str, int, str, str] | None = None
        self.first_terminal: dict[tuple[str, str], RunState] = {}
        self.swept_clean = False  # the last thing that happened was a sweep without injected errors
        self.swept_at = self.h.clock.now()  # when that sweep ran (time may have passed since, within the step)
        self.faulted = False

    def teardown(self):
        self.h.close()

    # --- fault injection --------------------------------------------------------------------------
    def _faults(self, on: bool) -> None:
        armed = self.armed if on else None
        crash = self.crash if on else None
        deploy = self.deploy_inside if on else None
        seen = {"n": 0, "crash": 0, "dying": False, "deploy": 0, "deploying": False}

        def fault(kind: str):
            def check(call: str, name: str) -> bool:
                if seen["deploying"]:
                    return False  # the deploy's own writes meet no fault
                if deploy is not None and self.deploy_inside is not None and deploy[0] == f"{kind}:{call}":
                    seen["deploy"] += 1
                    if seen["deploy"] == deploy[1]:
                        seen["deploying"] = True
                        try:
                            self._deploy_lands()
                        finally:
                            seen["deploying"] = False
                if seen["dying"]:
                    seen["dying"] = False
                    raise Crash(f"killed before {kind}:{call} {name}")
                if crash is not None and crash[0] == f"{kind}:{call}":
                    seen["crash"] += 1
                    seen["dying"] = seen["crash"] == crash[1]  # this call goes through; the next one dies
                if armed is None or armed[0] != f"{kind}:{call}":
                    return False
                seen["n"] += 1
                return seen["n"] == armed[1]
            return check

        on_any = armed is not None or crash is not None or deploy is not None
        self.h.compute.fault = fault("compute") if on_any else None
        self.h.blobs.fault = fault("storage") if on_any else None
        self.h.events.fault = fault("events") if on_any else None

    def _call(self, what):
        """One entry-point call, with the armed fault (if any) live during it and gone after."""
        self._faults(True)
        self.faulted = self.armed is not None or self.crash is not None
        try:
            return what()
        except Crash:
            return NoAnswer()
        finally:
            self._faults(False)
            self.armed = None
            self.crash = None
            self._deploy_lands()  # a handler that never made the call: the deploy lands right after it

    # --- time -----------------------------------------------------------------------------------
    def _advance(self, seconds: float) -> None:
        """Time passes: Compute enforces maxRunDuration by itself; the sweep runs on its schedule."""
        end = self.h.clock.now() + timedelta(seconds=seconds)
        while self.next_sweep <= end:
            self.h.clock.set(self.next_sweep)
            self.h.compute.enforce_max_run_duration()
            self._redeliver_unacked()
            self._sweep_now()
            self.next_sweep += self.interval
        self.h.clock.set(end)
        if self.h.compute.enforce_max_run_duration():
            self.swept_clean = False  # a VM went after the last sweep: the next one sees to its run

    def _redeliver_unacked(self) -> None:
        """What Pub/Sub and the runner do by themselves: a message answered 5xx is delivered again
        (within minutes), and a runner retries a callback answered 503."""
        for message in [m for m in self.messages if not m["acked"]]:
            message["acked"] = self._deliver(message).status_code < 500
        pending, self.callbacks_due = self.callbacks_due, []
        for callback in pending:
            body = callback["body"]
            status = self.h.callback(body["job"], body["run_id"], body["attempt"], token=callback["token"],
                                     body=body).status_code
            if status == 503:
                self.callbacks_due.append(callback)

    def _sweep_now(self) -> None:
        assert self.h.sweep().status_code == 200
        self.swept_clean = True
        self.swept_at = self.h.clock.now()

    @rule(seconds=st.sampled_from([5, 40, 130, 290, 610, 1800, 4 * 3600]))
    def clock_moves(self, seconds):
        self._advance(seconds)

    @rule()
    def sweep_at_any_moment(self):
        response = self._call(self.h.sweep)
        assert response.status_code in (200, 500, NoAnswer.status_code)
        self.swept_clean = response.status_code == 200 and not self.faulted
        self.swept_at = self.h.clock.now()

    @rule(call=st.sampled_from(CALLS), nth=st.integers(1, 3))
    def arm_a_transient_error(self, call, nth):
        self.armed = (call, nth)

    @rule(call=st.sampled_from(CALLS), nth=st.integers(1, 4))
    def arm_a_crash_after_a_call(self, call, nth):
        """The next handler dies right after its nth call of this kind (a write above all)."""
        self.crash = (call, nth)

    # --- triggers -------------------------------------------------------------------------------
    def _publish(self, job: str, attributes: dict[str, str]) -> dict:
        # The digest the publisher names is the one deployed when it publishes (a scheduler entry,
        # the dispatcher, `spotcron run --cloud`); a deploy may overtake it before it is handled.
        spec = self.deployed[job] or JOBS[job]
        message = {"job": job, "published": self.h.clock.now(), "attributes": attributes,
                   "id": f"msg-{len(self.messages)}", "acked": False, "spec": spec}
        self.messages.append(message)
        return message

    def _deliver(self, message: dict):
        raw = start_message(message["spec"])
        response = self._call(lambda: self.h.functions.start(raw, message["published"], dict(message["attributes"]),
                                                             message["id"]))
        message["acked"] = message["acked"] or response.status_code < 500
        return response

    @rule(job=st.sampled_from(sorted(JOBS)))
    def scheduled_tick(self, job):
        spec = JOBS[job]
        tick = parse_schedule(spec.schedule).next_after(self.h.clock.now(), load_time_zone(spec.time_zone))
        self._advance((tick - self.h.clock.now()).total_seconds() + 1)
        if self.deployed[job] is None or self.deployed[job].paused:
            return  # its scheduler entry is deleted or paused: nothing is published
        response = self._deliver(self._publish(job, {}))
        assert response.status_code in (200, 500, NoAnswer.status_code)

    @rule(job=st.sampled_from(sorted(JOBS)), nonce=st.sampled_from([None, "ab12", "c0ffee"]))
    def manual_run(self, job, nonce):
        attributes = {"trigger": "manual"} | ({"nonce": nonce} if nonce else {})
        assert self._deliver(self._publish(job, attributes)).status_code in (200, 500, NoAnswer.status_code)

    @precondition(lambda self: self.messages)
    @rule(data=st.data())
    def redelivery(self, data):
        """Pub/Sub delivers any message again: at once, or late (the clock has moved since)."""
        message = data.draw(st.sampled_from(self.messages))
        assert self._deliver(message).status_code in (200, 500, NoAnswer.status_code)

    @precondition(lambda self: self.messages)
    @rule(data=st.data(), cut_in=st.sampled_from(["callback", "sweep", "preempt"]))
    def stalled_redelivery(self, data, cut_in):
        """A copy stalls right before its insert; meanwhile the run goes on."""
        message = data.draw(st.sampled_from(self.messages))
        done: list[bool] = []

        def fault(call: str, name: str) -> bool:
            if call == "create" and not done:
                done.append(True)
                vm = self.h.compute.peek_any(name)
                if cut_in == "callback" and vm is not None:
                    self._vm_reports(vm, exit_code=0, manifest=True, status="exited", delivery="once")
                elif cut_in == "sweep":
                    self._advance(self.interval.total_seconds())
                elif vm is not None:
                    self.h.compute.preempt(vm.zone, vm.name)
            return False

        self.h.compute.fault = fault
        try:
            response = self.h.functions.start(start_message(message["spec"]), message["published"],
                                              dict(message["attributes"]), message["id"])
        finally:
            self.h.compute.fault = None
        assert response.status_code in (200, 500)

    @rule(job=st.sampled_from(sorted(JOBS)), change=st.sampled_from(["pause", "resume", "remove", "redeploy",
                                                                        "restore"]),
          at=st.sampled_from([None, *DEPLOY_POINTS]), nth=st.integers(1, 4))
    def a_deploy_changes_a_job(self, job, change, at, nth):
        """`spotcron pause/resume`, a job file removed, or edited and deployed: between any two steps,
        or inside the next handler (a start above all) right before its nth call of a kind, while it
        lists the live VMs, writes its admission or places the run, before its insert."""
        if at is not None:
            self.deploy_inside = (at, nth, job, change)
            return
        self._deploy(job, change)

    def _deploy_lands(self) -> None:
        armed, self.deploy_inside = self.deploy_inside, None
        if armed is not None:
            self._deploy(armed[2], armed[3])

    def _deploy(self, job: str, change: str) -> None:
        store = SpecStore(self.h.blobs)
        current = self.deployed[job]
        if change == "remove":
            self.h.blobs.delete(layout.deployed_spec(job))
            self.deployed[job] = None
            return
        base = {"redeploy": REDEPLOYED[job], "restore": JOBS[job]}.get(change, current or JOBS[job])
        spec = base.model_copy(update={"paused": change == "pause"})
        store.write(spec)
        self.deployed[job] = spec

    def _to_midnight(self) -> timedelta:
        now = self.h.clock.now()
        return datetime(now.year, now.month, now.day, tzinfo=UTC) + timedelta(days=1) - now

    @precondition(lambda self: self._to_midnight() <= timedelta(hours=4))  # as far as clock_moves goes
    @rule(seconds=st.integers(20, 150))
    def clock_to_just_before_midnight(self, seconds):
        """The clock reaches the last minutes of a UTC day: starts, queues and settlements straddle it."""
        self._advance(max(0.0, (self._to_midnight() - timedelta(seconds=seconds)).total_seconds()))

    @rule(data=st.data())
    def capacity_advice_and_stockouts(self, data):
        """The sweep's advice says some zones have no Spot capacity; some zones stock out for a while."""
        zones = [*self.h.settings.zones, *PLACEMENT["zones"]["us-west4"]]
        unlikely = data.draw(st.sets(st.sampled_from(zones)))
        said = {zone: ZoneAdvice(spot_hourly=0.002 + 0.001 * i, preemption_rate=0.05,
                                 obtainability=0.1 if zone in unlikely else 0.9) for i, zone in enumerate(zones)}
        advice = Advice(fetched_at=self.h.clock.now(), machines={t: said for t in ("e2-small", "e2-standard-4")})
        self.h.blobs.write(layout.ADVICE, advice.to_json())
        for zone in sorted(data.draw(st.sets(st.sampled_from(zones)))):  # sorted: a seed replays in any process
            self.h.compute.fail_create(CreateFailed(CreateFailed.STOCKOUT, "ZONE_RESOURCE_POOL_EXHAUSTED"),
                                       zone=zone, times=data.draw(st.integers(1, 3)))

    # --- the VMs ----------------------------------------------------------------------------------
    def _check_inserts(self) -> None:
        """Every insert that lands is checked as it lands: its run's job is deployed as the run
        recorded it, and no insert of the same attempt has landed in the last hour. What it finds
        is kept for an invariant: raised inside a handler, the handler would take it for its own."""
        compute, create = self.h.compute, self.h.compute.create_instance
        machine = self

        def checked(request):
            instance = create(request)
            if any(r is request for r in compute.created[-1:]):  # it landed (not a repeat answered as the first)
                # Read quietly: no injected fault or crash may touch the check itself.
                blob = machine.h.blobs.peek(layout.run_record(request.labels["job"], request.labels["run"]))
                record = RunRecord.from_json(blob.data) if blob is not None else None
                quiet = SimpleNamespace(blobs=SimpleNamespace(read=machine.h.blobs.peek))
                problem = deployed_problem(quiet, record) if record is not None else "no record"
                if problem is not None:
                    machine.insert_problems.append(f"{request.name} created though {problem}")
                now = machine.h.clock.now()
                again = [w for (n, z, spot, w) in machine.inserts
                         if (n, z, spot) == (request.name, request.zone, request.spot) and now - w < timedelta(hours=1)]
                if again:
                    machine.insert_problems.append(f"{request.name} inserted again in {request.zone} within the hour")
                machine.inserts.append((request.name, request.zone, request.spot, now))
            return instance

        compute.create_instance = checked

    def _live(self):
        return sorted((i for i in self.h.compute.all_instances() if i.managed), key=lambda i: (i.name, i.zone))

    def _vm_reports(self, vm, *, exit_code, manifest, status, delivery) -> None:
        job, run_id, attempt = vm.labels["job"], vm.labels["run"], int(vm.labels["attempt"])
        if status == "exited":
            self.h.upload(job, run_id, attempt, exit_code=exit_code, manifest=manifest)
        token = self.h.token(job, run_id, attempt, zone=vm.zone, instance_id=vm.instance_id)
        body = {"job": job, "run_id": run_id, "attempt": attempt, "status": status,
                "exit_code": None if status == "preempted" else exit_code, "timed_out": exit_code == 137,
                "uploaded": manifest, "started_at": self.h.clock.now().isoformat(),
                "finished_at": self.h.clock.now().isoformat()}
        callback = {"token": token, "body": body}
        if delivery == "lost":
            return  # the runner's calls never got through; its VM lives on until its deadline
        for _ in range(2 if delivery == "twice" else 1):
            self.swept_clean = False  # the callback comes after any sweep its step's clock crossed
            response = self._call(lambda: self.h.callback(job, run_id, attempt, token=token, body=body))
            assert response.status_code in (200, 403, 404, 409, 503, NoAnswer.status_code), response.json
            if response.status_code in (503, NoAnswer.status_code):
                self.callbacks.append(callback)
                self.callbacks_due.append(callback)  # the runner retries

    @precondition(lambda self: self._live())
    @rule(data=st.data(), exit_code=st.sampled_from([0, 0, 1, 137]), manifest=st.booleans(),
          delivery=st.sampled_from(["once", "once", "twice", "lost"]))
    def a_vm_ends(self, data, exit_code, manifest, delivery):
        vm = data.draw(st.sampled_from(self._live()))
        self._advance(30)
        if self.h.compute.peek(vm.zone, vm.name) is not None:
            self._vm_reports(vm, exit_code=exit_code, manifest=manifest, status="exited", delivery=delivery)

    @precondition(lambda self: self._live())
    @rule(data=st.data(), notice=st.booleans())
    def preemption(self, data, notice):
        vm = data.draw(st.sampled_from(self._live()))
        if notice:
            self._vm_reports(vm, exit_code=None, manifest=False, status="preempted", delivery="once")
        self.h.compute.preempt(vm.zone, vm.name)

    @precondition(lambda self: self._live())
    @rule(data=st.data())
    def compute_enforces_max_run_duration_late(self, data):
        vm = data.draw(st.sampled_from(self._live()))
        self.h.compute.delay_max_run_duration(vm.zone, vm.name, 6 * 3600)

    @precondition(lambda self: self.callbacks)
    @rule(data=st.data())
    def late_or_retried_callback(self, data):
        callback = data.draw(st.sampled_from(self.callbacks))
        body = callback["body"]
        response = self._call(lambda: self.h.callback(body["job"], body["run_id"], body["attempt"],
                                                      token=callback["token"], body=body))
        assert response.status_code in (200, 401, 403, 404, 409, 503, NoAnswer.status_code)  # 401: expired since

    @precondition(lambda self: len(self._live()) >= 1)
    @rule(data=st.data(), how=st.sampled_from(["other-vm", "instance-id", "zone"]))
    def forged_callback(self, data, how):
        vm = data.draw(st.sampled_from(self._live()))
        job, run_id, attempt = vm.labels["job"], vm.labels["run"], int(vm.labels["attempt"])
        before = self._records()
        if how == "other-vm":
            token = self.h.token(job, run_id, attempt, zone=vm.zone, instance_name="sc-someone-else-a1")
        elif how == "instance-id":
            token = self.h.token(job, run_id, attempt, zone=vm.zone, instance_id="31337")
        else:
            token = self.h.token(job, run_id, attempt, zone="us-central1-f", instance_id=vm.instance_id)
        response = self.h.callback(job, run_id, attempt, token=token)
        assert response.status_code in (403, 404), response.json
        assert self._records() == before
        assert self.h.compute.peek(vm.zone, vm.name) is not None

    # --- invariants -------------------------------------------------------------------------------
    def _records(self) -> dict[tuple[str, str], RunRecord]:
        found = {}
        for name in self.h.blobs.list_quietly(layout.RUNS):
            parsed = layout.parse_record_name(name)
            if parsed:
                blob = self.h.blobs.peek(name)
                found[parsed] = RunRecord.from_json(blob.data)
        return found

    @invariant()
    def every_invariant(self):
        """All of them after every step, in this order; then forget that the last step was a sweep."""
        self.every_insert_is_of_a_deployed_spec_and_lands_once()
        self.at_most_one_live_vm_per_attempt()
        self.no_vm_outlives_its_deadline_by_a_sweep_interval()
        self.terminal_states_are_written_once_and_never_regress()
        self.a_succeeded_run_has_its_manifest()
        self.no_run_outlives_its_vm_after_a_sweep()
        self.no_tick_is_skipped_for_a_run_that_is_over()
        self.the_limits_hold()
        self.an_ended_runs_effects_are_done_by_the_next_clean_sweep()
        self.a_vms_hours_count_once_on_each_day()
        self.a_run_that_failed_for_capacity_tried_every_allowed_zone()
        self.a_replace_job_keeps_at_most_one_run_on_a_vm()
        self.swept_clean = False

    def every_insert_is_of_a_deployed_spec_and_lands_once(self):
        assert not self.insert_problems, self.insert_problems

    def the_limits_hold(self):
        alive = [vm for vm in self._live() if vm.status in ALIVE_STATUSES]
        assert len(alive) <= MAX_LIVE_VMS, f"{len(alive)} VMs alive: {[vm.name for vm in alive]}"
        for name in self.h.blobs.list_quietly(layout.LIMITS):
            day = name[len(layout.LIMITS):].split("/", 1)[0]
            usage = read_day(self.h.blobs, day)
            assert usage.hours <= MAX_VM_HOURS + 1e-6, f"{day}: {usage.hours:.3f} VM-hours counted"

    def a_vms_hours_count_once_on_each_day(self):
        """Each VM's settled hours, over all days, are at most what it ran: never counted twice."""
        for key, record in self._records().items():
            for attempt in record.attempts:
                if attempt.created_at is None or attempt.vm_seconds is None:
                    continue
                days = days_between(attempt.created_at - timedelta(days=1), self.h.clock.now())
                settled = [read_day(self.h.blobs, day).used.get(attempt.vm_name) for day in days]
                total = sum(h for h in settled if h is not None)
                assert total <= attempt.vm_seconds / 3600 + 1e-4, \
                    f"{key}: {attempt.vm_name} settled {total:.4f} h over days, ran {attempt.vm_seconds / 3600:.4f}"

    def a_run_that_failed_for_capacity_tried_every_allowed_zone(self):
        """Its last attempt asked Compute Engine for a Spot VM in every allowed zone (the inserts
        the fake saw, refused ones included), and the reason names the zones it tried."""
        allowed = [*self.h.settings.zones, *PLACEMENT["zones"]["us-west4"]]
        for key, record in self._records().items():
            if record.state == RunState.FAILED and (record.reason or "").startswith("no Spot capacity"):
                attempt = record.current_attempt
                asked = {r.zone for r in self.h.compute.inserts if r.name == attempt.vm_name and r.spot}
                untried = [z for z in allowed if z not in asked]
                assert not untried, f"{key} attempt {attempt.number} failed for capacity without an insert in " \
                                    f"{untried}: {record.reason}"
                unnamed = [z for z in allowed if z not in record.reason]
                assert not unnamed, f"{key} failed for capacity without naming {unnamed}: {record.reason}"

    def a_replace_job_keeps_at_most_one_run_on_a_vm(self):
        running = [r for r in self._records().values() if r.job == "swap" and r.state == RunState.RUNNING]
        vms = [vm for vm in self._live() if vm.labels.get("job") == "swap" and vm.status in ALIVE_STATUSES]
        assert len(running) <= 1 or len(vms) <= len(running), f"{[r.run_id for r in running]} all running"

    def an_ended_runs_effects_are_done_by_the_next_clean_sweep(self):
        """Whatever crashed or failed after a terminal write: once a sweep has run without faults,
        only runs that ended within the list lag may still owe (their own handler is at it), and a
        run that owes nothing has had its run.finished published and its VM-hours settled. The list
        lag counts to the sweep's moment: a step may move the clock on after its last sweep."""
        published = {p.data.get("event_id") for p in self.h.events.of_type("run.finished")}
        for key, record in self._records().items():
            if not record.terminal:
                continue
            if record.owed:
                assert not self.swept_clean or self.swept_at - record.updated_at < LIST_LAG, \
                    f"{key} still owes {record.owed} after a clean sweep ({record.state} at {record.updated_at})"
                continue
            assert finished_event_id(record) in published, f"{key} ended without run.finished"
            for attempt in record.attempts:
                if attempt.created_at is None or attempt.vm_seconds is None:
                    continue
                # Settled on every UTC day its admissions reach, not only the day it was created.
                for day in days_between(record.created_at, record.updated_at):
                    usage = read_day(self.h.blobs, day)
                    if attempt.vm_name in usage.admitted:
                        assert attempt.vm_name in usage.used, f"{key}: {attempt.vm_name}'s hours on {day} never settled"

    def at_most_one_live_vm_per_attempt(self):
        seen = {}
        for vm in self._live():
            key = (vm.labels["job"], vm.labels["run"], vm.labels["attempt"])
            assert key not in seen, f"two VMs for {key}: {seen[key]} and {vm.zone}/{vm.name}"
            seen[key] = f"{vm.zone}/{vm.name}"

    def no_vm_outlives_its_deadline_by_a_sweep_interval(self):
        now = self.h.clock.now()
        for vm in self._live():
            descriptor = RunDescriptor.from_metadata(vm.metadata[METADATA_KEY])
            deadline = vm.created_at + timedelta(seconds=descriptor.timeout_s + self.h.settings.grace)
            assert now <= deadline + self.interval, f"{vm.name} alive at {now}, deadline {deadline}"

    def terminal_states_are_written_once_and_never_regress(self):
        for key, record in self._records().items():
            ends = [c for c in record.history if c.state in (
                RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT, RunState.PREEMPTED, RunState.LOST,
                RunState.SKIPPED, RunState.CANCELLED)]
            assert len(ends) <= 1, f"{key} ended {len(ends)} times: {[c.state for c in ends]}"
            if key in self.first_terminal:
                assert record.state == self.first_terminal[key], f"{key} went from {self.first_terminal[key]}"
            elif record.terminal:
                self.first_terminal[key] = record.state

    def a_succeeded_run_has_its_manifest(self):
        for key, record in self._records().items():
            if record.state == RunState.SUCCEEDED:
                assert record.results_prefix is not None
                assert self.h.blobs.peek(record.results_prefix + "manifest.json") is not None, key

    def no_run_outlives_its_vm_after_a_sweep(self):
        if not self.swept_clean:
            return
        now = self.h.clock.now()
        for key, record in self._records().items():
            attempt = record.current_attempt
            if record.state == RunState.RUNNING:
                assert attempt is not None and self.h.compute.peek(attempt.zone, attempt.vm_name) is not None, \
                    f"{key} is running but its VM is gone after a sweep"
            if not record.terminal:
                assert now - record.updated_at < timedelta(hours=1), f"{key} stuck {record.state} since " \
                                                                     f"{record.updated_at}"

    def no_tick_is_skipped_for_a_run_that_is_over(self):
        records = self._records()
        for (job, _), record in records.items():
            if record.state != RunState.SKIPPED or "still running" not in (record.reason or ""):
                continue
            skipped_at = record.history[-1].at
            for other in record.reason.split("previous run ", 1)[1].split(" is still", 1)[0].split(", "):
                blocker = records.get((job, other))
                if blocker is None:
                    continue  # pruned since
                ended = next((c.at for c in blocker.history if c.state in (
                    RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT, RunState.PREEMPTED, RunState.LOST,
                    RunState.SKIPPED, RunState.CANCELLED)), None)
                assert ended is None or ended >= skipped_at, f"{record.run_id} skipped for {other}, over at {ended}"


PHASES = [p for p in Phase if p != Phase.shrink or os.environ.get("SPOTCRON_EXPLORE_SHRINK", "1") == "1"]
Explore.TestCase.settings = settings(max_examples=EXAMPLES, stateful_step_count=STEPS, deadline=None, phases=PHASES,
                                     suppress_health_check=list(HealthCheck), print_blob=True,
                                     derandomize=IN_SUITE, database=None if IN_SUITE else settings().database)
TestExploration = Explore.TestCase


def test_the_machine_covers_the_issue_rules():
    names = {name for name in dir(Explore) if hasattr(getattr(Explore, name), "hypothesis_stateful_rule")}
    assert {"scheduled_tick", "redelivery", "stalled_redelivery", "manual_run", "preemption", "a_vm_ends",
            "late_or_retried_callback", "forged_callback", "arm_a_transient_error", "arm_a_crash_after_a_call",
            "sweep_at_any_moment", "clock_moves", "compute_enforces_max_run_duration_late",
            "a_deploy_changes_a_job", "clock_to_just_before_midnight", "capacity_advice_and_stockouts"} <= names
