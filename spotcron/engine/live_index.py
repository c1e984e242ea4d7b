"""The `live/` index: one empty object per run not yet ended, whose name carries what the sweep
needs to decide whether the run needs attention.

For a running run the name holds its attempt, zone, VM and deadline; for one still waiting for its
VM (scheduled or starting) only since when, because the sweep looks at such a run only once it may
be stuck. One listing then replaces a read per run (engine/sweep.py). The marker is renamed when
the run starts or stops running, so a run costs two marker writes (deletes are free). A run waiting
for room under the stack's limits has a `queued` marker (since when, its deadline, whether it needs
GPUs and whether the limit it waits for is max_gpus), which the queue reads in tick order
(engine/queue_order.py, engine/queue.py). An ended run keeps an `owed` marker while it
still owes effects (engine/writer.py), so the sweep finds them without reading every record. It is
a hint, never the truth: a marker left behind by a crash or a race makes the sweep read the record
and put the markers right.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from spotcron.core.layout import LIVE, SEPARATOR
from spotcron.core.runs import RunRecord, RunState

_NONE = "-"


WAITING, RUNNING, QUEUED, OWED = "waiting", "running", "queued", "owed"
KINDS = (WAITING, RUNNING, QUEUED, OWED)
# What a queued run needs and waits for, in its marker (where a running run's says its zone), so
# the queue orders runs per limit without reading them (engine/queue_order.py).
NO_GPU, GPU, FOR_GPUS = "nogpu", "gpu", "forgpus"  # for GPU: waits for live VMs or VM-hours
WAITS = (NO_GPU, GPU, FOR_GPUS)
# The refusals that concern GPUs alone (engine/limits.py): a run they queue waits for GPUs only.
GPU_REFUSALS = ("the stack limit max_gpus:", "manual runs' VMs hold")


@dataclass(frozen=True)
class LiveEntry:
    """One run not yet ended, as its marker's name describes it."""

    job: str
    run_id: str
    name: str  # the marker's object name
    kind: str  # WAITING (scheduled or starting), RUNNING, QUEUED or OWED (ended, effects owed)
    attempt: int = 0
    zone: str | None = None
    vm: str | None = None
    deadline: datetime | None = None  # of the running attempt's VM; of a queued run's wait
    since: datetime | None = None  # when the run began waiting for a VM, was queued, or ended
    waits: str | None = None  # a queued run's: NO_GPU, GPU or FOR_GPUS; None: a marker that does not say

    @property
    def needs_gpus(self) -> bool | None:
        """Whether a queued run needs GPUs; None when its marker does not say."""
        return None if self.waits is None else self.waits != NO_GPU

    @property
    def waits_for_gpus(self) -> bool:
        """Whether a queued run waits for GPUs alone (max_gpus refused it), not for live VMs or VM-hours."""
        return self.waits == FOR_GPUS


def live_entry_name(record: RunRecord, since: datetime | None = None) -> str | None:
    """The marker name for `record` (None once it has ended and owes nothing); a waiting run's
    says `since`, by default the record's last change."""
    attempt = record.current_attempt
    if record.terminal:
        if not record.owed:
            return None
        fields = [OWED, _NONE, _NONE, _NONE, _NONE, _epoch(record.updated_at)]
    elif record.state == RunState.QUEUED:
        # Its deadline (engine/queue.py) rides in the name, so a queue pass expires runs without reading them.
        fields = [QUEUED, _NONE, queue_waits(record), _NONE, _epoch(queue_deadline(record)),
                  _epoch(record.history[-1].at if record.history else record.updated_at)]
    elif record.state == RunState.RUNNING and attempt is not None:
        fields = [RUNNING, str(attempt.number), attempt.zone or _NONE, attempt.vm_name, _epoch(record.deadline), _NONE]
    else:
        fields = [WAITING, _NONE, _NONE, _NONE, _NONE, _epoch(since or _began_waiting(record))]
    return f"{LIVE}{record.job}/{record.run_id}/{SEPARATOR.join(fields)}"


def queue_deadline(record: RunRecord) -> datetime:
    """Until when a queued run may still start: its starting_deadline after its tick (or its
    request), or, for a retry, after it was queued."""
    deadline = timedelta(seconds=int((record.spec or {}).get("starting_deadline") or 0))
    if record.had_vm:
        queued_at = next((c.at for c in reversed(record.history) if c.state == RunState.QUEUED), record.updated_at)
        return queued_at + deadline
    return (record.tick or record.created_at) + deadline


def needs_gpus(spec: dict | None) -> bool:
    """Whether a run of the job spec payload `spec` needs GPUs (as the limits count them: machine.gpu)."""
    gpu = ((spec or {}).get("machine") or {}).get("gpu") or {}
    return int(gpu.get("count") or 0) > 0


def waits_for_gpus(reason: str | None) -> bool:
    """Whether a queued run's `reason` names a limit on GPUs alone."""
    return any(refusal in (reason or "") for refusal in GPU_REFUSALS)


def queue_waits(record: RunRecord) -> str:
    """What a queued run's marker says it needs and waits for."""
    if not needs_gpus(record.spec):
        return NO_GPU
    return FOR_GPUS if waits_for_gpus(record.reason) else GPU


def _began_waiting(record: RunRecord) -> datetime:
    """When the run's current wait for a VM began. Not `updated_at`: a delivery claiming the attempt
    (or Begin) changes that while the run keeps waiting, and the next rename must find the name."""
    began = record.updated_at
    for change in reversed(record.history):
        if change.state not in (RunState.SCHEDULED, RunState.STARTING):
            break
        began = change.at
    return began


def parse_live_name(name: str) -> LiveEntry | None:
    """The entry `name` spells; None for a name live_entry_name never writes (only spotcron
    writes under `live/`: no VM's token reaches it)."""
    parts = name[len(LIVE):].split("/") if name.startswith(LIVE) else []
    if len(parts) != 3 or not parts[0] or not parts[1]:
        return None
    try:
        kind, attempt, zone, vm, deadline, since = parts[2].split(SEPARATOR)
        if kind not in KINDS:
            return None
        waits = None
        if kind == QUEUED:  # its zone's place says what it waits for
            waits, zone = (zone if zone in WAITS else None), _NONE
        return LiveEntry(parts[0], parts[1], name, kind=kind, attempt=0 if attempt == _NONE else int(attempt),
                         zone=None if zone == _NONE else zone, vm=None if vm == _NONE else vm,
                         deadline=_from_epoch(deadline), since=_from_epoch(since), waits=waits)
    except ValueError:
        return None


def same_but_time(a: str, b: str) -> bool:
    return a.rsplit(SEPARATOR, 1)[0] == b.rsplit(SEPARATOR, 1)[0]


def _epoch(at: datetime | None) -> str:
    return _NONE if at is None else str(int(at.timestamp()))


def _from_epoch(text: str) -> datetime | None:
    return None if text == _NONE else datetime.fromtimestamp(int(text), UTC)
