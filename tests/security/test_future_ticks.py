"""A start message whose `tick` attribute names a *future* fire time of the deployed schedule.

Before: it ran at once, under that future tick's run id, so the real tick later found its run
already there and started nothing.

Position (a): can publish on the start topic (or edit a scheduler entry's attributes). The
message is the deployed job's own {job, digest} (the scheduler entry's body, also readable as
deployed/JOB.json by a bucket reader), plus `tick`, which start_job accepts in every scheduling
mode and checked only for being *a* fire time (ticks.exact_tick), never for being in the past.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from spotcron.engine.deployed import SpecStore, start_body
from spotcron.engine.messages import TICK_ATTRIBUTE
from spotcron.testing.harness import make_spec

NOW = datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)


def test_a_future_tick_starts_nothing_now(h):
    spec = make_spec()  # "0 */4 * * *": the next fire times are 16:00, 20:00, 00:00, ...
    SpecStore(h.blobs).write(spec)
    ticks = [NOW.replace(minute=0, second=0) + timedelta(hours=4 * k) for k in range(1, 7)]
    for tick in ticks:
        h.start(start_body(spec), attributes={TICK_ATTRIBUTE: tick.strftime("%Y-%m-%dT%H:%M:%SZ")})
    states = {r.run_id: f"{r.state} ({r.reason})" if r.reason else str(r.state) for r in h.records("bot")}
    assert h.compute.created == [] and states == {}, (
        f"at {NOW:%H:%M} one publisher's messages for the next day's ticks started {len(h.compute.created)} VM(s) "
        f"now and recorded every later tick already: {states}; when those ticks come they find their run ids "
        f"taken and start nothing")


def test_the_real_tick_still_runs_after_a_message_named_it_early(h):
    spec = make_spec()
    SpecStore(h.blobs).write(spec)
    tick = NOW.replace(hour=16, minute=0, second=0)
    h.start(start_body(spec), attributes={TICK_ATTRIBUTE: "2026-11-22T16:00:00Z"})  # at 12:00, by the attacker
    if h.compute.created:
        h.finish_ok("bot", "20261122-1600")
    before = len(h.compute.created)
    h.clock.set(tick + timedelta(seconds=5))
    h.start(spec)  # the scheduler entry's own message at 16:00
    assert len(h.compute.created) == before + 1, (
        f"the 16:00 run started at 12:00 on the attacker's message and ended; at 16:00 the real tick started "
        f"nothing (run 20261122-1600 is {h.record('bot', '20261122-1600').state})")


def test_future_ticks_do_not_prune_the_jobs_real_history(h):
    """Skipped future runs end at once, and each run end prunes the job's history by run id: the
    future ids sort last, so the job's real, succeeded runs (records and results) are deleted."""
    spec = make_spec(history_limit=3)
    SpecStore(h.blobs).write(spec)
    real = []
    for hour in (0, 4, 8, 12):
        h.clock.set(NOW.replace(hour=hour, minute=0, second=5))
        h.start(spec)
        run_id = f"20261122-{hour:02d}00"
        h.finish_ok("bot", run_id)
        real.append(run_id)
    kept = [r for r in real[-3:] if h.blobs.peek(f"runs/bot/{r}/run.json") is not None]
    assert len(kept) == 3  # history_limit 3 keeps the last three real runs
    for k in range(1, 5):  # the attacker, at 12:00, names the next four fire times
        tick = NOW.replace(minute=0, second=0) + timedelta(hours=4 * k)
        h.start(start_body(spec), attributes={TICK_ATTRIBUTE: tick.strftime("%Y-%m-%dT%H:%M:%SZ")})
    gone = [r for r in real[-3:] if h.blobs.peek(f"runs/bot/{r}/run.json") is None]
    results_gone = [r for r in real[-3:] if h.blobs.peek(f"runs/bot/{r}/attempt-1/results/out.json") is None]
    assert gone == [], (f"four start messages for future ticks deleted the records of succeeded runs {gone} "
                        f"(results gone: {results_gone}); what is left: {sorted(r.run_id for r in h.records('bot'))}")


def test_a_future_tick_does_not_replace_the_running_run(h):
    """With `concurrency: replace`, the early run deletes the legitimate run's working VM."""
    spec = make_spec(concurrency="replace")
    h.start(spec)  # the real 12:00 run, working
    assert h.record("bot", "20261122-1200").state == "running"
    h.start(start_body(spec), attributes={TICK_ATTRIBUTE: "2026-11-22T16:00:00Z"})
    legit = h.record("bot", "20261122-1200")
    assert legit.state == "running" and "sc-bot-20261122-1200-a1" in h.live_vms(), (
        f"a message naming the 16:00 tick at 12:00 replaced the working 12:00 run: it is {legit.state} "
        f"({legit.reason}); live VMs: {h.live_vms()}")


def test_far_future_ticks_do_not_make_every_later_run_delete_its_own_results(h):
    """Three messages naming fire times in 2099 leave three runs whose ids sort after every real
    one; with history_limit 3 each real run, when it ends, prunes itself: records and results."""
    spec = make_spec(history_limit=3)
    SpecStore(h.blobs).write(spec)
    planted = ["2099-01-01T00:00:00Z", "2099-01-01T04:00:00Z", "2099-01-01T08:00:00Z"]
    for tick in planted:
        h.start(start_body(spec), attributes={TICK_ATTRIBUTE: tick})
    for record in h.records("bot"):
        if not record.terminal:
            h.finish_ok("bot", record.run_id)  # the one planted run that got a VM ends normally
    h.clock.set(NOW.replace(hour=16, minute=0, second=5))
    h.start(spec)  # the real 16:00 tick
    h.finish_ok("bot", "20261122-1600")
    kept = h.blobs.peek("runs/bot/20261122-1600/attempt-1/results/out.json")
    assert kept is not None, (
        f"the real 16:00 run succeeded and was pruned at once, results and all; the job's history is "
        f"{sorted(r.run_id for r in h.records('bot'))} and pruned/bot says {h.deps.store.pruned_through('bot')}")
