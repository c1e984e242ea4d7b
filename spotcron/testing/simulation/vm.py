"""What happens on a simulated VM: boot, the container, uploads, the callback, and what goes wrong.

It plays vm_images/runner's part of the contract (spotcron/core/descriptor.py): run the container
until it ends or its deadline, upload logs and results under the attempt's folder, write the
manifest last, then POST job_done with an identity token of this VM. Every step first checks that
the VM still exists: a deleted, replaced or preempted VM does nothing more.

A VM reaches the rest of the simulated world only through `VmWorld`: the timeline, the cloud it
lives in, the functions it calls, and `Books`, what it tells the simulator's ledger.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from spotcron.core import layout
from spotcron.core.descriptor import METADATA_KEY, RunDescriptor
from spotcron.core.settings import Settings
from spotcron.engine.ports import Instance, InstanceRequest
from spotcron.local.signer import instance_claims
from spotcron.testing.simulation.jobs import SimJob
from spotcron.testing.simulation.timeline import Timeline, Watch
from spotcron.testing.simulation.world import FaultDice, Functions, SimBlobs, SimCompute
from spotcron.testing.token_issuer import ClockedIdentity

PREEMPT_PHASES = (("boot", 0.25), ("run", 0.45), ("upload", 0.2), ("after_upload", 0.1))
CALLBACK_TRIES = 5
KILLED = 137


@dataclass
class Plan:
    boot_s: float
    runtime_s: float
    exit_code: int
    upload_s: float
    fault: str | None = None  # preempt:PHASE | stopped | hang | lost_callback
    notice: bool = False  # a preemption the runner hears about and reports
    poweroff: bool = False  # after its callbacks were lost, the runner powers the VM off
    duplicate: str | None = None  # same_token | fresh_token


def plan_for(dice: FaultDice, request: InstanceRequest, job: SimJob) -> Plan:
    rng = dice.rng
    spec = job.spec
    runtime = job.behaviour.runtime(rng)
    if dice.roll("overrun", job.behaviour.p_overrun):
        runtime = spec.timeout * rng.uniform(1.1, 2.0)
    exit_code = rng.choice([1, 2, 3]) if dice.roll("exit_nonzero", job.behaviour.p_exit_fail) else 0
    plan = Plan(boot_s=rng.uniform(15, 75), runtime_s=runtime, exit_code=exit_code, upload_s=rng.uniform(2, 25))
    if request.spot and dice.roll("preempt"):
        phase = _pick_phase(rng.random())
        plan.fault = f"preempt:{phase}"
        dice.injected[plan.fault] += 1
        plan.notice = phase in ("run", "upload") and dice.roll("preempt_notice")
    elif dice.roll("stopped"):
        plan.fault = "stopped"
    elif dice.roll("hang"):
        plan.fault = "hang"
    elif dice.roll("lost_callback"):
        plan.fault = "lost_callback"
        plan.poweroff = rng.random() < 0.5
    if plan.fault is None and dice.roll("duplicate_callback"):
        plan.duplicate = rng.choice(["same_token", "fresh_token"])
    return plan


def _pick_phase(pick: float) -> str:
    for phase, share in PREEMPT_PHASES:
        if pick < share:
            return phase
        pick -= share
    return PREEMPT_PHASES[-1][0]


class VmTokens:
    """Instance identity tokens, as a VM's metadata server hands them out (signed by the test issuer)."""

    def __init__(self, identity: ClockedIdentity, settings: Settings):
        self.identity = identity
        self.settings = settings
        self.used: deque[tuple[str, str]] = deque(maxlen=8)  # (instance id, token) of recent callbacks

    def issue(self, instance: Instance, audience: str, **claims: Any) -> str:
        """A token of `instance`; `claims` replace what a forger changes (instance_name, zone, ...)."""
        settings = self.settings
        fields: dict[str, Any] = {
            "service_account": settings.vm_service_account_email, "project_id": settings.project,
            "project_number": 0, "zone": f"projects/0/zones/{instance.zone}", "instance_id": instance.instance_id,
            "instance_name": instance.name, "created_at": instance.created_at} | claims
        return self.identity.issue(audience, instance_claims(**fields))

    def job_done(self, instance: Instance) -> str:
        token = self.issue(instance, self.settings.job_done_url)
        self.used.append((instance.instance_id, token))
        return token

    def credentials(self, instance: Instance, *, name: str | None = None) -> str:
        return self.issue(instance, self.settings.credentials_url, **({"instance_name": name} if name else {}))

    def forged(self, instance: Instance, how: str) -> str:
        """A job_done token that must not pass for `instance`'s: another VM's name, id, zone or account,
        or the token another VM already used (a replay)."""
        if how == "replay":
            replayed = next((token for owner, token in reversed(self.used) if owner != instance.instance_id), None)
            if replayed is not None:
                return replayed
            how = "other-vm"  # nothing to replay yet
        claims = {"other-vm": {"instance_name": f"{instance.name}-x"}, "instance-id": {"instance_id": "31337"},
                  "zone": {"zone": "projects/0/zones/us-central1-f"},
                  "account": {"service_account": "intruder@sim-project.iam.gserviceaccount.com"}}[how]
        return self.issue(instance, self.settings.job_done_url, **claims)


