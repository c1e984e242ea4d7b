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
from tests.cli.conftest import NOW, make_record

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
