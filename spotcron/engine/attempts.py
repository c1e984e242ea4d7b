"""Creating an attempt's VM: zones in order, stockouts, on-demand fallback, adoption of duplicates.

The run record is the lock. The zone and provisioning model an attempt uses are written to the
record *before* the create call, under a generation precondition, so concurrent deliveries of
the same tick all try the same (zone, name) and Compute Engine's 409 leaves exactly one VM.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from spotcron.core import catalog, layout
from spotcron.core.catalog import boot_disk_type
from spotcron.core.descriptor import GpuSpec, RunDescriptor, SecretItem
from spotcron.core.errors import AlreadyExists, CreateFailed, Transient
from spotcron.core.runs import Attempt, RunRecord, RunState, vm_labels
from spotcron.core.secret_refs import resource
from spotcron.core.spec import JobSpec
from spotcron.engine import transitions
from spotcron.engine.callers import expected_email
from spotcron.engine.deps import Deps
from spotcron.engine.found_vm import adopt_found_vm
from spotcron.engine.limits import (
    ADMISSION_WINDOW,
    GPUS_LABEL,
    admit,
    cover_late_creation,
    never_fits,
    queued_ahead,
    withdraw_admissions,
    withdraw_vm,
)
from spotcron.engine.ports import GpuRequest, Instance, InstanceRequest
from spotcron.engine.still_deployed import deployed_problem
from spotcron.engine.writer import step

log = logging.getLogger("spotcron.engine")


def instance_request(record: RunRecord, spec: JobSpec, attempt: Attempt, deps: Deps) -> InstanceRequest:
    settings = deps.settings
    now = deps.clock.now()
    # The container must end (and leave time to upload) before Compute Engine deletes the VM
    # at maxRunDuration, so the runner's hard deadline sits half the grace earlier.
    descriptor = RunDescriptor(
        job=record.job, run_id=record.run_id, attempt=attempt.number, image=spec.image,
        command=list(spec.command) if spec.command else None, args=list(spec.args), env=dict(spec.env),
        results_path=spec.results, checkpoint_path=spec.checkpoint, bucket=deps.blobs.bucket,
        prefix=layout.run_prefix(record.job, record.run_id), job_done_url=settings.job_done_url,
        credentials_url=settings.credentials_url,
        deadline=now + timedelta(seconds=spec.timeout + settings.grace // 2), timeout_s=spec.timeout,
        gpu=GpuSpec(type=spec.machine.gpu.type, count=spec.machine.gpu.count) if spec.machine.gpu else None,
        local_command=list(spec.local.command) if spec.local else None,
        checkpoint_object=layout.checkpoint_archive(record.job, record.run_id),
        metadata_access=spec.reaches_metadata,
        # Names and versions only: the runner reads each value itself, with the VM's own account.
        secrets=[SecretItem(name=name, version=f"{resource(ref.secret, settings.project)}/versions/{ref.version}",
                            file=ref.file) for name, ref in sorted(spec.secrets.items())],
        egress=spec.has_egress,
        compared=spec.variant is not None or spec.repeat_index is not None,
    )
    # G2/A2/A3 machine types come with their GPUs; only N1 takes guestAccelerators.
    gpu = None if _bundled_gpu(attempt.machine_type) else spec.machine.gpu
    zone = attempt.zone or transitions.zone_order(record, spec, deps.settings.zones)[0]
    return InstanceRequest(
        name=attempt.vm_name, zone=zone, machine_type=attempt.machine_type,
        spot=attempt.provisioning_model == "SPOT", max_run_duration_s=spec.timeout + settings.grace,
        disk_gb=attempt.disk_gb, disk_type=boot_disk_type(attempt.machine_type),
        labels={**vm_labels(record.job, record.run_id, attempt.number),
                **({GPUS_LABEL: str(spec.machine.gpu.count)} if spec.machine.gpu else {})},
        metadata={"spotcron-run": descriptor.to_metadata(), "user-data": deps.user_data()},
        service_account=expected_email(settings, record, attempt), image=settings.image_family,
        gpu=GpuRequest(type=gpu.type, count=gpu.count) if gpu else None, external_ip=attempt.external_ip,
        network=settings.network_path, subnetwork=settings.subnetwork_path(zone.rsplit("-", 1)[0]),
        secure_boot=spec.machine.gpu is None and not _bundled_gpu(attempt.machine_type),
        request_id=insert_request_id(settings.project, record, attempt),
    )


# The namespace of every insert's requestId (a UUID of its own, so no other tool's ids collide).
REQUEST_ID_NAMESPACE = uuid.UUID("6f3a2c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b")


def insert_request_id(project: str, record: RunRecord, attempt: Attempt) -> str:
    """Compute Engine's `requestId` for `attempt`'s insert: the same for every delivery of this
    attempt in this zone and provisioning model, so a repeated insert within 60 minutes is a no-op
    (a delivery held inside its insert while a copy created, ran and deleted the VM creates
    nothing). Another zone or the on-demand fallback is another request, never answered with the
    stockout the first one met. A version-5 UUID, never the zero UUID Compute Engine refuses."""
    zone = attempt.zone or ""
    key = f"{project}/{record.job}/{record.run_id}/{attempt.number}/{attempt.vm_name}/{zone}/{attempt.provisioning_model}"
    return str(uuid.uuid5(REQUEST_ID_NAMESPACE, key))


def _bundled_gpu(machine_type: str) -> bool:
    from spotcron.core.catalog import machine_type as lookup

    known = lookup(machine_type)
    return bool(known and known.bundled_gpu)


def create_attempt(deps: Deps, record: RunRecord, *, claimed: bool = True) -> RunRecord:
    """Drive a `starting` record until its attempt has a VM or the run has failed.

    `claimed`: the caller has just written this attempt (Begin, a retry, a zone move). Anyone else
    (a redelivery, the sweep) first claims it, so a sweep reading the record meanwhile sees it
    being worked on instead of stuck.
    """
    spec = transitions.spec_of(record)
    admitted: list[str] = []  # the admission this call wrote: withdrawn if the run moves on without it
    admitted_at = deps.clock.now()
    if record.state == RunState.STARTING and record.current_attempt is not None:
        # Once per attempt, before any insert: a move to the next zone keeps the VM's name and budget.
        # The run's copy of its spec may be older than what is deployed now (it waited in the queue,
        # for an earlier VM, or for the sweep after a failed insert): a paused, removed or changed
        # job ends here rather than waiting for room it will never use. A fresh start has just
        # resolved the deployed spec itself. Every insert is checked again right before it (below).
        if not claimed:
            # Taken up from a delivery that may have died right after its insert: a VM it made
            # runs the spec it was made from and is adopted (engine/found_vm.py), before anything
            # below could end or queue the run as one that never got a VM.
            adopted = adopt_found_vm(deps, record)
            if adopted is not None:
                return adopted
        gone = deployed_problem(deps, record) if _has_waited(record, claimed=claimed) else None
        if gone:
            return step(deps, record.job, record.run_id, transitions.Withdrawn(record.current_attempt, gone)).record or record
        # Before admission and the queue: a run this host can never run must not hold their room.
        lacking = deps.host_problem(spec) if deps.host_problem is not None else None
        if lacking:
            return step(deps, record.job, record.run_id, transitions.HostLacks(record.current_attempt, lacking)).record or record
        problem = catalog.machine_problem(spec.machine) or never_fits(deps, spec, manual=record.trigger == "manual")
        if problem:
            return step(deps, record.job, record.run_id, transitions.CreateRefused(record.current_attempt, problem)).record or record
        refused = queued_ahead(deps, record) or admit(deps, record, spec, record.current_attempt, written=admitted)
        admitted_at = deps.clock.now()
        if refused:
            # Not a failure: the run waits for room (engine/queue.py) until its starting_deadline.
            return _queued(deps, record, record.current_attempt, refused)
    while record.state == RunState.STARTING and record.current_attempt is not None:
        attempt = record.current_attempt
        if not claimed:
            stepped = step(deps, record.job, record.run_id, transitions.Claim(attempt))
            record = stepped.record or record
            if not stepped.changed:
                if ((stepped.record is None or not transitions.is_current_attempt(stepped.record, attempt))
                        and not _keeps_admission(stepped.record, attempt)):
                    # The run moved on (ended, queued, another zone's delivery). Kept when a copy of
                    # this delivery created the attempt's VM meanwhile: that VM counts on it.
                    withdraw(deps, admitted)
                continue  # another writer moved the run on: look again at what it is now
        claimed = False
        # A delivery can stall anywhere; read once more right before the insert, so one that stalled
        # while the attempt ran and ended makes no VM for it. (A stall inside the insert call itself
        # is answered after it: the VM is deleted at once below, and the broker and job_done refuse it.)
        latest = deps.store.read(record.job, record.run_id)
        if latest is None or not transitions.is_current_attempt(latest, attempt):
            if not _keeps_admission(latest, attempt):  # a copy that made the VM counts it on this admission
                withdraw(deps, admitted)
            return latest or record
        if deps.clock.now() - admitted_at > ADMISSION_WINDOW / 2:
            # Held so long that its admission may stop counting for others before the VM is listed.
            refused = admit(deps, latest, spec, attempt, written=admitted)
            admitted_at = deps.clock.now()
            if refused:
                withdraw(deps, admitted)
                return _queued(deps, record, attempt, refused)
        # The last look before the insert: a deploy that landed while this delivery listed VMs,
        # wrote its admission or placed the run (a fresh start too) leaves no VM from the old spec.
        gone = deployed_problem(deps, latest)
        if gone:
            adopted = adopt_found_vm(deps, latest)  # a copy's insert landed: its VM counts on the admission
            if adopted is not None:
                if not _keeps_admission(adopted, attempt):
                    withdraw(deps, admitted)
                return adopted
            stepped = step(deps, record.job, record.run_id, transitions.Withdrawn(attempt, gone))
            if stepped.changed or not _keeps_admission(stepped.record, attempt):
                # Its admission would hold hours all day for a VM nobody creates. (Kept when a
                # concurrent delivery created the attempt's VM meanwhile: that VM counts on it.)
                withdraw(deps, admitted)
            return stepped.record or latest
        try:
            instance = _create_or_adopt(deps, instance_request(record, spec, attempt, deps))
        except CreateFailed as failure:
            record = _after_create_failure(deps, record, spec, attempt, failure)
            claimed = record.current_attempt is not None and record.current_attempt != attempt
            continue
        if not instance.managed:
            reason = (f"a VM named {instance.name} exists in {instance.zone} without the spotcron label; "
                      "it was left alone")
            return step(deps, record.job, record.run_id, transitions.Fail(reason)).record or record
        cover_late_creation(deps, record, spec, instance.name, admitted_at, instance.created_at)
        event = transitions.VmCreated(attempt=attempt, zone=instance.zone, created_at=instance.created_at,
                            provisioning_model=instance.provisioning_model, instance_id=instance.instance_id,
                            deadline=transitions.vm_deadline(spec, deps.settings.grace, instance.created_at))
        stepped = step(deps, record.job, record.run_id, event)
        if not stepped.changed and (stepped.record is None or not _runs_on(stepped.record, instance)):
            # The run moved on while this delivery stalled before its insert (it ended, went to
            # another zone, or ended and was pruned): the VM just made would run the attempt again.
            # Delete it at once.
            log.warning("deleting %s in %s: created by a stalled delivery after %s/%s moved on (%s)",
                        instance.name, instance.zone, record.job, record.run_id,
                        stepped.refused or "its record is gone")
            deps.compute.delete_instance(instance.zone, instance.name)
        return stepped.record or record
    return record


def _has_waited(record: RunRecord, *, claimed: bool) -> bool:
    """Whether the run may have waited since its start message resolved the deployed spec: a retry,
    a run that was queued, or an attempt taken up again by someone else (a redelivery, the sweep)."""
    return (not claimed or record.had_vm or len(record.attempts) > 1
            or any(change.state == RunState.QUEUED for change in record.history))


def _has_had_vm(record: RunRecord | None, attempt: Attempt) -> bool:
    """Whether `record` says `attempt` got a VM (made by whichever delivery)."""
    return record is not None and any(a.number == attempt.number and a.created_at is not None
                                      for a in record.attempts)


def _keeps_admission(record: RunRecord | None, attempt: Attempt) -> bool:
    """Whether the admission a delivery wrote for `attempt` stays although the delivery makes no VM:
    only while the run lives and a copy of the delivery made the attempt's VM, which counts on it
    until the run's end settles it. Once the run has ended it goes: the settlement reads the days
    after the end is written, and this delivery re-reads the record after writing its admission, so
    an admission written after the settlement read its day (a delivery listing the VMs while the
    callback ended the run) is always seen here, and would otherwise hold its hours unsettled. The
    VM's own hours are on the admission its creator wrote before the insert."""
    return record is not None and not record.terminal and _has_had_vm(record, attempt)


