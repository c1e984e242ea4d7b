"""A local run's wait for its turn on the host: kept on the record, left out of what the run cost.

Locally the compared runs of a job take turns on the host (local/turns.py), and a run that needs
host GPUs waits for them; its local VM exists while it waits, like a VM still booting. On Google
Cloud each run has a VM of its own and would not have waited, so the wait is an artefact of the
one host: a run's cost, the VM time per run that `spotcron cost` projects from, and the report's
figures are all of the work, the VM as if created when its runner started. The wait itself stays
visible: `hardware.waited_s` (the runner's measure) and, once the run is priced without it, the
record's `local_wait_s`.

Only local mode prices a run this way (`priced_without_wait` around billing's cost function): on
Google Cloud the VM is billed from its creation, and a job that rewrites its hardware.json must
not lower its cost.

Pure: run records in, records and seconds out.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from spotcron.core.runs import RunRecord
from spotcron.cost.billing import billed_vm_seconds

LOCAL_ZONE_PREFIX = "local-"  # local mode's zones; no Google Cloud zone starts so


def without_wait(record: RunRecord) -> tuple[RunRecord, float | None]:
    """The record as if its local VM had been created when its runner started: a wait for its turn
    (or its host GPUs) is no part of the run's boot or cost; and the seconds left out (None: none).
    Other records as they are. The wait never reaches past the container's start."""
    hardware = record.hardware
    attempt = record.current_attempt
    # Both the runner's word and the zone: a job on Google Cloud that rewrites its hardware.json
    # cannot make its VM's life look shorter.
    if hardware is None or not hardware.local or not hardware.waited_s or attempt is None \
            or attempt.created_at is None or not (attempt.zone or "").startswith(LOCAL_ZONE_PREFIX):
        return record, None
    start = attempt.created_at + timedelta(seconds=hardware.waited_s)
    if attempt.started_at is not None:
        start = min(start, attempt.started_at)
    if attempt.deleted_at is not None:
        start = min(start, attempt.deleted_at)
    waited = (start - attempt.created_at).total_seconds()
    if waited <= 0:
        return record, None
    shifted = attempt.model_copy(update={"created_at": start})
    # A view for pricing and phases only, never stored: the record itself changes only in the engine.
    attempts = tuple(shifted if a.number == attempt.number else a for a in record.attempts)
    return record.model_copy(update={"attempts": attempts}), waited


def waited_seconds(record: RunRecord) -> float | None:
    """How long the run's local VM waited for its turn (or its GPUs): what its cost leaves out."""
    if record.local_wait_s is not None:
        return record.local_wait_s or None
    return without_wait(record)[1]


def work_vm_seconds(record: RunRecord) -> float:
    """The run's VM time, every attempt, without a local VM's wait for its turn: what a VM of its
    own would have lived."""
    return without_wait(record)[0].billed_vm_seconds


def work_cost_usd(record: RunRecord) -> float | None:
    """What the run's work cost: its recorded cost, which leaves the wait out wherever the record
    says `local_wait_s`; a local record priced before that (its cost counts the wait) less the
    wait's share: the billed seconds it added to the machine, its GPUs and its address at the price
    paid, and its seconds of disk."""
    if record.cost_usd is None or record.local_wait_s is not None:
        return record.cost_usd
    work, waited = without_wait(record)
    before, after = record.current_attempt, work.current_attempt
    if not waited or before is None or after is None or before.vm_seconds is None or after.vm_seconds is None:
        return record.cost_usd
    lives = [a.vm_seconds for a in record.attempts if a.vm_seconds is not None]
    billed = sum(billed_vm_seconds(life) for life in lives)
    items = record.cost_items
    per_billed = sum(items.get(name, 0.0) for name in ("compute", "gpu", "external_ip")) / billed if billed else 0.0
    per_second = items.get("disk", 0.0) / sum(lives) if sum(lives) else 0.0
    extra = (billed_vm_seconds(before.vm_seconds) - billed_vm_seconds(after.vm_seconds)) * per_billed \
        + (before.vm_seconds - after.vm_seconds) * per_second
    return max(0.0, record.cost_usd - extra)


def priced_without_wait(cost: Callable[[Any], tuple]) -> Callable[[Any], tuple]:
    """Local mode's cost function: `cost` (billing.cost_function) of the run without its wait, and
    the wait it left out, for the record's `local_wait_s`."""

    def priced(record: RunRecord) -> tuple[float | None, dict, str | None, float | None]:
        work, waited = without_wait(record)
        total, items, *why = cost(work)
        return total, items, why[0] if why else None, waited

    return priced
