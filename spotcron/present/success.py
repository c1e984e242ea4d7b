"""The success rate: of the runs that ran, the share that succeeded.

A run that never ran, or was stopped on purpose, says nothing about the job: `skipped` (the host
lacks the configuration's GPUs, a concurrency policy forbade it, its tick came too late or found
no room), `missed` (ticks counted as missed by the health figures) and `cancelled` (its stack was
stopped under it). Counted as failures, they made a page after `make run` say 70% on a host
without a GPU while nothing had failed. They are shown beside the rate, never inside it. The
runs that count are the ones engine/notifications.py judges: succeeded, or failed, timed out,
preempted or lost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from spotcron.core.runs import RunRecord, RunState

RAN = frozenset({RunState.SUCCEEDED, RunState.FAILED, RunState.TIMED_OUT, RunState.PREEMPTED, RunState.LOST})
NOT_COUNTED = (RunState.SKIPPED, RunState.MISSED, RunState.CANCELLED)  # the order they are named in


@dataclass(frozen=True)
class Tally:
    succeeded: int
    ran: int  # ended runs that ran to a verdict: the rate's base
    not_counted: tuple[tuple[RunState, int], ...] = ()  # (state, how many), only states with some

    @classmethod
    def of(cls, records: Iterable[RunRecord]) -> Tally:
        ended = [r for r in records if r.terminal]
        left = tuple((state, n) for state in NOT_COUNTED if (n := sum(1 for r in ended if r.state == state)))
        return cls(succeeded=sum(1 for r in ended if r.state == RunState.SUCCEEDED),
                   ran=sum(1 for r in ended if r.state in RAN), not_counted=left)

    @property
    def percent(self) -> float | None:
        return None if not self.ran else 100.0 * self.succeeded / self.ran

    def aside(self) -> str:
        """"6 skipped, 1 cancelled": the ended runs left out of the rate; "" when none were."""
        return ", ".join(f"{n} {state}" for state, n in self.not_counted)

    def text(self) -> str:
        """"93% (14 of 15 that ran; 6 skipped, not counted)", or why there is no rate."""
        aside = self.aside()
        if not self.ran:
            return f"no runs ran ({aside})" if aside else "no runs ended"
        return f"{self.percent:.0f}% ({self.succeeded} of {self.ran} that ran{f'; {aside}, not counted' if aside else ''})"
