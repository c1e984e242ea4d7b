"""Creating an attempt's VM: zones in order, stockouts, on-demand fallback, adoption of duplicates.

The run record is the lock. The zone and provisioning model an attempt uses are written to the
record *before* the create call, under a generation precondition, so concurrent deliveries of
the same tick all try the same (zone, name) and Compute Engine's 409 leaves exactly one VM.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from spotcron.core import layout
from spotcron.core.catalog import boot_disk_type
from spotcron.core.descriptor import GpuSpec, RunDescriptor
from spotcron.core.errors import AlreadyExists, CreateFailed, Transient
from spotcron.core.runs import Attempt, RunRecord, vm_labels, vm_name
from spotcron.core.spec import JobSpec
from spotcron.engine.deps import Deps
from spotcron.engine.ports import GpuRequest, Instance, InstanceRequest

log = logging.getLogger("spotcron.engine")


def zones_for(spec: JobSpec, deps: Deps) -> tuple[str, ...]:
    return spec.machine.zones or deps.settings.zones


def spec_of(record: RunRecord) -> JobSpec:
    if record.spec is None:
        raise ValueError(f"run {record.job}/{record.run_id} has no spec")
    return JobSpec.from_payload(record.spec)


def new_attempt(record: RunRecord, spec: JobSpec, deps: Deps, *, after_zone: str | None = None) -> Attempt:
    """The next attempt, starting one zone after the zone that just failed it (a preemption)."""
    number = len(record.attempts) + 1
    zones = zones_for(spec, deps)
    zone = zones[0]
    if after_zone in zones:
        zone = zones[(zones.index(after_zone) + 1) % len(zones)]
    gpu = spec.machine.gpu
    return Attempt(
        number=number, vm_name=vm_name(record.job, record.run_id, number), zone=zone,
        machine_type=spec.machine.type, provisioning_model="SPOT" if spec.machine.spot else "STANDARD",
        gpu=f"{gpu.type} x{gpu.count}" if gpu else None, disk_gb=spec.machine.disk_gb,
    )


def vm_deadline(spec: JobSpec, deps: Deps, created: datetime) -> datetime:
    return created + timedelta(seconds=spec.timeout + deps.settings.grace)


def build_request(record: RunRecord, spec: JobSpec, attempt: Attempt, deps: Deps) -> InstanceRequest:
    settings = deps.settings
    now = deps.clock.now()
    # The container must end (and leave time to upload) before Compute Engine deletes the VM
    # at maxRunDuration, so the runner's hard deadline sits half the grace earlier.
    descriptor = RunDescriptor(
        job=record.job, run_id=record.run_id, attempt=attempt.number, image=spec.image,
        command=list(spec.command) if spec.command else None, args=list(spec.args), env=dict(spec.env),
        results_path=spec.results, checkpoint_path=spec.checkpoint, bucket=deps.blobs.bucket,
        prefix=layout.run_prefix(record.job, record.run_id), job_done_url=settings.job_done_url,
        deadline=now + timedelta(seconds=spec.timeout + settings.grace // 2), timeout_s=spec.timeout,
        gpu=GpuSpec(type=spec.machine.gpu.type, count=spec.machine.gpu.count) if spec.machine.gpu else None,
        local_command=list(spec.local.command) if spec.local else None,
    )
    # G2/A2/A3 machine types come with their GPUs; only N1 takes guestAccelerators.
    gpu = None if _bundled_gpu(attempt.machine_type) else spec.machine.gpu
    return InstanceRequest(
        name=attempt.vm_name, zone=attempt.zone or zones_for(spec, deps)[0], machine_type=attempt.machine_type,
        spot=attempt.provisioning_model == "SPOT", max_run_duration_s=spec.timeout + settings.grace,
        disk_gb=attempt.disk_gb, disk_type=boot_disk_type(attempt.machine_type),
        labels=vm_labels(record.job, record.run_id, attempt.number),
        metadata={"spotcron-run": descriptor.to_metadata(), "user-data": deps.user_data()},
        service_account=settings.vm_service_account_email, image=settings.image_family,
        gpu=GpuRequest(type=gpu.type, count=gpu.count) if gpu else None,
    )


def _bundled_gpu(machine_type: str) -> bool:
    from spotcron.core.catalog import machine_type as lookup

    known = lookup(machine_type)
    return bool(known and known.bundled_gpu)


def _same_attempt(record: RunRecord, attempt: Attempt) -> bool:
    current = record.current_attempt
    return (record.state == "starting" and current is not None and current.number == attempt.number
            and current.zone == attempt.zone and current.provisioning_model == attempt.provisioning_model)


def create_attempt(deps: Deps, record: RunRecord) -> RunRecord:
    """Drive a `starting` record until its attempt has a VM or the run has failed."""
    spec = spec_of(record)
    while record.state == "starting" and record.current_attempt is not None:
        attempt = record.current_attempt
        try:
            instance = _create_or_adopt(deps, build_request(record, spec, attempt, deps))
        except CreateFailed as failure:
            record = _after_create_failure(deps, record, spec, attempt, failure)
            continue
        if not instance.managed:
            return fail_run(deps, record, f"a VM named {instance.name} exists in {instance.zone} without the "
                                          "spotcron label; it was left alone")
        return _mark_running(deps, record, spec, attempt, instance)
    return record


def _create_or_adopt(deps: Deps, request: InstanceRequest) -> Instance:
    try:
        return deps.compute.create_instance(request)
    except AlreadyExists:
        existing = deps.compute.get_instance(request.zone, request.name)
        if existing is None:
            raise Transient(f"{request.name} existed and vanished during create; retry") from None
        return existing
    except Transient:
        # The insert may have landed even though we never heard back.
        existing = deps.compute.get_instance(request.zone, request.name)
        if existing is None:
            raise
        return existing


def _mark_running(deps: Deps, record: RunRecord, spec: JobSpec, attempt: Attempt, instance: Instance) -> RunRecord:
    now = deps.clock.now()

    def change(current: RunRecord) -> RunRecord | None:
        if not _same_attempt(current, attempt):
            return None
        started = attempt.model_copy(update={"created_at": instance.created_at, "zone": instance.zone,
                                             "provisioning_model": instance.provisioning_model})
        return current.with_attempt(started, now).with_state(
            "running", now, deadline=vm_deadline(spec, deps, instance.created_at))

    updated, changed = deps.store.update(record.job, record.run_id, change)
    if changed and updated is not None:
        deps.publish("run.started", updated, vm=instance.name, zone=instance.zone)
    return updated or record


def _after_create_failure(deps: Deps, record: RunRecord, spec: JobSpec, attempt: Attempt,
                          failure: CreateFailed) -> RunRecord:
    zones = zones_for(spec, deps)
    next_try: Attempt | None = None
    if failure.try_another_zone:
        position = zones.index(attempt.zone) if attempt.zone in zones else len(zones) - 1
        if position + 1 < len(zones):
            next_try = attempt.model_copy(update={"zone": zones[position + 1]})
        elif attempt.provisioning_model == "SPOT" and spec.on_demand_fallback:
            next_try = attempt.model_copy(update={"zone": zones[0], "provisioning_model": "STANDARD"})
        else:
            kind = "Spot " if attempt.provisioning_model == "SPOT" else ""
            reason = f"no {kind}capacity for {attempt.machine_type} in {', '.join(zones)} ({failure.reason})"
            if attempt.provisioning_model == "SPOT":
                reason += "; set on_demand_fallback: true to fall back to on-demand VMs"
            return fail_run(deps, record, reason, attempt=attempt)
    if next_try is None:
        return fail_run(deps, record, f"Compute Engine refused the VM ({failure.kind}): {failure.reason}",
                        attempt=attempt)
    now = deps.clock.now()
    log.info("%s in %s for %s; trying %s %s", failure.kind, attempt.zone, attempt.vm_name, next_try.zone,
             next_try.provisioning_model)

    def change(current: RunRecord) -> RunRecord | None:
        if not _same_attempt(current, attempt):
            return None
        return current.with_attempt(next_try, now)

    updated, _ = deps.store.update(record.job, record.run_id, change)
    return updated or record


def fail_run(deps: Deps, record: RunRecord, reason: str, *, attempt: Attempt | None = None,
             state: str = "failed") -> RunRecord:
    """End the run in `state` with `reason` (written once: a terminal record is left as it is).

    With `attempt`, only while that attempt is still the one being created: a concurrent delivery
    may have moved on to another zone, or started the VM, since this one's create failed.
    """
    now = deps.clock.now()

    def change(current: RunRecord) -> RunRecord | None:
        if current.terminal or (attempt is not None and not _same_attempt(current, attempt)):
            return None
        updated = current
        if attempt is not None:
            updated = updated.with_attempt(current.current_attempt.model_copy(
                update={"outcome": "create_failed", "error": reason}), now)
        return finalize(deps, updated, state, reason, now)

    updated, changed = deps.store.update(record.job, record.run_id, change)
    if changed and updated is not None:
        run_ended(deps, updated)
    return updated or record


def finalize(deps: Deps, record: RunRecord, state: str, reason: str | None, now: datetime, **changes) -> RunRecord:
    """The terminal copy of `record`, with its cost. Pure: safe inside a store.update change."""
    ended = record.with_state(state, now, reason, **changes)  # type: ignore[arg-type]
    if deps.run_cost is not None:
        total, items = deps.run_cost(ended)
        ended = ended.model_copy(update={"cost_usd": total, "cost_items": items})
    return ended


def run_ended(deps: Deps, record: RunRecord) -> None:
    """Once per run, after its terminal state is stored: events, history pruning, hooks."""
    deps.publish("run.finished", record)
    try:
        deps.store.prune(record.job, record.history_limit)
    except Exception:  # noqa: BLE001 - pruning is retried at the next run end
        log.warning("could not prune history of %s", record.job, exc_info=True)
    for hook in deps.on_run_end:
        try:
            hook(deps, record)
        except Exception:  # noqa: BLE001 - a page or notification must not fail the run
            log.warning("run-end hook %r failed for %s/%s", hook, record.job, record.run_id, exc_info=True)
