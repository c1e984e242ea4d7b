"""Following runs without click and without waiting: the loops get an in-memory bucket, a sleep that
moves the runs on, and a list as their output."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from spotcron.core.errors import SpotcronError
from spotcron.core.runs import RunState
from spotcron.present.follow import Streams, ended_line, follow_run, wait_for_runs
from spotcron.present.logs import RunOutput
from tests.cli.conftest import NOW, Bucket, make_attempt, make_record

JOB, RUN = "bot", "20260302-1100"


class Steps:
    """A sleep that makes the next scripted change instead of waiting, and counts its calls."""

    def __init__(self, *steps: Callable[[], None]):
        self.steps = list(steps)
        self.calls: list[float | None] = []

    def __call__(self, seconds: float | None = None) -> None:
        self.calls.append(seconds)
        if not self.steps:
            pytest.fail("waited again after the last scripted change")
        self.steps.pop(0)()


def running(bucket: Bucket, run_id: str = RUN, text: str = "") -> None:
    bucket.add(make_record(JOB, run_id, "running", created=NOW - timedelta(minutes=1)))
    if text:
        bucket.logs(JOB, run_id, 1, text)


def end(bucket: Bucket, run_id: str = RUN, state: str = RunState.SUCCEEDED, **fields) -> Callable[[], None]:
    return lambda: bucket.store.update(JOB, run_id, lambda r: r.with_state(state, NOW, **fields))


def test_follow_run_writes_the_output_as_it_comes_and_returns_the_ended_record():
    bucket, written, waiting = Bucket(), [], []
    running(bucket, text="one\n")

    def finish() -> None:
        bucket.logs(JOB, RUN, 1, "one\ntwo\nthree\n")
        end(bucket, exit_code=0)()

    sleep = Steps(lambda: bucket.logs(JOB, RUN, 1, "one\ntwo\n"), finish)
    output = RunOutput(JOB, RUN)
    record = follow_run(bucket.store.read, bucket.blobs, output, where="the bucket", write=written.append,
                        sleep=sleep, waiting=waiting.append)
    assert "".join(written) == "one\ntwo\nthree\n"
    assert record.state == RunState.SUCCEEDED and len(sleep.calls) == 2
    assert waiting == [f"{JOB}/{RUN} is running; waiting for more output…"] * 2
    assert ended_line(output, record) == f"{JOB}/{RUN} ended succeeded"


def test_follow_run_looks_once_more_after_the_end():
    """The record may say ended before this poll's read saw the last upload."""
    bucket, written = Bucket(), []
    running(bucket, text="tick 0\n")
    reads = {"stale": False}
    original = bucket.blobs.read_range

    def lagging(name, start, size):
        if reads["stale"]:
            reads["stale"] = False
            return b""
        return original(name, start, size)

    def finish() -> None:
        bucket.logs(JOB, RUN, 1, "tick 0\ntick 1\n")
        end(bucket, exit_code=0)()
        reads["stale"] = True

    bucket.blobs.read_range = lagging
    follow_run(bucket.store.read, bucket.blobs, RunOutput(JOB, RUN), where="the bucket", write=written.append,
               sleep=Steps(finish))
    assert "".join(written) == "tick 0\ntick 1\n"


def test_follow_run_errors_for_a_vanished_run_and_an_attempt_that_never_came():
    bucket = Bucket()
    with pytest.raises(SpotcronError, match=r"run bot/20260302-1100 disappeared from gs://b \(pruned\?\)"):
        follow_run(lambda job, run: None, bucket.blobs, RunOutput(JOB, RUN), where="gs://b", write=print,
                   sleep=Steps())
    running(bucket)
    end(bucket, RUN, RunState.FAILED, reason="exit 1", exit_code=1)()
    output = RunOutput(JOB, RUN, attempt=2)
    with pytest.raises(SpotcronError, match="attempt 2"):
        follow_run(bucket.store.read, bucket.blobs, output, where="gs://b", write=print, sleep=Steps())


def test_the_ended_line_says_when_a_run_printed_nothing():
    bucket = Bucket()
    running(bucket)
    end(bucket, RUN, RunState.FAILED, reason="exit 1", exit_code=1)()
    output = RunOutput(JOB, RUN)
    record = follow_run(bucket.store.read, bucket.blobs, output, where="b", write=lambda text: None, sleep=Steps())
    assert ended_line(output, record) == f"{JOB}/{RUN} ended failed: exit 1 (no logs)"


def test_streams_label_each_runs_lines_and_exit_with_the_jobs_code():
    bucket, written, notices, reports = Bucket(), [], [], []
    first, second = f"{RUN}-a", f"{RUN}-b"
    running(bucket, first, "a1\n")
    running(bucket, second, "b1\n")
    streams = Streams(False, write=written.append, notice=notices.append, report=reports.append)
    streams.start([(JOB, first), (JOB, second)])
    streams.poll(bucket.blobs, [bucket.store.read(JOB, first), bucket.store.read(JOB, second)])
    retry = make_attempt(JOB, second, 2, start=NOW, seconds=None)
    bucket.store.update(JOB, second, lambda r: r.with_attempt(retry, NOW))
    bucket.logs(JOB, second, 2, "b2\n")
    end(bucket, first, exit_code=0)()
    end(bucket, second, RunState.FAILED, reason="exit\n  3", exit_code=3)()
    records = [bucket.store.read(JOB, first), bucket.store.read(JOB, second)]
    streams.poll(bucket.blobs, records)
    assert streams.outcome(records) == 3
    assert "".join(written) == f"{first} | a1\n{second} | b1\n{second} | b2\n"
    assert notices == [f"{second}: -- attempt 2 --"]
    assert reports == [f"{JOB}/{first} succeeded, exit 0", f"{JOB}/{second} failed, exit 3: exit 3"]


def test_streams_exit_1_for_a_run_that_never_ended():
    bucket = Bucket()
    running(bucket)
    streams = Streams(False, write=lambda text: None)
    streams.start([(JOB, RUN)])
    assert streams.outcome([bucket.store.read(JOB, RUN)]) == 1
    assert streams.outcome([]) == 1


def test_wait_for_runs_polls_until_every_run_ended_and_once_more():
    bucket, polls, waits = Bucket(), [], []
    running(bucket, "r1")
    running(bucket, "r2")
    sleep = Steps(end(bucket, "r1"), end(bucket, "r2"))

    def read():
        return [r for r in (bucket.store.read(JOB, "r1"), bucket.store.read(JOB, "r2")) if r is not None]

    followed = wait_for_runs(read, 2, sleep=sleep, every_s=5.0, limit_s=60.0, waited_s=10.0,
                             poll=lambda records: polls.append([r.state for r in records]),
                             waiting=lambda records: waits.append(len(records)))
    assert followed.ended and followed.waited_s == 20.0 and sleep.calls == [5.0, 5.0]
    assert polls == [["running", "running"], ["succeeded", "running"], ["succeeded", "succeeded"],
                     ["succeeded", "succeeded"]]
    assert waits == [2, 2]


def test_wait_for_runs_gives_up_at_the_limit_and_waits_for_runs_not_yet_there():
    bucket = Bucket()
    running(bucket, "r1")
    end(bucket, "r1")()
    sleep = Steps(lambda: None, lambda: None)
    followed = wait_for_runs(lambda: [bucket.store.read(JOB, "r1")], 2, sleep=sleep, every_s=1.0, limit_s=2.0)
    assert not followed.ended and followed.waited_s == 2.0 and sleep.calls == [1.0, 1.0]
    assert [r.run_id for r in followed.records] == ["r1"]
