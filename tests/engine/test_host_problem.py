"""A run the host can never run (Deps.host_problem: local mode's missing GPU) ends `skipped` before
admission: no admission written, no VM, no place in the queue; the run behind it starts at once."""

from __future__ import annotations

from spotcron.core import layout
from spotcron.core.settings import Limits
from spotcron.testing.harness import Harness, make_spec

RUN = "20261122-1200"
T4 = {"type": "n1-standard-8", "gpu": {"type": "nvidia-tesla-t4", "count": 1}}
LACKS = "the configuration asks for nvidia-tesla-t4 x1, and this host has no NVIDIA GPU; not run on the CPU"


def test_a_run_the_host_lacks_hardware_for_takes_no_room_and_holds_no_one_up():
    h = Harness(limits=Limits(max_live_vms=1, manual_share=1.0))
    try:
        h.deps.host_problem = lambda spec: LACKS if spec.machine.gpu else None
        h.start(make_spec(name="bench", machine=T4))
        record = h.record("bench", RUN)
        assert record.state == "skipped" and record.reason == f"not run on this host: {LACKS}"
        assert [a.outcome for a in record.attempts] == ["unavailable"] and not record.had_vm
        assert "queued" not in {change.state for change in record.history}
        assert h.live_vms() == [] and h.blobs.list(layout.LIMITS) == []  # never admitted
        assert h.deps.store.live_index() == []  # no marker: nothing waits on it
        h.start(make_spec(name="bot"))
        assert h.record("bot", RUN).state == "running"
    finally:
        h.close()
