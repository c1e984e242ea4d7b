"""The pruning mark: which of a job's runs history pruning deleted (`pruned/JOB`).

A start message Pub/Sub redelivers after its run ended and was pruned must not bring the run
back, so start_job drops a trigger whose run was pruned. A tick whose first delivery failed
before its record was written never had a run, though, and is pruned by nothing: it must still
start (or be recorded missed) when its message comes back, even after younger ticks ran, ended
and were pruned. So the mark holds, besides the newest run id pruning deleted (`through`, its
first line), the ids it deleted (`recent`, one a line, at most RECENT of them) and a `floor`:
a run id in `recent` was pruned, and so counts every id at or before `floor` (the ids that fell
out of `recent`, or all of them up to `through` in a mark written before `recent` existed); any
other id never had a record. The bound keeps the mark small at the cost of dropping a tick
redelivered after more than RECENT younger runs were pruned.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

RECENT = 512  # run ids of ~20 bytes: a mark of ~10 KB, read once per scheduled start


def run_sort_key(run_id: str) -> str:
    """Run ids sort by time whether scheduled (20261122-1000) or manual (m20261122-101530-ab12)."""
    return run_id.removeprefix("m")


@dataclass(frozen=True)
class PrunedMark:
    through: str | None = None  # the newest run id pruned
    floor: str | None = None  # every run id at or before this counts as pruned
    recent: tuple[str, ...] = ()  # the ids pruned after `floor`, oldest first

    def covers(self, run_id: str) -> bool:
        """Whether history pruning deleted `run_id` (see the module's docstring)."""
        key = run_sort_key(run_id)
        if self.through is None or key > run_sort_key(self.through):
            return False
        return run_id in self.recent or (self.floor is not None and key <= run_sort_key(self.floor))

    def with_pruned(self, run_ids: Sequence[str]) -> PrunedMark:
        """This mark after pruning `run_ids` too; the oldest of `recent` beyond RECENT go under `floor`."""
        through = max([*([self.through] if self.through else []), *run_ids], key=run_sort_key)
        recent = sorted(set(self.recent) | set(run_ids), key=run_sort_key)
        floor = self.floor
        if len(recent) > RECENT:
            dropped, recent = recent[:-RECENT], recent[-RECENT:]
            floor = max([*([floor] if floor else []), *dropped], key=run_sort_key)
        return PrunedMark(through, floor, tuple(recent))

    def holds(self, run_ids: Iterable[str]) -> bool:
        """Whether this mark says every one of `run_ids` was pruned already (nothing to write)."""
        return all(self.covers(run_id) for run_id in run_ids)

    def encode(self) -> bytes:
        return "\n".join([self.through or "", f"{FLOOR}{self.floor or ''}", *self.recent]).encode()


FLOOR = "floor="


def parse(data: bytes | None) -> PrunedMark:
    """The mark in `data`. A mark of one line (as first written, a bare high-water id) counts
    every run id up to it as pruned."""
    if not data:
        return PrunedMark()
    lines = [line.strip() for line in data.decode(errors="replace").splitlines()]
    through = lines[0] if lines and lines[0] else None
    if len(lines) < 2 or not lines[1].startswith(FLOOR):
        return PrunedMark(through, through)
    floor = lines[1][len(FLOOR):] or None
    recent = tuple(sorted({line for line in lines[2:] if line}, key=run_sort_key))
    return PrunedMark(through, floor, recent)
