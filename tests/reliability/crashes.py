"""A function instance that dies mid-handler, for the tests of durable ends.

A crash is a BaseException raised at the first call (storage, Compute Engine or Pub/Sub) after a
chosen write: nothing after that point of the handler runs, as a timeout, an OOM kill or a recycled instance would leave it.
"""

from __future__ import annotations

from collections.abc import Callable


class Crash(BaseException):
    """The function instance dies here: nothing after this line of the handler runs."""


def crash_after_write(h, matches: Callable[[str, bytes], bool]) -> Callable[[], None]:
    """Arm `h`'s backends: after the first write that `matches` (name, data), the next call to the
    bucket, Compute Engine or Pub/Sub raises Crash. Returns what puts them back as they were."""
    armed: list[bool] = []
    real_write = h.blobs.write

    def write(name, data, **kwargs):
        generation = real_write(name, data, **kwargs)
        if not armed and matches(name, bytes(data)):
            armed.append(True)
        return generation

    def fault(call: str, name: str) -> bool:
        if armed and armed[0]:
            armed[0] = False
            raise Crash(f"killed before {call} {name}")
        return False

    h.blobs.write, h.blobs.fault, h.compute.fault, h.events.fault = write, fault, fault, fault

    def restore() -> None:
        h.blobs.write, h.blobs.fault, h.compute.fault, h.events.fault = real_write, None, None, None

    return restore
