"""Run identity and the run record.

A run is one execution of one job (one matrix entry) for one scheduled tick, or one manual
request. Its id comes from the tick, so every delivery of the same tick names the same run,
the same VM and the same record: duplicates collide instead of double-running.
"""

from __future__ import annotations

import hashlib
import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from spotcron.core.hardware import Hardware
from spotcron.core.metrics import RunMetrics


class RunState(StrEnum):
    """Where a run is. Every change between them is a named function in engine/transitions.py.

    A StrEnum, so records store the plain words and compare equal to them.
    """

    SCHEDULED = "scheduled"
    STARTING = "starting"
    QUEUED = "queued"  # its VM would cross a stack limit: it waits for room until its starting_deadline
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    PREEMPTED = "preempted"
    LOST = "lost"
    SKIPPED = "skipped"
    # Stopped on purpose: the local stack was shut down under it, or (a manual run) a scheduled
    # run of its job took its place under `concurrency: forbid` or `replace`.
    CANCELLED = "cancelled"
    # A tick that was due and never started within its starting_deadline (no trigger reached
    # start_job); consecutive ones of a job are one record (`missed_ticks`, `missed_until`).
    MISSED = "missed"


class Outcome(StrEnum):
    """How one attempt's VM ended."""

    EXITED = "exited"
    PREEMPTED = "preempted"
    LOST = "lost"
    TIMED_OUT = "timed_out"
    CREATE_FAILED = "create_failed"
    CANCELLED = "cancelled"
    UNAVAILABLE = "unavailable"  # never ran: the (local) host lacks the hardware its configuration names


TERMINAL_STATES: frozenset[RunState] = frozenset({
    RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT, RunState.PREEMPTED, RunState.LOST,
    RunState.SKIPPED, RunState.CANCELLED, RunState.MISSED})
LIVE_STATES: frozenset[RunState] = frozenset({RunState.SCHEDULED, RunState.STARTING, RunState.QUEUED,
                                               RunState.RUNNING})


class Effect(StrEnum):
    """What a run's end owes the world. The terminal write records them all as owed; whoever
    touches the run next (the same handler, a redelivery, the sweep) does what is still owed and
    records it done, so a crash or a transient error between the write and the effect loses nothing."""

    FINISHED_EVENT = "finished_event"  # publish run.finished (with an id consumers deduplicate on)
    SETTLE = "settle"  # replace the admissions' worst-case VM-hours with what the VMs really ran
    PRUNE = "prune"  # history_limit
    HOOKS = "hooks"  # the deployment's run-end hooks, each owed as `hook:NAME` once the end is written
    # Delete the run's VM: owed (first) by an end that leaves it alive, a run another run of its
    # job ended (`concurrency`); engine/writer.py adds it. Every other end finds its VM gone.
    DELETE_VM = "delete_vm"


END_EFFECTS: tuple[Effect, ...] = tuple(e for e in Effect if e != Effect.DELETE_VM)
HOOK_PREFIX = "hook:"


def hook_entry(name: str) -> str:
    """The owed entry of one run-end hook: each hook is owed, done and retried on its own."""
    return f"{HOOK_PREFIX}{name}"


def _owed_entry(value: Effect | str) -> Effect | str:
    try:
        return Effect(value)
    except ValueError:
        return value


OwedEntry = Annotated[Effect | str, AfterValidator(_owed_entry)]

