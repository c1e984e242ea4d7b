"""The host's GPUs, handed to local "VMs" the way Compute Engine attaches them: each configuration
gets exactly the `count` it names, to itself, and none when it names none.

A GPU configuration whose GPUs are all taken waits for them (its VM exists, its runner starts
when they are free, as a VM still booting); one that asks for more than the host has is told so,
and its run ends with that reason instead of training on the CPU under a GPU's name.
"""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable, Sequence

NVIDIA_SMI_TIMEOUT_S = 20


def host_gpus(nvidia_smi: str = "nvidia-smi") -> tuple[str, ...]:
    """The host's NVIDIA GPUs by nvidia-smi's index; none when it is missing or fails."""
    try:
        answer = subprocess.run([nvidia_smi, "--query-gpu=index", "--format=csv,noheader"], capture_output=True,
                                text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired):
        return ()
    if answer.returncode != 0:
        return ()
    return tuple(line.strip() for line in answer.stdout.splitlines() if line.strip().isdigit())


class GpuPool:
    """Which of the host's GPUs are free; `take` hands out distinct ones, `give_back` returns them."""

    def __init__(self, ids: Sequence[str]):
        self.ids = tuple(ids)
        self._free = list(self.ids)
        self._changed = threading.Condition()
        self._waiting = 0

    @property
    def waiting(self) -> int:
        """How many VMs found too few GPUs free and wait for some: what `up` and tests can see."""
        with self._changed:
            return self._waiting

    @property
    def size(self) -> int:
        return len(self.ids)

    def shortage(self, count: int) -> str | None:
        """Why `count` GPUs can never be had here, or None when they can (perhaps after a wait)."""
        if count <= self.size:
            return None
        if not self.ids:
            return "this host has no NVIDIA GPU (nvidia-smi lists none)"
        return f"this host has {self.size} NVIDIA GPU{'s' if self.size != 1 else ''}, fewer than {count}"

    def try_take(self, count: int) -> tuple[str, ...] | None:
        """`count` free GPUs, lowest first, or None when fewer are free now."""
        with self._changed:
            if len(self._free) < count:
                return None
            taken, self._free = tuple(self._free[:count]), self._free[count:]
            return taken

    def take(self, count: int, give_up: Callable[[], bool], poll_s: float = 0.5) -> tuple[str, ...] | None:
        """Wait until `count` GPUs are free and take them; None once `give_up()` says so.

        `give_up` is called without the pool's lock held: it may take its caller's own lock,
        which that caller holds while it calls `try_take` (one lock order, no deadlock)."""
        waited = False
        try:
            while not give_up():
                taken = self.try_take(count)
                if taken is not None:
                    return taken
                with self._changed:
                    if not waited:
                        waited, self._waiting = True, self._waiting + 1
                    self._changed.wait(poll_s)
            return None
        finally:
            if waited:
                with self._changed:
                    self._waiting -= 1

    def give_back(self, ids: Sequence[str]) -> None:
        with self._changed:
            self._free = sorted({*self._free, *ids}, key=self.ids.index)
            self._changed.notify_all()
