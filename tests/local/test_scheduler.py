"""The local stand-in for Cloud Scheduler, stepped on a fake clock."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta

from spotcron.core.loader import load_jobs
from spotcron.local.scheduler import LocalScheduler
from spotcron.testing.memory import FakeClock

from .conftest import write_job

JOB = """\
schedule: "{schedule}"
time_zone: {zone}
image: spotcron/test:latest
paused: {paused}
local: {{command: [true]}}
"""


class Recorder:
    def __init__(self):
        self.messages = []

    def __call__(self, topic, data, attributes):
        self.messages.append((topic, json.loads(data)))
        return str(len(self.messages))

    def fired(self):
        return [body["job"] for topic, body in self.messages if topic == "start"]


def scheduler(tmp_path, clock, recorder):
    jobs = tmp_path / "jobs"
    return LocalScheduler(lambda: load_jobs([jobs]), recorder, clock, start_topic="start", sweep_topic="sweep",
                          sweep_interval_s=300, watch=[jobs])


def test_jobs_fire_at_their_cron_times_in_their_zone(tmp_path):
    write_job(tmp_path / "jobs", "every5", JOB.format(schedule="*/5 * * * *", zone="Etc/UTC", paused="false"))
    write_job(tmp_path / "jobs", "berlin", JOB.format(schedule="30 9 * * *", zone="Europe/Berlin", paused="false"))
    write_job(tmp_path / "jobs", "paused", JOB.format(schedule="* * * * *", zone="Etc/UTC", paused="true"))
    clock, recorder = FakeClock(datetime(2026, 11, 22, 8, 2, 30, tzinfo=UTC)), Recorder()
    s = scheduler(tmp_path, clock, recorder)
    s.reload()
    assert s.upcoming() == {"every5": datetime(2026, 11, 22, 8, 5, tzinfo=UTC),
                            "berlin": datetime(2026, 11, 22, 8, 30, tzinfo=UTC)}  # 09:30 CET
    assert s.step() == datetime(2026, 11, 22, 8, 5, tzinfo=UTC) and recorder.messages == []
    clock.set(datetime(2026, 11, 22, 8, 5, tzinfo=UTC))
    s.step()
    clock.set(datetime(2026, 11, 22, 8, 5, 40, tzinfo=UTC))
    s.step()
    assert recorder.fired() == ["every5"]  # once per tick, and the paused job never
    clock.set(datetime(2026, 11, 22, 8, 30, tzinfo=UTC))
    s.step()
    # every5's ticks 08:10..08:30 collapse into one fire; the next is 08:35, not a burst of catch-ups
    assert sorted(recorder.fired()) == ["berlin", "every5", "every5"]
    assert s.upcoming()["every5"] == datetime(2026, 11, 22, 8, 35, tzinfo=UTC)
    s.step()
    assert len(recorder.fired()) == 3
    assert [t for t, _ in recorder.messages].count("sweep") == 1
    # The job's name and spec digest, as its Cloud Scheduler entry sends: never the spec itself.
    assert set(recorder.messages[0][1]) == {"job", "digest"}


def test_an_edited_job_file_is_reloaded(tmp_path):
    path = write_job(tmp_path / "jobs", "edited", JOB.format(schedule="0 * * * *", zone="Etc/UTC", paused="false"))
    clock, recorder = FakeClock(datetime(2026, 11, 22, 8, 2, tzinfo=UTC)), Recorder()
    s = scheduler(tmp_path, clock, recorder)
    s.reload()
    assert s.upcoming()["edited"] == datetime(2026, 11, 22, 9, 0, tzinfo=UTC)
    path.write_text(JOB.format(schedule="10 * * * *", zone="Etc/UTC", paused="false"))
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000_000))
    s.step()
    assert s.upcoming()["edited"] == datetime(2026, 11, 22, 8, 10, tzinfo=UTC)


def test_a_reload_request_picks_up_a_removed_job_and_a_broken_file_keeps_the_old_jobs(tmp_path):
    path = write_job(tmp_path / "jobs", "gone", JOB.format(schedule="0 * * * *", zone="Etc/UTC", paused="false"))
    clock, recorder = FakeClock(datetime(2026, 11, 22, 8, 2, tzinfo=UTC)), Recorder()
    s = scheduler(tmp_path, clock, recorder)
    s.reload()
    path.write_text("schedule: [not, a, cron]\n")
    s.request_reload()
    s.step()
    assert list(s.upcoming()) == ["gone"]  # the broken file did not stop the scheduler
    path.unlink()
    s.request_reload()
    s.step()
    assert s.upcoming() == {}


def test_a_failed_publish_is_tried_again_and_does_not_end_the_scheduler(tmp_path):
    """Before: an exception in a step (the Pub/Sub emulator not answering) ended the scheduler's
    thread without a word; `spotcron up` kept waiting and no job ever fired again."""
    import threading

    write_job(tmp_path / "jobs", "every1", JOB.format(schedule="* * * * *", zone="Etc/UTC", paused="false"))
    clock, recorder, failures = FakeClock(datetime(2026, 11, 22, 8, 0, 30, tzinfo=UTC)), Recorder(), []
    published = threading.Event()

    def flaky(topic, data, attributes):
        if topic == "start" and not failures:
            failures.append(topic)
            raise ConnectionError("the emulator did not answer")
        published.set()
        return recorder(topic, data, attributes)

    s = LocalScheduler(lambda: load_jobs([tmp_path / "jobs"]), flaky, clock, start_topic="start",
                       sweep_topic="sweep", sweep_interval_s=300, poll_s=0.05).start()
    try:
        clock.set(datetime(2026, 11, 22, 8, 1, tzinfo=UTC))
        assert published.wait(5), "the scheduler stopped after the failed publish"
        assert failures == ["start"] and recorder.fired() == ["every1"]  # the same tick, once
    finally:
        s.stop()


def _every_minute(name: str = "minutely"):
    from spotcron.core.spec import JobSpec

    return JobSpec.from_payload({"name": name, "schedule": "* * * * *", "image": "spotcron/test:latest",
                                 "local": {"command": ["true"]}})


def test_a_reload_at_any_offset_around_a_tick_never_loses_it():
    """Before: a reload computed the next fire from the moment it finished, so a job file changed
    (a comment edited, a broken `timeout:` fixed) just before :00 and noticed by the scheduler's
    poll just after it moved the job to the next minute: the :00 run never happened, unlogged."""
    tick = datetime(2026, 11, 22, 8, 1, tzinfo=UTC)
    offsets_ms = range(-2000, 2001, 100)  # the poll notices a change up to poll_s (2 s) after it
    for case in ("comment edited", "broken file fixed"):
        lost, doubled = [], []
        for offset_ms in offsets_ms:
            job = _every_minute()
            loaded = [job] if case == "comment edited" else []  # a broken file loads no job
            clock, recorder = FakeClock(tick - timedelta(seconds=5)), Recorder()
            s = LocalScheduler(lambda loaded=loaded: list(loaded), recorder, clock, start_topic="start",
                               sweep_topic="sweep", sweep_interval_s=300)
            s.reload()
            s.step()
            clock.set(tick + timedelta(milliseconds=offset_ms))
            loaded[:] = [job]
            s.request_reload()
            s.step()
            clock.set(tick + timedelta(seconds=10))
            s.step()
            fired = len(recorder.fired())
            (lost if fired == 0 else doubled if fired > 1 else []).append(offset_ms)
        assert (lost, doubled) == ([], []), f"{case}: tick lost at offsets (ms) {lost}, fired twice at {doubled}"
