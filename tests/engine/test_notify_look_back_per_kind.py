"""notifications.previous_counted reads at most LOOK_BACK records of each kind, scheduled and manual
(a manual run's id starts with `m`), to find the job's previous counted run. Manual runs skipped
because a scheduled run of their job is live count for nothing, and anyone who may publish a start
can ask for them: a flood of them must not push the last ticks out of the look-back, or a recovery
is never announced and a failure streak is announced again on every failing tick.
"""

from __future__ import annotations

import json

from spotcron.engine.notifications import LOOK_BACK, previous_counted
from spotcron.runtime.run_end import install
from spotcron.testing.harness import make_spec


class Receiver:
    def __init__(self):
        self.events: list[str] = []

    def __call__(self, url, data, headers):
        if data:
            self.events.append(json.loads(data)["event"])
        return 200


def test_skipped_manual_runs_do_not_hide_the_previous_run_from_the_recovery_notice(h):
    receiver = Receiver()
    install(h.deps, post=receiver, secrets=None)
    spec = make_spec(name="hourly", schedule="0 * * * *", timeout="50m", concurrency="forbid",
                     notify={"webhook": "https://hooks.example/x", "on": ["failure", "recovered"]})
    h.start(spec)  # 12:00 tick, running
    for i in range(LOOK_BACK):  # the publisher, while it runs: each manual start is skipped
        h.clock.advance(30)
        h.run_now(spec, nonce=f"{i:04x}")
    assert all(r.state == "skipped" for r in h.records("hourly") if r.run_id.startswith("m"))
    h.upload("hourly", "20261122-1200", exit_code=1)
    h.callback("hourly", "20261122-1200", exit_code=1)  # the 12:00 tick fails: "failure"
    h.sweep()
    h.clock.set(h.clock.now().replace(hour=13, minute=0, second=5))
    h.start(spec)
    h.finish_ok("hourly", "20261122-1300")  # 13:00 succeeds: "recovered" is owed
    h.sweep()
    assert receiver.events == ["failure", "recovered"], (
        f"notifications sent: {receiver.events}; {LOOK_BACK} skipped manual runs between the failed and the "
        f"succeeded tick hid the failure, so the recovery was never announced")


def test_a_flood_of_manual_runs_costs_at_most_look_back_reads_and_the_ticks_are_still_read(h, monkeypatch):
    from spotcron.engine.store import RunStore

    spec = make_spec(name="hourly", schedule="0 * * * *", timeout="50m", concurrency="forbid")
    h.start(spec)  # 12:00 tick
    for i in range(3 * LOOK_BACK):
        h.clock.advance(30)
        h.run_now(spec, nonce=f"{i:04x}")
    h.finish_ok("hourly", "20261122-1200")
    h.clock.set(h.clock.now().replace(hour=13, minute=0, second=5))
    h.start(spec)
    record = h.record("hourly", "20261122-1300")
    reads: list[str] = []
    store_read = RunStore.read

    def counted_read(store, job, run_id):
        reads.append(run_id)
        return store_read(store, job, run_id)

    monkeypatch.setattr(RunStore, "read", counted_read)
    previous = previous_counted(h.deps, record)
    assert previous is not None and previous.run_id == "20261122-1200"
    assert sum(r.startswith("m") for r in reads) == LOOK_BACK, "manual runs past LOOK_BACK are stepped over unread"