class Books(Protocol):
    """What a VM tells the simulator's ledger."""

    def manifest_written(self, key: tuple[str, str, int], exit_code: int) -> None: ...

    def callback_answered(self, status: int, *, duplicate: bool = False) -> None: ...

    def vm_stopped(self) -> None: ...

    def forged_answered(self, how: str, status: int, victim: tuple[str, str, int]) -> None: ...


class Checkpoints:
    """The runner's /checkpoint sync: saved mid-run, restored by the next attempt of the same run."""

    def __init__(self, blobs: SimBlobs, problem: Callable[[str, str], None]):
        self.blobs = blobs
        self.problem = problem
        self.saved: dict[tuple[str, str], int] = {}  # run -> attempt that last saved
        self.restored = 0

    def save(self, vm: SimVm) -> None:
        if not vm.running():
            return
        job, run_id, attempt = vm.key
        self.blobs.write(layout.checkpoint_prefix(job, run_id) + "state.json", json.dumps({"attempt": attempt}).encode())
        self.saved[(job, run_id)] = attempt

    def restore(self, vm: SimVm) -> None:
        job, run_id, attempt = vm.key
        if not vm.job.spec.checkpoint or (job, run_id) not in self.saved:
            return
        if self.blobs.read(layout.checkpoint_prefix(job, run_id) + "state.json") is None:
            self.problem("checkpoint_lost", f"{job}/{run_id} attempt {attempt} found no checkpoint")
        else:
            self.restored += 1


@dataclass(frozen=True)
class VmWorld:
    """Everything a simulated VM may touch, and nothing more."""

    timeline: Timeline
    compute: SimCompute
    blobs: SimBlobs
    dice: FaultDice
    functions: Functions
    tokens: VmTokens
    books: Books
    checkpoints: Checkpoints
    watch: Watch
    sweep_interval: float  # a stopped VM must be gone within one
    on_boot: Callable[[SimVm], None]  # what the container does once it runs (the hostile job attacks)


