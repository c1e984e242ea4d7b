"""`spotcron run` while `spotcron up` runs: the run is handed to the running stack and followed."""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest
import requests

from spotcron.core.errors import SpotcronError
from spotcron.core.runs import RunState
from spotcron.local.handoff import HANDOFF_FILE, HandoffServer, hand_off, read_records
from tests.cli.conftest import NOW, make_attempt, make_record

JOB_FILE = 'schedule: "0 * * * *"\nimage: spotcron/bot:latest\nmachine:\n  type: e2-small\ntimeout: 5m\n'


@pytest.mark.parametrize(("final", "code"), [("succeeded", 0), ("failed", 1)])
def test_run_hands_off_to_a_running_up_and_follows_to_the_end(invoke, bucket, context, sleeps, tmp_path, final,
                                                              code):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    handed: list[dict] = []
    run_id = "m20260302-120000-ab12"

    def hand(state_dir, payload):
        handed.append(payload)
        bucket.add(make_record("bot", run_id, "starting", created=NOW, attempts=()))
        return [("bot", run_id)]

    def finish() -> None:
        bucket.store.update("bot", run_id, lambda r: r.with_state(RunState(final), NOW + timedelta(seconds=5), exit_code=0
                                                                  if final == "succeeded" else 3))

    context.hand_off = hand
    context.handed_records = lambda state_dir, runs: [bucket.store.read(job, r) for job, r in runs]
    context.local_stack = lambda state_dir, limits=None: pytest.fail("a second local stack was started beside `up`")
    sleeps.steps = [lambda: bucket.store.update("bot", run_id, lambda r: r.with_state(RunState.RUNNING, NOW)), finish]
    result = invoke("run", "bot")
    assert result.exit_code == code, result.output
    assert handed[0]["name"] == "bot" and handed[0]["machine"]["type"] == "e2-small"
    assert f"started bot/{run_id} on the running `spotcron up`" in result.stderr
    assert final in [line for line in result.stdout.splitlines() if run_id in line][0]
    assert len(sleeps.calls) == 2  # polled until the run ended, then stopped


