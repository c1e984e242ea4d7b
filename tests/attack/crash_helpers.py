"""A handler killed right after a given call: nothing after that call runs (as in the exploration)."""

from __future__ import annotations


class Crash(BaseException):
    """The handler's instance dies."""


def die_after(h, kind: str, call: str, nth: int = 1) -> None:
    """Arm: the handler dies at its first call of any kind after its nth `kind:call` (which goes through)."""
    seen = {"n": 0, "dying": False}

    def check(this_kind: str):
        def fault(this_call: str, name: str) -> bool:
            if seen["dying"]:
                seen["dying"] = False
                disarm(h)
                raise Crash(f"killed before {this_kind}:{this_call} {name}")
            if (this_kind, this_call) == (kind, call):
                seen["n"] += 1
                seen["dying"] = seen["n"] == nth
            return False
        return fault

    h.compute.fault = check("compute")
    h.blobs.fault = check("storage")
    h.events.fault = check("events")


def disarm(h) -> None:
    h.compute.fault = h.blobs.fault = h.events.fault = None


def call_dying(what):
    """Call an entry point that may die; None when it died."""
    try:
        return what()
    except Crash:
        return None