class SimVm:
    def __init__(self, world: VmWorld, request: InstanceRequest, instance: Instance, job: SimJob):
        self.world = world
        self.request = request
        self.instance = instance
        self.job = job
        self.descriptor = RunDescriptor.from_metadata(request.metadata[METADATA_KEY])
        self.plan = plan_for(world.dice, request, job)
        self.started_at: datetime | None = None
        self.finished_at: datetime | None = None
        self.timed_out = False
        self.stopped_at: datetime | None = None
        self.deadline = instance.created_at + timedelta(seconds=request.max_run_duration_s)

    # --- helpers ------------------------------------------------------------------------------
    @property
    def key(self) -> tuple[str, str, int]:
        d = self.descriptor
        return d.job, d.run_id, d.attempt

    def alive(self) -> bool:
        current = self.world.compute.peek(self.instance.zone, self.instance.name)
        return current is not None and current.instance_id == self.instance.instance_id

    def running(self) -> bool:
        return self.alive() and self.stopped_at is None

    def at(self, seconds: float, step) -> None:
        self.world.timeline.after(seconds, step)

    def _write(self, name: str, data: bytes) -> None:
        self.world.blobs.write(name, data)

    # --- life ---------------------------------------------------------------------------------
    def begin(self) -> None:
        self.at(self.plan.boot_s, self.boot)

    def boot(self) -> None:
        if not self.running():
            return
        if self.plan.fault == "preempt:boot":
            self.preempt()
            return
        world = self.world
        now = world.timeline.now()
        self.started_at = now
        world.checkpoints.restore(self)
        world.on_boot(self)
        end = now + timedelta(seconds=self.plan.runtime_s)
        # Like the runner: `timeout` counts from the container's start, the VM's deadline still wins.
        kill_at = min(now + timedelta(seconds=self.descriptor.timeout_s), self.descriptor.deadline)
        if end > kill_at:
            end, self.timed_out = max(now, kill_at), True
        length = (end - now).total_seconds()
        if self.job.spec.checkpoint:
            self.at(length / 2, lambda: world.checkpoints.save(self))
        if self.plan.fault == "preempt:run":
            self.at(world.dice.rng.uniform(0, length), self.preempt)
        elif self.plan.fault == "stopped":
            self.at(world.dice.rng.uniform(0, length), self.power_off)
        else:
            self.at(length, self.container_ended)

    def container_ended(self) -> None:
        if not self.running():
            return
        self.finished_at = self.world.timeline.now()
        if self.plan.fault == "hang":
            return  # waits for maxRunDuration or the sweep
        self.upload_partial()
        if self.plan.fault == "preempt:upload":
            self.at(self.world.dice.rng.uniform(0, self.plan.upload_s), self.preempt)
        else:
            self.at(self.plan.upload_s, self.upload_done)

    def upload_partial(self) -> None:
        job, run_id, attempt = self.key
        self._write(layout.logs(job, run_id, attempt), f"attempt {attempt} of {run_id}\n".encode())
        self._write(layout.results_prefix(job, run_id, attempt) + "out.json", b'{"rows": 1}')

    def upload_done(self) -> None:
        if not self.running():
            return
        job, run_id, attempt = self.key
        exit_code = self.exit_code
        self._write(layout.results_prefix(job, run_id, attempt) + "summary.json", b'{"rows": 2}')
        self._write(layout.manifest(job, run_id, attempt),
                    json.dumps({"exit_code": exit_code, "files": ["results/out.json", "results/summary.json"],
                                "timed_out": self.timed_out}).encode())
        self.world.books.manifest_written(self.key, exit_code)
        if self.plan.fault == "preempt:after_upload":
            self.preempt()
            return
        self.callback(0)

    @property
    def exit_code(self) -> int:
        return KILLED if self.timed_out else self.plan.exit_code

    def callback(self, tries: int) -> None:
        if not self.running():
            return
        if self.plan.fault == "lost_callback":
            if tries + 1 < CALLBACK_TRIES:
                self.at(5 * 2 ** tries, lambda: self.callback(tries + 1))
            elif self.plan.poweroff:
                self.at(30, self.power_off)
            return
        world = self.world
        token = self.token()
        body = self.body("exited")
        status, _ = world.functions.job_done(token, body)
        world.books.callback_answered(status)
        if status >= 500 and tries + 1 < CALLBACK_TRIES:
            self.at(5 * 2 ** tries, lambda: self.callback(tries + 1))
        elif status < 500 and self.plan.duplicate:
            again = token if self.plan.duplicate == "same_token" else None
            self.at(world.dice.rng.uniform(0.5, 20), lambda: self.duplicate_callback(again, body))

    def duplicate_callback(self, token: str | None, body: dict) -> None:
        # A retried HTTP request whose first answer was lost: it left the VM before the delete.
        status, _ = self.world.functions.job_done(token or self.token(), body)
        self.world.books.callback_answered(status, duplicate=True)

    def preempt(self) -> None:
        if not self.running():
            return
        world = self.world
        if self.plan.notice:
            self.upload_partial()
            status, _ = world.functions.job_done(self.token(), self.body("preempted"))
            world.books.callback_answered(status)
        world.compute.preempt(self.instance.zone, self.instance.name)

    def power_off(self) -> None:
        if not self.running():
            return
        world = self.world
        world.compute.set_status(self.instance.zone, self.instance.name, "TERMINATED")
        self.stopped_at = world.timeline.now()
        world.books.vm_stopped()
        world.watch.gone_by(self.stopped_at, world.sweep_interval, self.instance.name, self.instance.zone,
                            self.alive, "stopped_lingering")

    def forged_callback(self, how: str) -> None:
        """Not this VM's doing: someone holding the job_done URL claims its attempt succeeded."""
        world = self.world
        body = {**self.body("exited"), "exit_code": 0, "timed_out": False, "uploaded": True}
        status, _ = world.functions.job_done(world.tokens.forged(self.instance, how), body)
        world.books.forged_answered(how, status, self.key)

    # --- what the runner sends ----------------------------------------------------------------
    def token(self) -> str:
        return self.world.tokens.job_done(self.instance)

    def body(self, status: str) -> dict:
        job, run_id, attempt = self.key
        preempted = status == "preempted"
        return {"job": job, "run_id": run_id, "attempt": attempt, "status": status,
                "exit_code": None if preempted else self.exit_code, "timed_out": self.timed_out and not preempted,
                "uploaded": not preempted,
                "started_at": self.started_at.isoformat() if self.started_at else None,
                "finished_at": (self.finished_at or self.world.timeline.now()).isoformat()}
