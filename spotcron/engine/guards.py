"""Guards that hold whatever a start message or a deployed spec says, checked before every insert.

Two kinds: the catalog (a machine type or GPU spotcron does not know never reaches Compute
Engine) and the stack's limits (infra/stack.yaml `limits:`): live VMs, GPUs on live VMs and
VM-hours per UTC day. A run that would cross one ends `failed`, its reason naming the limit.

VM-hours are a ledger per UTC day (layout.usage_ledger): an attempt reserves its worst case,
timeout + grace, when it is admitted, and when its run ends the reservation is replaced by the
hours its VM really ran. The ledger changes only under generation preconditions, so concurrent
starts cannot both spend the last hours. Live VMs and GPUs are counted from Compute Engine's
list of managed VMs at admission, plus the admissions of the last ADMISSION_WINDOW that the list
does not show yet: starts handled at the same instant each list before the others' inserts
land, but each writes its admission to the ledger under the same precondition, so the later
one sees the earlier one's VM.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from spotcron.core import catalog, layout
from spotcron.core.errors import PreconditionFailed
from spotcron.core.runs import Attempt, RunRecord
from spotcron.core.settings import Limits
from spotcron.core.spec import JobSpec
from spotcron.engine.ports import ALIVE_STATUSES, Instance

log = logging.getLogger("spotcron.engine")

GPUS_LABEL = "gpus"  # on every job VM with GPUs, so the GPU limit can count them from one listing
MAX_CONFLICTS = 20
# How long an admitted VM may take to appear in the list (insert and its zone fallbacks); after
# that an admission no longer counts, so an insert that failed for good, or a preempted VM whose
# run is still retrying, does not hold a slot for long.
ADMISSION_WINDOW = timedelta(minutes=5)
LIMITS_HINT = "raise it under `limits:` in infra/stack.yaml if this load is expected"


def catalog_problem(spec: JobSpec) -> str | None:
    """Why `spec`'s machine cannot be created, per spotcron's catalog; None when it can."""
    machine = spec.machine
    if catalog.machine_type(machine.type) is None:
        return (f"machine type {machine.type!r} is not in spotcron's catalog; refused before any VM was "
                f"created (spotcron validate names the known types)")
    gpu = machine.gpu
    if gpu is not None:
        problem = catalog.gpu_problem(machine.type, gpu.type, gpu.count)
        if problem:
            return f"refused before any VM was created: {problem}"
    return None


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


def limit_problem(limits: Limits, usage: Usage, *, gpus: int, hours: float) -> str | None:
    """Which limit one more VM (with `gpus` GPUs, reserving `hours`) would cross; None if none. Pure."""
    if usage.live_vms + 1 > limits.max_live_vms:
        return (f"refused by the stack limit max_live_vms: {usage.live_vms} job VMs are live and the limit is "
                f"{limits.max_live_vms}; {LIMITS_HINT}")
    if gpus and usage.gpus + gpus > limits.max_gpus:
        return (f"refused by the stack limit max_gpus: {usage.gpus} GPUs are on live VMs, this run needs {gpus} "
                f"and the limit is {limits.max_gpus}; {LIMITS_HINT}")
    if usage.vm_hours_today + hours > limits.max_vm_hours_per_day:
        return (f"refused by the stack limit max_vm_hours_per_day: {usage.vm_hours_today:.2f} VM-hours are used or "
                f"reserved today (UTC), this attempt reserves {hours:.2f} (timeout + grace) and the limit is "
                f"{limits.max_vm_hours_per_day:g}; {LIMITS_HINT}")
    return None


# --- the VM-hours ledger ------------------------------------------------------------------------

def _day(at: datetime) -> str:
    return at.strftime("%Y-%m-%d")


def ledger_hours(ledger: dict) -> float:
    """Hours of a day's ledger: what ended runs really used, plus the reservations still open."""
    used = ledger.get("used", {})
    return sum(float(used.get(vm, hours)) for vm, hours in ledger.get("reserved", {}).items())


def _read_ledger(blobs, day: str) -> dict:
    blob = blobs.read(layout.usage_ledger(day))
    return json.loads(blob.data) if blob else {}


def _recent_admissions(ledger: dict, now: datetime) -> dict[str, int]:
    """VM name → GPUs of the admissions within ADMISSION_WINDOW of `now`."""
    recent = {}
    for vm, entry in ledger.get("admitted", {}).items():
        at = datetime.fromisoformat(entry["at"])
        if now - ADMISSION_WINDOW <= at <= now + ADMISSION_WINDOW:
            recent[vm] = int(entry.get("gpus", 0))
    return recent