def test_run_follow_streams_the_output_and_exits_with_the_jobs_code(invoke, bucket, context, sleeps, tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    run_id = "m20260302-120000-ab12"
    seen: list[str] = []

    def hand(state_dir, payload):
        bucket.add(make_record("bot", run_id, "running", created=NOW, attempts=(
            make_attempt("bot", run_id, start=NOW, seconds=None),)))
        return [("bot", run_id)]

    def step(text: str, offset: int):
        def ship() -> None:
            seen.append(text)
            bucket.part("bot", run_id, 1, offset, text)
        return ship

    def finish() -> None:
        bucket.logs("bot", run_id, 1, "one\ntwo\nbye\n")
        bucket.store.update("bot", run_id, lambda r: r.with_state(RunState.FAILED, NOW + timedelta(seconds=9),
                                                                  reason="the job exited with code 3",
                                                                  exit_code=3))

    context.hand_off = hand
    context.handed_records = lambda state_dir, runs: [bucket.store.read(job, r) for job, r in runs]
    context.local_stack = lambda state_dir, limits=None: pytest.fail("a second local stack was started beside `up`")
    sleeps.steps = [step("one\n", 0), step("two\n", 4), finish]
    result = invoke("run", "bot", "--follow")
    assert result.exit_code == 3, result.output
    assert result.stdout == "one\ntwo\nbye\n"  # the job's output only, each line once
    assert f"bot/{run_id} failed, exit 3: the job exited with code 3" in result.stderr
    assert seen == ["one\n", "two\n"]


class FakeStack:
    """The local stack as `spotcron run` uses it: start the runs, wait (calling progress), the bucket."""

    def __init__(self, bucket, runs, steps):
        self.bucket, self.runs, self.steps = bucket, runs, steps
        self.deps = type("Deps", (), {"blobs": bucket.blobs})()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def run_now(self, spec, overrides=None):
        for job, run_id in self.runs:
            self.bucket.add(make_record(job, run_id, "running", created=NOW, variant=run_id.split("-")[-1],
                                        attempts=(make_attempt(job, run_id, start=NOW, seconds=None),)))
        return list(self.runs)

    def wait(self, runs, *, timeout, progress=None):
        while True:
            records = [self.bucket.store.read(job, run_id) for job, run_id in runs]
            progress(records)
            if all(r.terminal for r in records) or not self.steps:
                return records
            self.steps.pop(0)()


def test_run_follow_on_its_own_stack_labels_each_runs_lines(invoke, bucket, context, tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE + "matrix:\n  - {name: a}\n  - {name: b}\n")
    runs = [("bot", "m20260302-120000-ab12-a"), ("bot", "m20260302-120000-ab12-b")]

    def end(run_id: str, state: RunState, code: int):
        return lambda: bucket.store.update("bot", run_id, lambda r: r.with_state(state, NOW, exit_code=code))

    steps = [lambda: bucket.part("bot", runs[0][1], 1, 0, "from a\n"),
             lambda: bucket.part("bot", runs[1][1], 1, 0, "from b\nstill b"),
             end(runs[0][1], RunState.SUCCEEDED, 0), end(runs[1][1], RunState.SUCCEEDED, 0)]
    context.hand_off = lambda state_dir, payload: None  # no `up` running
    context.local_stack = lambda state_dir, limits=None: FakeStack(bucket, runs, steps)
    result = invoke("run", "bot", "-f")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["m20260302-120000-ab12-a | from a", "m20260302-120000-ab12-b | from b",
                                          "m20260302-120000-ab12-b | still b"]
    assert invoke("run", "bot", "--timestamps").exit_code == 2


class FakePublisher:
    """Pub/Sub as `run --cloud` uses it: publish, then the message id."""

    def __init__(self):
        self.published: list[dict] = []

    def publish(self, path, data, **attributes):
        self.published.append({"path": path, "data": data, **attributes})
        return type("Future", (), {"result": lambda self, timeout=None: "msg-1"})()


def test_run_cloud_follow_finds_its_runs_in_the_bucket_and_exits_with_the_jobs_code(invoke, bucket, context, sleeps,
                                                                                     tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    publisher = FakePublisher()
    context.publisher = lambda host: publisher
    bucket.add(make_record("bot", "m20260302-110000-zzzz", created=NOW))  # someone else's manual run

    def created() -> None:  # start_job made the run of this request
        nonce = publisher.published[0]["nonce"][:4]
        run_id = f"m20260302-120000-{nonce}"
        bucket.add(make_record("bot", run_id, "running", created=NOW, attempts=(
            make_attempt("bot", run_id, start=NOW, seconds=None),)))
        sleeps.steps += [lambda: bucket.part("bot", run_id, 1, 0, "working\n"),
                         lambda: bucket.store.update("bot", run_id, lambda r: r.with_state(
                             RunState.FAILED, NOW, reason="the job exited with code 4", exit_code=4))]

    sleeps.steps = [lambda: None, created]
    result = invoke("run", "bot", "--cloud", "--project", "acme-prod", "--bucket", "gs://my-bucket", "--follow",
                    "--timeout", "600")
    assert result.exit_code == 4, result.output
    assert result.stdout == "working\n"
    assert "published bot to projects/acme-prod/topics/spotcron-start: message msg-1" in result.stderr
    assert "failed, exit 4: the job exited with code 4" in result.stderr


def test_handoff_server_takes_only_its_token(tmp_path):
    started: list[dict] = []
    record = make_record("bot", "m1", created=NOW)
    server = HandoffServer(tmp_path, lambda payload: started.append(payload) or [("bot", "m1")],
                           lambda job, run_id: record if (job, run_id) == ("bot", "m1") else None).start()
    try:
        where = json.loads((tmp_path / HANDOFF_FILE).read_text())
        assert oct(os.stat(tmp_path / HANDOFF_FILE).st_mode & 0o777) == "0o600"
        assert hand_off(tmp_path, {"name": "bot"}) == [("bot", "m1")] and started == [{"name": "bot"}]
        assert read_records(tmp_path, [("bot", "m1"), ("bot", "m2")]) == [record, None]
        for path in ("/run", "/records"):
            wrong = requests.post(where["url"] + path, json={"runs": []}, headers={"Authorization": "Bearer no"},
                                  timeout=10)
            assert wrong.status_code == 403
        assert started == [{"name": "bot"}]
    finally:
        server.stop()
    assert not (tmp_path / HANDOFF_FILE).exists()
    assert hand_off(tmp_path, {"name": "bot"}) is None  # no `up` there: run on a stack of its own
    with pytest.raises(SpotcronError, match="stopped while its runs went on"):
        read_records(tmp_path, [("bot", "m1")])


def test_a_stale_handoff_file_means_no_up(tmp_path):
    (tmp_path / HANDOFF_FILE).write_text(json.dumps({"url": "http://127.0.0.1:9", "token": "t", "pid": 1}))
    assert hand_off(tmp_path, {"name": "bot"}) is None


def test_a_refused_run_says_why(tmp_path):
    def refuse(payload):
        raise SpotcronError("no job named 'bot' is deployed")

    server = HandoffServer(tmp_path, refuse, lambda job, run_id: None).start()
    try:
        with pytest.raises(SpotcronError, match=r"the running `spotcron up` \(pid \d+\) refused the run: no job named"):
            hand_off(tmp_path, {"name": "bot"})
    finally:
        server.stop()