GCE_NAME_MAX = 63
_GCE_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def utc_minute(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(second=0, microsecond=0)


def scheduled_run_id(tick: datetime, variant: str | None = None) -> str:
    """`20261122-1000` for the 10:00 UTC tick; `-VARIANT` appended for a matrix entry."""
    base = utc_minute(tick).strftime("%Y%m%d-%H%M")
    return f"{base}-{variant}" if variant else base


def manual_run_id(requested_at: datetime, nonce: str, variant: str | None = None) -> str:
    """`m20261122-101530-ab12`: manual runs never share an id with a scheduled tick."""
    base = f"m{requested_at.astimezone(UTC):%Y%m%d-%H%M%S}-{nonce[:4]}"
    return f"{base}-{variant}" if variant else base


def tick_of(run_id: str) -> str:
    """The tick a run belongs to: its id without the matrix entry (`20261122-1000`, or
    `m20261122-101530-ab12` for a manual request). Every run of one tick shares it."""
    parts = run_id.split("-")
    return "-".join(parts[:3] if run_id.startswith("m") else parts[:2])


def of_variant(run_id: str, variant: str) -> bool:
    """Whether `run_id` is a run of matrix entry `variant`: its id ends in `-VARIANT` or, with
    `repeat`, in `-VARIANT-rN`. The record's `variant` says it exactly; this reads only the id."""
    rest = run_id[len(tick_of(run_id)) + 1:]
    return rest == variant or re.fullmatch(rf"{re.escape(variant)}-r\d+", rest) is not None


def vm_name(job: str, run_id: str, attempt: int) -> str:
    """A valid Compute Engine name (<= 63 chars) unique per job, run and attempt."""
    name = f"sc-{job}-{run_id}-a{attempt}"
    if len(name) > GCE_NAME_MAX:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        name = f"{name[:GCE_NAME_MAX - 9].rstrip('-')}-{digest}"
    assert _GCE_NAME.match(name), name
    return name


def vm_labels(job: str, run_id: str, attempt: int) -> dict[str, str]:
    return {"spotcron": "1", "job": job, "run": run_id, "attempt": str(attempt)}


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class EffectFailure(_Record):
    """An owed effect that failed: how often, the last error, and whether it was given up."""

    tries: int = 0
    error: str = ""
    at: datetime | None = None
    gave_up: bool = False


class StateChange(_Record):
    state: RunState
    at: datetime
    reason: str | None = None


def _reported_time(value: datetime | None) -> datetime | None:
    """A time a runner reported, as stored: read as UTC (a naive one, stored before job_done refused
    them, is taken as UTC); one that is no UTC time at all (year 1 at +01:00) is unknown."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        return None


ReportedTime = Annotated[datetime | None, AfterValidator(_reported_time)]


class Attempt(_Record):
    number: int
    vm_name: str
    zone: str | None = None
    # The zones this attempt tries, in order (engine/placement.attempt_order): a stockout moves to
    # the next, and the run fails for capacity only once every one of them has stocked out.
    # Empty: the run's zone order, worked out again from the record.
    zone_order: tuple[str, ...] = ()
    machine_type: str
    provisioning_model: Literal["SPOT", "STANDARD"] = "SPOT"
    gpu: str | None = None  # "nvidia-tesla-t4 x1"
    disk_gb: int = 10
    external_ip: bool = False  # the VM had an external IPv4 address (billed while it lived)
    created_at: datetime | None = None
    instance_id: str | None = None  # Compute Engine's id of this attempt's VM: a re-created VM differs
    # The service account the VM runs as: the job's own (`service_account:`), or None for
    # spotcron's VM account. job_done and the credentials broker accept only its identity tokens.
    service_account: str | None = None
    started_at: ReportedTime = None  # the container started (runner's report)
    finished_at: ReportedTime = None  # the container ended (runner's report)
    deleted_at: datetime | None = None  # VM deleted: billing ends here
    outcome: Outcome | None = None
    exit_code: int | None = None
    error: str | None = None
    # The Secret Manager version each of the job's secrets resolved to, by variable: never a value.
    secret_versions: dict[str, str] = {}

    @property
    def vm_seconds(self) -> float | None:
        if self.created_at is None or self.deleted_at is None:
            return None
        return max(0.0, (self.deleted_at - self.created_at).total_seconds())

    @property
    def container_seconds(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return max(0.0, (self.finished_at - self.started_at).total_seconds())


class ZoneChoice(_Record):
    """One zone placement weighed: what it was expected to cost and what that came from."""

    zone: str
    spot_hourly: float  # the Spot price of the machine (and GPUs) there, USD per hour
    price_source: str  # "advice" (capacityHistory's priceHistory) or the price table's name
    preemption_rate: float | None = None  # daily rate from capacityHistory; None: not known
    capacity: str | None = None  # what capacity advice said ("available", "none"); None: not asked
    transfer_usd: float = 0.0  # image pull and results upload across regions, per run
    expected_usd: float = 0.0


class Placement(_Record):
    """The receipt of where a run went and why, written with its first attempt.

    `zones` is the order the run tries, stockouts and preemptions included; `choices` holds each
    zone's figures. `fallback` says why the fixed order was used instead (advice missing or stale).
    """

    zones: tuple[str, ...]
    why: str
    advice_at: datetime | None = None
    fallback: str | None = None
    choices: tuple[ZoneChoice, ...] = ()

    def choice(self, zone: str | None) -> ZoneChoice | None:
        return next((c for c in self.choices if c.zone == zone), None)


class RunRecord(_Record):
    """gs://BUCKET/runs/JOB/RUN/run.json. Terminal states are written once."""

    job: str
    run_id: str
    variant: str | None = None
    repeat: int | None = None  # which of the configuration's `repeat: N` runs of the tick (1..N)
    trigger: Literal["schedule", "manual"] = "schedule"
    tick: datetime | None = None
    state: RunState = RunState.SCHEDULED
    reason: str | None = None
    created_at: datetime
    updated_at: datetime
    deadline: datetime | None = None  # the current attempt's VM must be gone by then
    history: tuple[StateChange, ...] = ()
    attempts: tuple[Attempt, ...] = ()
    exit_code: int | None = None
    results_prefix: str | None = None  # the attempt folder holding the manifest of a success
    placement: Placement | None = None  # where the run was placed and why (stack setting `placement`)
    cost_usd: float | None = None
    cost_items: dict[str, float] = Field(default_factory=dict)
    cost_problem: str | None = None  # why the run has no cost (a machine type the price table lacks)
    # Seconds a local VM waited for its turn on the host (or its GPUs), left out of cost_usd: a VM of
    # its own on Google Cloud would not have waited (cost/local_wait.py). None: priced from creation.
    local_wait_s: float | None = None
    # The ended attempt's results/metrics.json as checked when the run ended, or why it was not usable.
    metrics: RunMetrics | None = None
    metrics_problem: str | None = None
    # What the ended attempt ran on, as its runner measured it (attempt-N/hardware.json), or why not.
    hardware: Hardware | None = None
    hardware_problem: str | None = None
    history_limit: int = 50
    # What the run's end still owes (set with the terminal state, emptied as each is done): the
    # Effects, and one `hook:NAME` entry per run-end hook (core.runs.hook_entry).
    owed: tuple[OwedEntry, ...] = ()
    # Owed effects that failed at least once (by entry): recorded, not swallowed; cleared of nothing.
    effect_failures: dict[str, EffectFailure] = Field(default_factory=dict)
    # A collapsed `missed` record: how many consecutive ticks it stands for, and the last of them.
    missed_ticks: int | None = None
    missed_until: datetime | None = None
    # A manual run's overrides of its spec (`spotcron run --env K=V --args ...`), as asked.
    overrides: dict[str, Any] | None = None
    # The resolved job spec this run executes, so a retry months later needs nothing else.
    spec: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def current_attempt(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def had_vm(self) -> bool:
        """Whether any attempt of the run got a VM (did work), unlike one skipped or never admitted."""
        return any(a.created_at is not None for a in self.attempts)

    @property
    def duration_seconds(self) -> float | None:
        """Wall time of the work: first container start to last container end."""
        starts = [a.started_at for a in self.attempts if a.started_at]
        ends = [a.finished_at for a in self.attempts if a.finished_at]
        if not starts or not ends:
            return None
        return max(0.0, (max(ends) - min(starts)).total_seconds())

    @property
    def billed_vm_seconds(self) -> float:
        return sum(a.vm_seconds or 0.0 for a in self.attempts)

    def with_state(self, state: RunState, at: datetime, reason: str | None = None, **changes) -> RunRecord:
        """A copy in `state`; a terminal record never changes state again, and entering one owes
        every end-of-run effect (engine/writer.do_owed_effects does them)."""
        if self.terminal:
            raise ValueError(f"run {self.job}/{self.run_id} is already {self.state}")
        state = RunState(state)  # model_copy does not validate: text would stay text
        if state in TERMINAL_STATES:
            changes.setdefault("owed", END_EFFECTS)
        history = (*self.history, StateChange(state=state, at=at, reason=reason))
        return self.model_copy(update={"state": state, "reason": reason if reason is not None else self.reason,
                                       "updated_at": at, "history": history, **changes})

    def with_attempt(self, attempt: Attempt, at: datetime) -> RunRecord:
        """Replace the attempt of the same number, or append a new one."""
        others = tuple(a for a in self.attempts if a.number != attempt.number)
        attempts = tuple(sorted((*others, attempt), key=lambda a: a.number))
        return self.model_copy(update={"attempts": attempts, "updated_at": at})

    def to_json(self) -> bytes:
        return self.model_dump_json(indent=2).encode()

    @classmethod
    def from_json(cls, data: bytes) -> RunRecord:
        return cls.model_validate_json(data)
