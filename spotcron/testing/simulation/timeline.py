"""Fake time and what is due in it: the one queue every simulated actor schedules its next step on.

Steps run in time order, and in the order they were scheduled when two fall on the same instant,
so a seed replays exactly. The clock moves only when the next step is later than now.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from spotcron.testing.memory import FakeClock

Step = Callable[[], None]


@dataclass(order=True)
class _Event:
    at: float
    seq: int
    step: Step = field(compare=False)
    when: datetime = field(compare=False)


class Timeline:
    def __init__(self, clock: FakeClock):
        self.clock = clock
        self._queue: list[_Event] = []
        self._seq = itertools.count()

    def now(self) -> datetime:
        return self.clock.now()

    def at(self, when: datetime, step: Step) -> None:
        heapq.heappush(self._queue, _Event(when.timestamp(), next(self._seq), step, when))

    def after(self, seconds: float, step: Step) -> None:
        self.at(self.clock.now() + timedelta(seconds=seconds), step)

    def run_until(self, end: datetime) -> None:
        """Run every step due up to `end`, then leave the clock at `end` (or later, if it got there)."""
        while self._queue and self._queue[0].at <= end.timestamp():
            event = heapq.heappop(self._queue)
            if event.when > self.clock.now():
                self.clock.set(event.when)
            event.step()
        self.clock.set(max(self.clock.now(), end))


class Watch:
    """Deadlines the simulator checks at the very instant they pass: a VM that still exists then is a problem."""

    def __init__(self, timeline: Timeline, problem: Callable[[str, str], None]):
        self.timeline = timeline
        self.problem = problem

    def gone_by(self, since: datetime | None, allowed_s: float, name: str, zone: str, alive: Callable[[], bool],
                problem: str) -> None:
        """Flag `problem` if the VM is still `alive()` `allowed_s` after `since`."""
        if since is None:
            return

        def check() -> None:
            if alive():
                self.problem(problem, f"{name} ({zone}) still exists {allowed_s:.0f}s after {since:%Y-%m-%d %H:%M:%S}")

        self.timeline.at(since + timedelta(seconds=allowed_s + 0.001), check)
