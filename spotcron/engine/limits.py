"""Guards that hold whatever a start message or a deployed spec says, checked before every insert.

Two kinds: the catalog (a machine type or GPU spotcron does not know never reaches Compute
Engine) and the stack's limits (infra/stack.yaml `limits:`): live VMs, GPUs on live VMs and
VM-hours per UTC day. A run outside the catalog ends `failed`; a run that would cross a limit is
queued until room frees or its starting_deadline passes (engine/queue.py), its reason naming the
limit.

Each admission is an object of its own under each UTC day its admission reaches
(layout.usage_admitted, engine/day_hours.py), written between two counts of the limits (see
`admit`): an attempt's admission counts its worst case, timeout + grace, and when its run ends a settlement (layout.usage_used)
replaces that with the hours its VM really ran in each of those days. A VM counts in each day
once, with only its hours inside that day, however often it was admitted. Live
VMs and GPUs are counted from Compute Engine's list of managed VMs at admission, plus the
admissions of the last ADMISSION_WINDOW that the list does not show yet, so starts handled at
the same instant, each listing before the others' inserts land, still see each other.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from spotcron.core import catalog, layout
from spotcron.core.errors import Transient
from spotcron.core.runs import Attempt, RunRecord, RunState
from spotcron.core.settings import Limits
from spotcron.core.spec import JobSpec
from spotcron.engine.day_hours import (
    Admission,
    DayUsage,
    admitted_days,
    day_name,
    days_between,
    overlap_hours,
    read_day,
    settle_ended_attempts,
    write_once,
)
from spotcron.engine.live_index import QUEUED, needs_gpus
from spotcron.engine.ports import ALIVE_STATUSES, Instance
from spotcron.engine.queue_order import holds_back
from spotcron.engine.store import run_sort_key

log = logging.getLogger("spotcron.engine")

GPUS_LABEL = "gpus"  # on every job VM with GPUs, so the GPU limit can count them from one listing
# How long an admitted VM may take to appear in the list; after that an admission no longer
# counts, so an insert that failed for good does not hold a slot for long. It must outlast the
# longest a handler can hold an admission before its insert lands: the sweep's function timeout
# (300 s, deploy/desired.py), the insert's zone fallbacks within it, and the list's lag after an
# accepted insert. A delivery that reaches its insert later than half of it admits again first
# (engine/attempts.py), so only an insert call itself hanging that long could still be missed.
ADMISSION_WINDOW = timedelta(minutes=15)
LIMITS_HINT = "raise it under `limits:` in infra/stack.yaml if this load is expected"


def gpu_count(spec: JobSpec) -> int:
    return spec.machine.gpu.count if spec.machine.gpu else 0


def instance_gpus(instance: Instance) -> int:
    label = instance.labels.get(GPUS_LABEL, "")
    if label.isdigit():
        return int(label)
    known = catalog.machine_type(instance.machine_type.rsplit("/", 1)[-1])
    return known.gpu_count if known and known.bundled_gpu else 0


@dataclass(frozen=True)
class Usage:
    live_vms: int
    gpus: int
    vm_hours_today: float


def limit_problem(limits: Limits, usage: Usage, *, gpus: int, hours: float, day: str | None = None) -> str | None:
    """Which limit one more VM (with `gpus` GPUs, admitted for `hours` of UTC day `day`, None: today)
    would cross; None if none. Pure."""
    if usage.live_vms + 1 > limits.max_live_vms:
        return (f"refused by the stack limit max_live_vms: {usage.live_vms} job VMs are live and the limit is "
                f"{limits.max_live_vms}; {LIMITS_HINT}")
    if gpus and usage.gpus + gpus > limits.max_gpus:
        return (f"refused by the stack limit max_gpus: {usage.gpus} GPUs are on live VMs, this run needs {gpus} "
                f"and the limit is {limits.max_gpus}; {LIMITS_HINT}")
    if usage.vm_hours_today + hours > limits.max_vm_hours_per_day:
        when = f"on {day} (UTC)" if day else "today (UTC)"
        return (f"refused by the stack limit max_vm_hours_per_day: {usage.vm_hours_today:.2f} VM-hours are used or "
                f"admitted {when}, this attempt needs {hours:.2f} (timeout + grace) and the limit is "
                f"{limits.max_vm_hours_per_day:g}; {LIMITS_HINT}")
    return None


def never_fits(deps, spec: JobSpec, *, manual: bool = False) -> str | None:
    """Why `spec`'s VM could not start even on an empty stack (more GPUs than max_gpus, a timeout
    longer than a day's VM-hours): such a run fails at once instead of waiting at the queue's
    head, where it would hold every run behind it until its deadline."""
    # A day holds 24 hours of one VM at most: a longer timeout counts on each of its days.
    problem = limit_problem(deps.settings.limits, Usage(live_vms=0, gpus=0, vm_hours_today=0.0), gpus=gpu_count(spec),
                            hours=min(24.0, (spec.timeout + deps.settings.grace) / 3600))
    if problem is None and manual:
        max_vms, max_gpus, max_hours = deps.settings.limits.manual_caps()
        hours = min(24.0, (spec.timeout + deps.settings.grace) / 3600)
        if max_vms < 1 or gpu_count(spec) > max_gpus or hours > max_hours + 1e-9:
            problem = (f"refused by the limits' manual share: a manual run may hold at most {max_vms} VMs, {max_gpus} "
                       f"GPUs and {max_hours:g} VM-hours a day (manual_share {deps.settings.limits.manual_share:g}), "
                       f"and this one needs 1, {gpu_count(spec)} and {hours:.2f}; raise manual_share under `limits:` "
                       f"in infra/stack.yaml")
    return f"{problem} (even with nothing else running)" if problem else None


def queued_ahead(deps, record: RunRecord) -> str | None:
    """Why a start that has not waited yet must queue behind runs already waiting for room; None
    when no older queued run waits for a limit this one would use. First in, first out per limit
    (engine/queue_order.py): a fresh tick must not take the room an older queued run waits for
    (the queue starts that one next), while a run waiting for GPUs holds back only runs that need
    GPUs, and manual runs never hold back ticks."""
    if len(record.attempts) > 1 or any(change.state == RunState.QUEUED for change in record.history):
        return None  # a retry goes on with its run's work; a run that was queued waited its turn already
    mine = run_sort_key(record.run_id)
    gpus = needs_gpus(record.spec)
    ahead = [e for e in deps.store.live_index() if e.kind == QUEUED and run_sort_key(e.run_id) < mine
             and holds_back(e, manual=record.trigger == "manual", needs_gpus=gpus)]
    if not ahead:
        return None
    older = f"{len(ahead)} older run{'s are' if len(ahead) != 1 else ' is'} queued"
    if all(e.waits_for_gpus for e in ahead):
        # Named as max_gpus's refusal is, so this run's marker says it waits for GPUs alone and it
        # holds back no run that needs none (engine/live_index.GPU_REFUSALS).
        return (f"{older} for GPUs under the stack limit max_gpus: ({ahead[0].job}/{ahead[0].run_id} first); "
                f"runs that need GPUs start in tick order")
    return (f"{older} for room under the stack limits ({ahead[0].job}/{ahead[0].run_id} first); runs start in "
            f"tick order")


# --- the day's admissions (engine/day_hours.py) -----------------------------------------------------

_day = day_name


def is_manual_instance(instance: Instance) -> bool:
    """A VM of a manual run: its run id (the `run` label) starts with `m` (core/runs.manual_run_id)."""
    return instance.labels.get("run", "").startswith("m")


def manual_share_problem(limits: Limits, vm: str, others: list[Instance], pending: dict[str, Admission],
                         usages: dict[str, DayUsage], now: datetime, until: datetime, gpus: int) -> str | None:
    """Why one more manual VM would take what the limits keep for scheduled ticks; None if it fits
    in the manual share (`limits.manual_share`). Pending admissions count, as for the limits."""
    max_vms, max_gpus, max_hours = limits.manual_caps()
    hint = (f"manual runs may hold {limits.manual_share:g} of each limit and the rest is kept for scheduled ticks; "
            f"raise manual_share under `limits:` in infra/stack.yaml to let them take more")
    vms = sum(1 for i in others if is_manual_instance(i)) + sum(1 for a in pending.values() if a.manual)
    if vms + 1 > max_vms:
        return f"refused by the limits' manual share: {vms} manual runs' VMs are live of the {max_vms} they may hold; {hint}"
    used_gpus = sum(instance_gpus(i) for i in others if is_manual_instance(i)) + sum(
        a.gpus for a in pending.values() if a.manual)
    if gpus and used_gpus + gpus > max_gpus:
        return (f"refused by the limits' manual share: manual runs' VMs hold {used_gpus} GPUs of the {max_gpus} they "
                f"may, this run needs {gpus}; {hint}")
    for day, usage in usages.items():
        used = usage.manual_hours - (usage.hours_of(vm) if vm in usage.admitted and usage.admitted[vm].manual else 0.0)
        need = _own_hours(usage, vm, now, until)
        if used + need > max_hours + 1e-9:
            return (f"refused by the limits' manual share: manual runs hold {used:.2f} VM-hours on {day} (UTC) of the "
                    f"{max_hours:g} they may, this attempt is admitted for {need:.2f}; {hint}")
    return None


def _pending(day: DayUsage, now: datetime, *, listed: set[str], own: set[str]) -> dict[str, Admission]:
    """Admissions of others within ADMISSION_WINDOW of `now` whose VMs are not listed yet and
    whose runs have not ended: starts being decided right now, or VMs about to appear."""
    return {vm: entry for vm, entry in day.admitted.items()
            if vm not in day.used and vm not in listed and vm not in own
            and now - ADMISSION_WINDOW <= entry.at <= now + ADMISSION_WINDOW}


# A withdrawal is tried this many times at once before its error is raised: a delete of one name
# is idempotent, and a withdrawal lost to one transient error would hold its hours all day.
WITHDRAW_TRIES = 3


def withdraw_admissions(blobs, names: list[str]) -> None:
    """Delete the admissions `names`, taking each from the list once it is gone; a transient error is
    tried again (WITHDRAW_TRIES in all), then raised with the names still standing left in `names`."""
    while names:
        for tries_left in range(WITHDRAW_TRIES - 1, -1, -1):
            try:
                blobs.delete(names[-1])
                break
            except Transient:
                if not tries_left:
                    raise
        names.pop()


def withdraw_vm(deps, record: RunRecord, vm: str) -> None:
    """Withdraw every admission of `vm` on every day one may be under: its run is queued (the
    queue's transition has landed, so no delivery can still make that VM), and a queued run holds
    no admission while it waits, whichever delivery wrote it and whatever error kept it standing."""
    hours = int((record.spec or {}).get("timeout") or 0) + deps.settings.grace
    now = deps.clock.now()
    for day in days_between(min(record.created_at, now), now + timedelta(seconds=hours)):
        prefix = f"{layout.usage_day(day)}admitted/{vm}~"
        withdraw_admissions(deps.blobs, deps.blobs.list(prefix))


def cover_late_creation(deps, record: RunRecord, spec: JobSpec, vm: str, admitted_at: datetime,
                        created_at: datetime) -> None:
    """A VM created a while after its admission (a slow insert, zone fallbacks) runs until
    created_at + timeout + grace: write its admission under each day that reaches and its admission
    did not, so those days count it while it runs and its end settles it there. An account of a VM
    that exists, not a check: the admission at `admitted_at` decided it."""
    hours = (spec.timeout + deps.settings.grace) / 3600
    covered = set(admitted_days(admitted_at, hours))
    for day in admitted_days(created_at, hours):
        if day not in covered:
            write_once(deps.blobs, layout.usage_admitted(day, vm, int(created_at.timestamp()), gpu_count(spec), hours,
                                                          manual=record.trigger == "manual"))


class AdmissionBusy(Transient):
    """Near a limit while other starts are being admitted: whether this one fits depends on them.
    Its admission is withdrawn; the start is delivered again (Pub/Sub's backoff spreads the retries)."""


def admit(deps, record: RunRecord, spec: JobSpec, attempt: Attempt, *, written: list[str] | None = None) -> str | None:
    """Check the catalog and the limits for `attempt`'s VM and write its admission; the refusal, or None.

    Counted, written, counted again. A start that the day as listed already refuses (or must
    wait on) writes nothing: a refusal is the common case on a busy day, and a handler that dies
    in it leaves no admission standing for a VM nobody creates. One that fits writes its
    admission, an object of its own (concurrent starts never contend on one object), then lists
    the day again and counts every admission there. Of any set of admitted VMs, the one written
    last listed after all the others were written, so it counted them all: together they cannot
    cross a limit. A start that crosses a limit only because of admissions still pending (others
    being decided at this moment) withdraws its own and raises AdmissionBusy, so a burst near a
    limit is decided one by one on redelivery instead of queueing more runs than the limit
    requires. A refused admission is withdrawn: a queued run holds no admission while it waits.

    Idempotent per VM name: a redelivery, a move to the next zone or the on-demand fallback of
    the same attempt neither counts its own VM nor is admitted twice. `written` gets the admission
    this call wrote and left standing, for the caller to withdraw if the run moves on without it.
    """
    problem = catalog.machine_problem(spec.machine)
    if problem:
        return problem
    now = deps.clock.now()
    alive = [i for i in deps.compute.list_managed() if i.status in ALIVE_STATUSES]
    if any(i.name == attempt.vm_name for i in alive):
        return None  # its VM exists already: this is a redelivery of an admitted attempt
    if len(record.attempts) > 1:
        settle_ended_attempts(deps, record, attempt.vm_name)
    hours = (spec.timeout + deps.settings.grace) / 3600
    gpus = gpu_count(spec)
    manual = record.trigger == "manual"
    # Written under every UTC day the admission reaches, so each of those days counts it.
    mine = [layout.usage_admitted(day, attempt.vm_name, int(now.timestamp()), gpus, hours, manual=manual)
            for day in admitted_days(now, hours)]
    decision = _decide(deps, record, attempt, alive, now, hours, gpus)
    if decision.fits:
        wrote = [name for name in mine if write_once(deps.blobs, name)]
        decision = _decide(deps, record, attempt, alive, now, hours, gpus)
        if decision.fits:
            if written is not None:
                written.extend(wrote)
            return None
        # Only the admissions this call wrote: another delivery of the same attempt may have been
        # admitted under an earlier one, and its VM must stay counted.
        withdraw_admissions(deps.blobs, wrote)
    if decision.busy:
        raise AdmissionBusy(f"{decision.busy}; {record.job}/{record.run_id} will be tried again")
    log.info("%s/%s: %s", record.job, record.run_id, decision.problem,
             extra={"fields": {"event": "limit_reached", "job": record.job, "run_id": record.run_id}})
    return decision.problem


@dataclass(frozen=True)
class _Decision:
    """What one count of the limits says of an attempt: it fits, it must wait for the starts being
    decided (`busy`: why), or it is refused (`problem`)."""

    problem: str | None = None
    busy: str | None = None

    @property
    def fits(self) -> bool:
        return self.problem is None and self.busy is None


def _decide(deps, record: RunRecord, attempt: Attempt, alive: list[Instance], now: datetime, hours: float,
            gpus: int) -> _Decision:
    """Count the limits for `attempt` on the days its admission reaches, as they are listed now."""
    limits: Limits = deps.settings.limits
    own = {a.vm_name for a in record.attempts} | {attempt.vm_name}
    # A retry's earlier VMs count while they are alive: Compute Engine's delete is asynchronous,
    # and a STOPPING VM still runs and bills. (They are left out of the pending admissions below:
    # one that is not listed is gone.)
    others = [i for i in alive if i.name != attempt.vm_name]
    listed = {i.name for i in alive}
    # Lists lag behind creates: an earlier VM of this run made or deleted within the window may be
    # alive though not listed yet (a container that reports `preempted` a minute after boot must
    # not get two VMs alive at once). A get cannot lag, so such a VM is asked for by name.
    unlisted = [vm for a in record.attempts
                if a.vm_name != attempt.vm_name and a.vm_name not in listed and a.zone
                and a.created_at is not None and now - (a.deleted_at or now) < ADMISSION_WINDOW
                and (vm := deps.compute.get_instance(a.zone, a.vm_name)) is not None and vm.status in ALIVE_STATUSES]
    others = [*others, *unlisted]
    earlier = [i for i in others if i.name in own]
    today = _day(now)
    days = admitted_days(now, hours)
    usages = {day: read_day(deps.blobs, day) for day in days}
    pending = _pending(usages[today], now, listed=listed, own=own)
    # Admissions written just before midnight (UTC) are in yesterday's listing.
    if _day(now - ADMISSION_WINDOW) != today:
        before = read_day(deps.blobs, _day(now - timedelta(days=1)))
        pending = {**_pending(before, now, listed=listed, own=own), **pending}
    live, live_gpus = len(others), sum(instance_gpus(i) for i in others)
    until = now + timedelta(hours=hours)
    counted = _PendingCounted.of(limits, pending, others, usages, attempt.vm_name)

    def problem_of(*, with_pending: bool, without_earlier: bool = False) -> str | None:
        """The first limit crossed on any of the days, counting the pending admissions or not."""
        vms = live + (counted.vms if with_pending else 0) - (len(earlier) if without_earlier else 0)
        used_gpus = (live_gpus + (counted.gpus if with_pending else 0)
                     - (sum(instance_gpus(i) for i in earlier) if without_earlier else 0))
        for day in days:
            usage = usages[day]
            used = usage.hours - usage.hours_of(attempt.vm_name)  # its own earlier admission counts once: as this one
            used -= (sum(usage.hours_of(vm) for vm in pending) if not with_pending else counted.hours_beyond[day])
            problem = limit_problem(limits, Usage(live_vms=vms, gpus=used_gpus, vm_hours_today=used), gpus=gpus,
                                    hours=_own_hours(usage, attempt.vm_name, now, until),
                                    day=None if day == today else day)
            if problem:
                return problem
        return None

    if record.trigger == "manual" and limits.manual_share < 1:
        # Manual runs wait within their share; scheduled ticks keep the rest (docs/security.md).
        share = manual_share_problem(limits, attempt.vm_name, others, {}, usages, now, until, gpus)
        if share is not None:
            return _Decision(problem=share)
        if manual_share_problem(limits, attempt.vm_name, others, pending, usages, now, until, gpus) is not None:
            # It fits once the other manual starts being admitted are decided.
            return _Decision(busy=f"{len(pending)} other starts are being admitted near the manual share")
    if problem_of(with_pending=True) is None:
        return _Decision()
    problem = problem_of(with_pending=False)
    if problem is None:
        # It would fit once others are decided: wait (a redelivery) rather than fail the run.
        return _Decision(busy=f"{len(pending)} other starts are being admitted near the stack limits")
    if earlier and problem_of(with_pending=False, without_earlier=True) is None:
        # It would fit once this run's own earlier VM has stopped: wait (the sweep, for a retry).
        return _Decision(busy=f"its earlier attempt's VM {earlier[0].name} is still {earlier[0].status} and counts "
                              f"as live")
    # The run waits for room (engine/queue.py) and holds no admission meanwhile: its admission, left
    # standing, would count as a start in progress against every other start for a while.
    return _Decision(problem=problem)


def _own_hours(usage: DayUsage, vm: str, now: datetime, until: datetime) -> float:
    """What `vm` counts in `usage`'s day once admitted from `now` to `until`: the union with its
    earlier admissions there (a redelivery admitted again), as the day will count it."""
    start, end = now, until
    if vm in usage.spans and vm not in usage.used:
        start, end = min(start, usage.spans[vm][0]), max(end, usage.spans[vm][1])
    return overlap_hours(start, end, usage.day)


@dataclass(frozen=True)
class _PendingCounted:
    """How much of the pending admissions a start counts against the stack limits.

    Pending manual starts count only up to what the manual share leaves them: however many a
    publisher has in flight, at most that much of them can be admitted (each is held to the share
    when it decides), so a burst of manual starts cannot make a scheduled tick wait for room the
    share keeps for ticks."""

    vms: int
    gpus: int
    hours_beyond: dict[str, float]  # per day: pending manual hours past the share's room, not counted

    @classmethod
    def of(cls, limits: Limits, pending: dict[str, Admission], others: list[Instance],
           usages: dict[str, DayUsage], own: str) -> _PendingCounted:
        max_vms, max_gpus, max_hours = limits.manual_caps()
        manual = {vm: a for vm, a in pending.items() if a.manual}
        live_manual = [i for i in others if is_manual_instance(i)]
        vms_room = max(0, max_vms - len(live_manual))
        gpus_room = max(0, max_gpus - sum(instance_gpus(i) for i in live_manual))
        beyond = {}
        for day, usage in usages.items():
            pending_hours = sum(usage.hours_of(vm) for vm in manual)
            own_manual = usage.hours_of(own) if own in usage.admitted and usage.admitted[own].manual else 0.0
            room = max(0.0, max_hours - (usage.manual_hours - pending_hours - own_manual))
            beyond[day] = max(0.0, pending_hours - room)
        return cls(vms=len(pending) - len(manual) + min(len(manual), vms_room),
                   gpus=sum(a.gpus for a in pending.values() if not a.manual)
                   + min(sum(a.gpus for a in manual.values()), gpus_room),
                   hours_beyond=beyond)
