"""notifications.previous_counted reads at most LOOK_BACK (30) run ids before a run to find the
job's previous counted run. Manual runs skipped because a scheduled run of their job is live count
for nothing (by design), yet each takes one of those 30 places. A publisher on the start topic
sends 30 manual starts while a tick runs under `forbid`: all are skipped, and the next run's end
finds no previous counted run, so a recovery is never announced ("recovered" lost) and a failure
streak is announced again on every failing tick.
"""

from __future__ import annotations

import json

from spotcron.engine.notifications import LOOK_BACK
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
