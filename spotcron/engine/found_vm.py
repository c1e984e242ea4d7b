"""Before a run waiting for its attempt's VM is ended as one that never had it, ask Compute Engine.

A delivery records its attempt's VM only after the insert returns, so a handler that dies right
after its insert leaves a record that says `starting` (no `created_at`) while the VM runs the
job. Whoever ends such a run as getting no VM (its job withdrawn, the run replaced or cancelled)
would settle the VM's hours as 0 and leave it running unseen by `concurrency: forbid`. So each
of them first looks the VM up by name in its zone: Compute Engine's `instances.get` is consistent
with a completed insert, while a list may lag behind it (docs/deploy.md). A managed VM of this
run and attempt found there is adopted (`VmCreated`), as the sweep adopts a stuck run's VM: the
record then says when the VM was created, and the end that follows deletes it and settles the
hours it really ran.
"""

from __future__ import annotations

import logging

from spotcron.core.runs import RunRecord, RunState
from spotcron.engine import transitions
from spotcron.engine.deps import Deps
from spotcron.engine.ports import Instance
from spotcron.engine.writer import step

log = logging.getLogger("spotcron.engine")


def with_found_vm(deps: Deps, record: RunRecord) -> RunRecord:
    """`record`, with the VM its current attempt already has adopted when Compute Engine has one."""
    return adopt_found_vm(deps, record) or record


def vm_of(deps: Deps, record: RunRecord) -> Instance | None:
    """The managed VM of `record`'s current attempt that the record does not know of yet,
    looked up by name in the attempt's zone; None when it has none (or knows of it already)."""
    attempt = record.current_attempt
    if (record.state != RunState.STARTING or attempt is None or attempt.zone is None
            or attempt.created_at is not None or attempt.outcome is not None):
        return None
    # Stopped or preempted too: it ran, and the sweep ends an adopted attempt whose VM is dead.
    instance = deps.compute.get_instance(attempt.zone, attempt.vm_name)
    if instance is None or not _of_attempt(instance, record, attempt.number):
        return None
    return instance


def adopt_found_vm(deps: Deps, record: RunRecord) -> RunRecord | None:
    """The record as stored after adopting the VM its current attempt already has (see the module's
    docstring); None when Compute Engine has none for it, so the run may end as getting no VM."""
    instance = vm_of(deps, record)
    attempt = record.current_attempt
    if instance is None or attempt is None:
        return None
    spec = transitions.spec_of(record)
    event = transitions.VmCreated(
        attempt=attempt, zone=instance.zone, created_at=instance.created_at,
        provisioning_model=instance.provisioning_model, instance_id=instance.instance_id,
        deadline=transitions.vm_deadline(spec, deps.settings.grace, instance.created_at))
    stepped = step(deps, record.job, record.run_id, event)
    if stepped.changed:
        log.warning("%s/%s: attempt %d's VM %s exists in %s though its start never recorded it; adopted",
                    record.job, record.run_id, attempt.number, instance.name, instance.zone)
    return stepped.record or record


def _of_attempt(instance: Instance, record: RunRecord, number: int) -> bool:
    labels = instance.labels
    return (instance.managed and labels.get("job") == record.job and labels.get("run") == record.run_id
            and labels.get("attempt") == str(number))
