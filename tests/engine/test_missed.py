"""Missed ticks leave a trace: one collapsed `missed` record per streak, notified like a failure."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from spotcron.engine.missed import LOCAL_REASON, read_watermark, record_missed
from spotcron.runtime import entrypoints
from spotcron.runtime.run_end import install
from spotcron.testing.harness import Harness, make_spec

HOOK = "http://hooks.example/spotcron"


def posts():
    sent: list[dict] = []

    def post(url, data, headers):
        sent.append(json.loads(data))
        return 200

    return sent, post


def every_minute(**fields):
    return make_spec(schedule="* * * * *", starting_deadline="2m", notify={"webhook": HOOK}, **fields)


def test_ticks_missed_while_up_was_stopped_become_one_record_and_one_notification(h):
    sent, post = posts()
    install(h.deps, post=post, secrets=None)
    spec = every_minute()
    h.deploy(spec)  # the spec is deployed at 12:00:05
    reason = lambda tick: LOCAL_REASON  # noqa: E731
    assert record_missed(h.deps, [spec], {"bot": h.clock.now()}, reason=reason) == []
    h.clock.advance(3 * 3600)  # `up` stopped for three hours: no tick fired
    found = record_missed(h.deps, [spec], {"bot": datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)}, reason=reason)
    assert len(found) == 1
    record = h.record("bot", "20261122-1200")
    assert record.state == "missed" and record.reason == LOCAL_REASON
    assert record.missed_ticks == 179 and record.missed_until == datetime(2026, 11, 22, 14, 58, tzinfo=UTC)
    assert record.owed == ()
    assert [m["event"] for m in sent] == ["missed"] and sent[0]["missed_ticks"] == 179
    # Still down: the next pass extends the same record and notifies nothing more.
    h.clock.advance(600)
    record_missed(h.deps, [spec], {"bot": datetime(2026, 11, 22, 12, 0, 5, tzinfo=UTC)}, reason=reason)
    record = h.record("bot", "20261122-1200")
    assert record.missed_ticks == 189 and len(h.records("bot")) == 1 and len(sent) == 1
    assert len(h.events.of_type("run.finished")) == 1


def test_a_tick_that_started_ends_the_streak_and_its_success_notifies_recovery(h):
    sent, post = posts()
    install(h.deps, post=post, secrets=None)
    spec = every_minute()
    h.deploy(spec)
    deployed = {"bot": h.clock.now()}
    h.clock.advance(600)  # 12:10:05: ticks 12:01..12:08 are past their deadline
    record_missed(h.deps, [spec], deployed, reason=lambda tick: "down")
    h.start(spec)  # the 12:10 tick starts
    h.clock.advance(30)
    h.finish_ok("bot", "20261122-1210")
    assert [m["event"] for m in sent] == ["missed", "recovered"]
    h.clock.advance(600)
    record_missed(h.deps, [spec], deployed, reason=lambda tick: "down")
    missed = [r for r in h.records("bot") if r.state == "missed"]
    assert [(r.run_id, r.missed_ticks) for r in missed] == [("20261122-1200", 10), ("20261122-1211", 8)], \
        "the tick that ran splits the streak in two records"
    assert [m["event"] for m in sent] == ["missed", "recovered", "missed"]


def test_a_paused_job_and_ticks_before_its_deploy_are_not_missed(h):
    spec = every_minute(paused=True)
    h.clock.advance(3600)
    assert record_missed(h.deps, [spec], {}, reason=lambda tick: "x") == []
    live = every_minute()
    assert record_missed(h.deps, [live], {"bot": h.clock.now()}, reason=lambda tick: "x") == []
    assert h.records("bot") == []


def test_a_tick_the_dispatcher_published_whose_start_function_failed_is_recorded():
    h = Harness(scheduling="shared", now=datetime(2026, 11, 22, 11, 59, 30, tzinfo=UTC))
    try:
        spec = make_spec(schedule="0 12 * * *", starting_deadline="5m")
        h.deploy(spec)
        h.clock.advance(40)  # 12:00:10
        assert h.dispatch().status_code == 200
        assert [p.data["job"] for p in h.events.published if p.topic == h.settings.start_topic] == ["bot"]
        # start_job fails on that message every time (a broken deploy): no record is ever made. The
        # sweep the dispatcher fires on its interval records the tick, with the dispatcher's word.
        for _ in range(10):
            h.clock.advance(60)
            h.dispatch()
        assert len([p for p in h.events.published if p.topic == h.settings.sweep_topic]) >= 2
        h.sweep()  # 12:10: the hourly pass is not due yet
        assert h.records("bot") == []
        h.clock.advance(50 * 60)
        h.dispatch()
        h.sweep()  # 13:00: its first sweep makes the pass
        record = h.record("bot", "20261122-1200")
        assert record.state == "missed" and record.missed_ticks == 1
        assert "the dispatcher published its start message but start_job recorded no run" in record.reason
        assert read_watermark(h.deps, "bot").through == datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    finally:
        entrypoints.use(None)


def test_the_sweep_records_missed_ticks_in_per_job_mode(h):
    spec = make_spec(schedule="0 12 * * *", starting_deadline="5m")
    h.deploy(spec)
    h.clock.advance(timedelta(days=1).total_seconds())
    h.sweep()
    record = h.record("bot", "20261122-1200")
    assert record.state == "missed" and "scheduler entry paused or deleted" in record.reason


def test_up_records_the_ticks_that_fell_while_it_was_stopped_and_prints_them(h):
    """`up`'s start-up pass (LocalStack.record_missed) over the bucket's deployed specs, on the
    harness's bucket and clock: `up` ran at 12:00, was stopped, and starts again three hours later."""
    from types import SimpleNamespace

    from spotcron.engine.deployed import SpecStore
    from spotcron.local.stack import LOCAL_MISSED, LocalStack

    sent, post = posts()
    lines: list[str] = []
    install(h.deps, post=post, secrets=None, announce=lines.append)
    up = SimpleNamespace(deps=h.deps, notify=lines.append)
    SpecStore(h.blobs).deploy([every_minute()])
    assert LocalStack.record_missed(up) == []
    h.clock.advance(3 * 3600)
    [found] = LocalStack.record_missed(up)
    record = h.record("bot", found.run_id)
    assert record.state == "missed" and record.reason == LOCAL_MISSED and record.missed_ticks == 179
    assert [m["event"] for m in sent] == ["missed"]
    assert "bot: 179 tick(s) missed while spotcron up was not running (record bot/20261122-1200)" in lines
