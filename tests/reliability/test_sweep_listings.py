"""The sweep's two listings (the managed VMs, the live index) meeting transient errors.

The sweep is not retried by Pub/Sub (its retry policy is "do not retry": the next tick comes
anyway), so a listing that raised took the whole sweep with it: an overdue VM whose
maxRunDuration Compute enforced late outlived its deadline by two sweep intervals, and a run
whose VM vanished waited five more minutes. The seeded month found it once its transient errors
reached every Compute call.
"""

from __future__ import annotations

from datetime import timedelta

from spotcron.core import layout
from spotcron.core.runs import RunState
from spotcron.testing.harness import make_spec

RUN = "20261122-1200"
ZONE = "us-central1-a"


def _overdue_and_vanished(h):
    """bot's VM alive past its deadline (Compute late), other's VM gone without a callback."""
    bot, other = make_spec(name="bot"), make_spec(name="other")
    for spec in (bot, other):
        assert h.start(spec).status_code == 200
    bot_vm, other_vm = "sc-bot-20261122-1200-a1", "sc-other-20261122-1200-a1"
    h.compute.delay_max_run_duration(ZONE, bot_vm, 6 * 3600)
    h.compute.preempt(ZONE, other_vm)
    h.clock.advance(11 * 60 + h.settings.grace + 1)  # timeout 10 min: bot's VM is past its deadline
    assert h.compute.enforce_max_run_duration() == []
    return bot_vm, other_vm


def _failing(call_wanted: str, times: int | None = None):
    seen = []

    def fault(call: str, name: str) -> bool:
        if call != call_wanted:
            return False
        seen.append(name)
        return times is None or len(seen) <= times
    return fault


def test_a_sweep_whose_vm_listing_keeps_failing_still_reaps_what_the_live_index_names(h):
    bot_vm, other_vm = _overdue_and_vanished(h)
    h.compute.fault = _failing("list")
    assert h.sweep().status_code == 200
    h.compute.fault = None
    assert h.live_vms() == []
    assert h.record("bot", RUN).state == RunState.TIMED_OUT
    assert h.record("other", RUN).history[-1].at == h.clock.now()  # its vanished VM was seen to


def test_a_sweep_whose_vm_listing_fails_once_lists_again_and_does_all_its_work(h):
    bot_vm, other_vm = _overdue_and_vanished(h)
    h.compute.fault = _failing("list", times=1)
    listed_before = h.compute.calls["list"]
    assert h.sweep().status_code == 200
    assert h.compute.calls["list"] == listed_before + 1  # the failed call raised before it counted
    assert bot_vm not in h.live_vms()
    assert h.record("bot", RUN).state == RunState.TIMED_OUT
    assert h.record("other", RUN).history[-1].at == h.clock.now()


def test_a_sweep_whose_live_index_listing_keeps_failing_reaps_overdue_vms_and_nothing_live(h):
    bot_vm, other_vm = _overdue_and_vanished(h)
    fresh = make_spec(name="fresh", timeout="1h", starting_deadline="1h")
    assert h.start(fresh).status_code == 200  # inside its deadline
    h.blobs.fault = lambda call, name: call == "list" and name == layout.LIVE
    assert h.sweep().status_code == 200
    h.blobs.fault = None
    assert h.live_vms() == ["sc-fresh-20261122-1200-a1"]  # the overdue one went, by its own metadata
    assert h.record("fresh", RUN).state == RunState.RUNNING
    h.clock.advance(timedelta(seconds=h.settings.sweep_interval).total_seconds())
    assert h.sweep().status_code == 200  # the next sweep sees the index again and ends both runs
    assert h.record("bot", RUN).state == RunState.TIMED_OUT
    assert h.record("other", RUN).history[-1].at == h.clock.now()


def test_a_delete_that_meets_a_transient_error_is_tried_again_in_the_same_sweep(h):
    """Before: the stopped or overdue VM outlived the sweep and billed until the next one (the
    seeded month's `stopped_lingering`), because nothing retries a sweep."""
    bot_vm, _ = _overdue_and_vanished(h)
    h.compute.fault = _failing("delete", times=1)
    assert h.sweep().status_code == 200
    h.compute.fault = None
    assert bot_vm not in h.live_vms()
    assert h.record("bot", RUN).state == RunState.TIMED_OUT
