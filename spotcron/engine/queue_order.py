"""Which runs waiting for room hold back which: first in, first out per limit.

A younger run must not take the room an older queued run waits for, or a steady stream of small
runs would keep a big one waiting until its starting_deadline. But a run waiting for room holds
back only the runs that would use what it waits for:

- a run refused by max_gpus (or by the GPUs of the limits' manual share) waits for GPUs: it holds
  back only younger runs that need GPUs. A run with no GPU starts past it while live VMs and
  VM-hours have room, so a GPU job waiting for a busy GPU never starves a CPU job's ticks;
- a run refused by max_live_vms or max_vm_hours_per_day waits for what every run uses: it holds
  back every younger run;
- a manual run holds back only younger manual runs: scheduled ticks never wait behind what a
  publisher asked for (the limits' manual share, docs/security.md).

What a queued run needs and waits for rides in its live marker (engine/live_index.py), so neither
a fresh start (engine/limits.queued_ahead) nor the queue pass (engine/queue.py) reads a record to
order the queue. The marker keeps the limit that queued the run; the queue pass goes by the limit
that refuses it at that pass. A marker that does not say (written before markers said it) holds
back every run, as a run waiting for live VMs does.
"""

from __future__ import annotations

from dataclasses import dataclass

from spotcron.engine.live_index import LiveEntry

ROOM, GPUS = "room", "gpus"  # what a waiting run waits for: live VMs or VM-hours (all runs use them), or GPUs


def is_manual(run_id: str) -> bool:
    return run_id.startswith("m")  # core/runs.manual_run_id


def waits_of(entry: LiveEntry) -> str:
    """What the queued run of `entry` waits for, as its marker says."""
    return GPUS if entry.waits_for_gpus else ROOM


def holds_back(ahead: LiveEntry, *, manual: bool, needs_gpus: bool | None) -> bool:
    """Whether the older queued run `ahead` holds back a younger run (`manual`; `needs_gpus`, None:
    not known, so it may)."""
    if is_manual(ahead.run_id) and not manual:
        return False
    return waits_of(ahead) == ROOM or needs_gpus is not False


@dataclass
class Waiting:
    """What the runs found waiting so far in one queue pass hold back."""

    ticks: set[str]
    manual: set[str]

    @classmethod
    def none(cls) -> Waiting:
        return cls(set(), set())

    def add(self, run_id: str, waits: str) -> None:
        (self.manual if is_manual(run_id) else self.ticks).add(waits)

    def holds(self, run_id: str, needs_gpus: bool | None) -> bool:
        """Whether a younger run `run_id` (needing GPUs or not, None: not known) must wait behind them."""
        kinds = self.ticks | (self.manual if is_manual(run_id) else set())
        return ROOM in kinds or (GPUS in kinds and needs_gpus is not False)