def _change_ledger(blobs, day: str, change: Callable[[dict], dict | None]) -> dict:
    name = layout.usage_ledger(day)
    for _ in range(MAX_CONFLICTS):
        blob = blobs.read(name)
        ledger = json.loads(blob.data) if blob else {"reserved": {}, "used": {}}
        updated = change(ledger)
        if updated is None:
            return ledger
        try:
            blobs.write(name, json.dumps(updated, sort_keys=True).encode(), content_type="application/json",
                        if_generation_match=blob.generation if blob else 0)
            return updated
        except PreconditionFailed:
            continue
    from spotcron.engine.store import RecordConflict

    raise RecordConflict(f"the usage ledger {name} kept changing; giving up after {MAX_CONFLICTS} tries")


def admit(deps, record: RunRecord, spec: JobSpec, attempt: Attempt) -> str | None:
    """Check the catalog and the limits for `attempt`'s VM and reserve its hours; the refusal, or None.

    Idempotent per VM name: a redelivery, a move to the next zone or the on-demand fallback of
    the same attempt neither counts its own VM nor reserves twice.
    """
    problem = catalog_problem(spec)
    if problem:
        return problem
    limits: Limits = deps.settings.limits
    now = deps.clock.now()
    alive = [i for i in deps.compute.list_managed() if i.status in ALIVE_STATUSES]
    if any(i.name == attempt.vm_name for i in alive):
        return None  # its VM exists already: this is a redelivery of an admitted attempt
    others = [i for i in alive if i.name != attempt.vm_name]
    listed = {i.name for i in alive}
    own = {a.vm_name for a in record.attempts} | {attempt.vm_name}  # a retry's earlier VMs are gone
    hours = (spec.timeout + deps.settings.grace) / 3600
    gpus = gpu_count(spec)
    refused: list[str] = []
    # Admissions written just before midnight (UTC) sit in yesterday's ledger, which no longer changes.
    yesterday = _recent_admissions(_read_ledger(deps.blobs, _day(now - ADMISSION_WINDOW)), now) \
        if _day(now - ADMISSION_WINDOW) != _day(now) else {}

    def reserve(ledger: dict) -> dict | None:
        refused.clear()
        if attempt.vm_name in ledger.get("reserved", {}):
            return None
        admitted = {**yesterday, **_recent_admissions(ledger, now)}
        unlisted = {vm: n for vm, n in admitted.items()
                    if vm not in listed and vm not in own and vm not in ledger.get("used", {})}
        usage = Usage(live_vms=len(others) + len(unlisted),
                      gpus=sum(instance_gpus(i) for i in others) + sum(unlisted.values()),
                      vm_hours_today=ledger_hours(ledger))
        problem = limit_problem(limits, usage, gpus=gpus, hours=hours)
        if problem:
            refused.append(problem)
            return None
        fresh = {vm: entry for vm, entry in ledger.get("admitted", {}).items() if vm in _recent_admissions(ledger, now)}
        return {**ledger, "reserved": {**ledger.get("reserved", {}), attempt.vm_name: round(hours, 6)},
                "admitted": {**fresh, attempt.vm_name: {"at": now.isoformat(), "gpus": gpus}}}

    _change_ledger(deps.blobs, _day(now), reserve)
    if refused:
        log.warning("%s/%s: %s", record.job, record.run_id, refused[0],
                    extra={"fields": {"event": "limit_refused", "job": record.job, "run_id": record.run_id}})
        return refused[0]
    return None


def settle(deps, record: RunRecord) -> None:
    """At run end: replace each attempt's reservation with the hours its VM really ran."""
    # A VM that was never created used nothing; one whose deletion time is unknown (lost) keeps
    # its reservation, the worst case it could have run.
    actual = {a.vm_name: (a.vm_seconds or 0.0) / 3600 for a in record.attempts
              if a.vm_seconds is not None or a.created_at is None}
    if not actual:
        return
    end = deps.clock.now()
    for day in _days(record.created_at, end):
        def charge(ledger: dict) -> dict | None:
            reserved = ledger.get("reserved", {})
            used = dict(ledger.get("used", {}))
            for vm, hours in actual.items():
                if vm in reserved and vm not in used:
                    used[vm] = round(min(float(reserved[vm]), hours), 6)
            return {**ledger, "used": used} if used != ledger.get("used", {}) else None

        if deps.blobs.read(layout.usage_ledger(day)) is not None:
            _change_ledger(deps.blobs, day, charge)


def _days(start: datetime, end: datetime) -> Iterable[str]:
    day = start.replace(hour=0, minute=0, second=0, microsecond=0)
    while day <= end:
        yield _day(day)
        day += timedelta(days=1)