def withdraw(deps: Deps, admitted: list[str]) -> None:
    """Take back the admission this delivery wrote for an attempt that will get no VM from it: left
    standing it would count hours nobody settles (its run has ended, or waits elsewhere)."""
    withdraw_admissions(deps.blobs, admitted)


def _queued(deps: Deps, record: RunRecord, attempt: Attempt, refused: str) -> RunRecord:
    """Queue the run for room. Once queued it holds no admission of its VM: one a withdrawal could
    not delete (a transient error outlasting its tries) or another delivery left goes now."""
    stepped = step(deps, record.job, record.run_id, transitions.Queue(attempt, f"waiting for room: {refused}"))
    if stepped.changed:
        withdraw_vm(deps, stepped.record or record, attempt.vm_name)
    return stepped.record or record


def _runs_on(record: RunRecord, instance: Instance) -> bool:
    """Whether `instance` is the VM the record's current attempt runs on."""
    current = record.current_attempt
    return (not record.terminal and current is not None and current.outcome is None
            and (current.zone, current.vm_name) == (instance.zone, instance.name)
            and current.instance_id in (None, instance.instance_id))


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


def _after_create_failure(deps: Deps, record: RunRecord, spec: JobSpec, attempt: Attempt,
                          failure: CreateFailed) -> RunRecord:
    next_try: Attempt | None = None
    if failure.try_another_zone:
        # The attempt goes through its own order (it may start mid-list after a preemption and
        # wraps around): each zone before this one has stocked out for it in this provisioning model.
        zones = transitions.attempt_zones(record, spec, deps.settings.zones, attempt)
        here = attempt.zone or zones[0]
        if here not in zones:  # worked out again after the stack's zones changed: this one came first
            zones = (here, *zones)
        position = zones.index(here)
        tried, untried = zones[:position + 1], zones[position + 1:]
        if untried:
            next_try = attempt.model_copy(update={"zone": untried[0], "zone_order": zones})
        elif attempt.provisioning_model == "SPOT" and spec.on_demand_fallback:
            next_try = attempt.model_copy(update={"zone": zones[0], "provisioning_model": "STANDARD",
                                                  "zone_order": zones})
        else:
            kind = "Spot " if attempt.provisioning_model == "SPOT" else ""
            reason = f"no {kind}capacity for {attempt.machine_type} in {', '.join(tried)} ({failure.reason})"
            if attempt.provisioning_model == "SPOT":
                reason += "; set on_demand_fallback: true to fall back to on-demand VMs"
            return step(deps, record.job, record.run_id, transitions.CreateRefused(attempt, reason)).record or record
    if next_try is None:
        reason = f"Compute Engine refused the VM ({failure.kind}): {failure.reason}"
        return step(deps, record.job, record.run_id, transitions.CreateRefused(attempt, reason)).record or record
    log.info("%s in %s for %s; trying %s %s", failure.kind, attempt.zone, attempt.vm_name, next_try.zone,
             next_try.provisioning_model)
    return step(deps, record.job, record.run_id, transitions.MoveAttempt(attempt, next_try)).record or record
