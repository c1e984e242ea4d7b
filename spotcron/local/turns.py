"""Benchmark runs of one job take turns on the local host, so every repeat gets the same host.

Run side by side, the runs of a benchmark measure each other: nine PyTorch runs on two cores,
each given a thread count from how many were alive when it started, made one repeat 5.7x
slower than its siblings. On Google Cloud each run has a VM of its own; the nearest a single
host comes to that is one run of the job at a time, every one with the whole host (the same
thread count, the same cores). The total time hardly changes on a busy host: runs that share
the cores take as long together as they take one after another.

The order is interleaved: among the runs of a job waiting for their turn, the one with the
lowest repeat number goes first (then the oldest), so a tick's `r1` of every configuration runs
before any `r2`, and a drift of the host (another job starting, a warming CPU) spreads over the
configurations instead of landing on the last one. A VM waiting for its turn exists, like a VM
still booting; its wait counts as boot in its phases and against its timeout, as a wait for a
host GPU does.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

_REPEAT = re.compile(r"-r(\d+)\Z")


def repeat_number(run_id: str) -> int:
    """`r2` of `20260101-0300-e2-std-4-r2` is 2; a run without repeats is its configuration's first."""
    match = _REPEAT.search(run_id)
    return int(match[1]) if match else 1


@dataclass
class _Queue:
    holder: str | None = None
    waiting: dict[str, tuple[int, int]] = field(default_factory=dict)  # VM name → (repeat, arrival)


class Turns:
    """Per group (a job), at most one VM holds the turn; `take` waits for it, in interleaved order."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._queues: dict[str, _Queue] = {}
        self._arrivals = 0

    def waiting(self, group: str) -> int:
        with self._changed:
            queue = self._queues.get(group)
            return len(queue.waiting) if queue else 0

    def holder(self, group: str) -> str | None:
        with self._changed:
            queue = self._queues.get(group)
            return queue.holder if queue else None

    def enqueue(self, group: str, name: str, run_id: str) -> None:
        """Line `name` up for its group's turn (before `take`, so the order is the order of creation)."""
        with self._changed:
            self._arrivals += 1
            self._queues.setdefault(group, _Queue()).waiting[name] = (repeat_number(run_id), self._arrivals)
            self._changed.notify_all()

    def take(self, group: str, name: str, give_up: Callable[[], bool], poll_s: float = 0.5) -> bool:
        """Wait until `name` is first in line and the turn is free, and take it; False once `give_up()`
        says so (the VM was deleted while it waited). `give_up` is called without this lock held."""
        while not give_up():
            with self._changed:
                queue = self._queues[group]
                if queue.holder is None and min(queue.waiting, key=queue.waiting.__getitem__) == name:
                    del queue.waiting[name]
                    queue.holder = name
                    return True
                self._changed.wait(poll_s)
        self.leave(group, name)
        return False

    def leave(self, group: str, name: str) -> None:
        """`name` is gone: its turn (or its place in line) passes on."""
        with self._changed:
            queue = self._queues.get(group)
            if queue is None:
                return
            queue.waiting.pop(name, None)
            if queue.holder == name:
                queue.holder = None
            if queue.holder is None and not queue.waiting:
                del self._queues[group]
            self._changed.notify_all()
