"""`spotcron status`: each deployed job's schedule health, and `spotcron notify test`."""

from __future__ import annotations

import json
from datetime import timedelta

from spotcron.core.runs import RunState
from spotcron.core.spec import JobSpec
from spotcron.engine.deployed import write_deployed
from tests.cli.conftest import NOW, make_record

HOUR = timedelta(hours=1)


def hourly(**fields) -> JobSpec:
    return JobSpec.model_validate({"name": "bot", "schedule": "0 * * * *", "image": "us-docker.pkg.dev/p/r/b:1",
                                   "notify": {"webhook": {"secret": "team-hook"}, "ping": "https://hc-ping.com/x"},
                                   **fields})


def scheduled(run_id, state, *, at, late_s=5, **fields):
    record = make_record("bot", run_id, state, created=at + timedelta(seconds=late_s - 40), **fields)
    first = record.attempts[0].model_copy(update={"created_at": at + timedelta(seconds=late_s)})
    return record.model_copy(update={"tick": at, "attempts": (first,), "updated_at": at + timedelta(minutes=2)})


def fill(bucket):
    write_deployed(bucket.blobs, [hourly(), JobSpec.model_validate(
        {"name": "quiet", "schedule": "0 3 * * *", "image": "us-docker.pkg.dev/p/r/b:1", "paused": True})])
    bucket.add(scheduled("20260302-0800", "succeeded", at=NOW - 4 * HOUR))
    bucket.add(scheduled("20260302-0900", "failed", at=NOW - 3 * HOUR, late_s=300, exit_code=1))
    missed = scheduled("20260302-1000", "missed", at=NOW - 2 * HOUR).model_copy(
        update={"attempts": (), "missed_ticks": 1, "missed_until": NOW - 2 * HOUR})
    bucket.add(missed)
    bucket.add(scheduled("20260302-1100", "failed", at=NOW - HOUR, exit_code=2))
    # A manual run with overrides that succeeded: not the job's own spec, so the streak stands.
    manual = make_record("bot", "m20260302-113000-ab12", "succeeded", created=NOW - 30 * timedelta(minutes=1))
    bucket.add(manual.model_copy(update={"trigger": "manual", "overrides": {"env": {"K": "V"}}}))


def test_status_shows_each_jobs_schedule_health(invoke, bucket):
    fill(bucket)
    result = invoke("status")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "schedule health in" in out
    row = next(line for line in out.splitlines() if line.startswith("bot "))
    assert "2026-03-02 08:02" in row  # last success: the 08:00 run, not the manual one
    cells = row.split()
    assert "2" in cells  # two failures in a row (the missed tick between them is counted apart)
    assert "2026-03-02 13:00 UTC" in row  # next due
    assert "webhook (secret team-hook), ping to hc-ping.com" in row
    quiet = next(line for line in out.splitlines() if line.startswith("quiet "))
    assert "paused" in quiet and "never" in quiet and "none" in quiet

    health = json.loads(invoke("status", "bot", "--json").stdout)
    assert health == [{"job": "bot", "last_success": "2026-03-02T08:02:00+00:00", "consecutive_failures": 2,
                       "missed_ticks_7d": 1, "late_ticks_7d": 1, "next_due": "2026-03-02T13:00:00+00:00",
                       "paused": False, "notifications": ["webhook (secret team-hook)", "ping to hc-ping.com"]}]
    assert RunState.MISSED == "missed"


def test_status_names_an_unknown_job(invoke, bucket):
    fill(bucket)
    result = invoke("status", "nope")
    assert result.exit_code == 2
    assert "no deployed job 'nope'" in result.stderr and "deployed: bot, quiet" in result.stderr


def test_notify_test_sends_one_message_to_each_destination(tmp_path, monkeypatch):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from click.testing import CliRunner

    from spotcron.cli import cli

    got: list[tuple[str, bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            got.append((self.path, self.rfile.read(int(self.headers.get("Content-Length") or 0))))
            self.send_response(500 if self.path.startswith("/down") else 200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        (tmp_path / "jobs").mkdir()
        (tmp_path / "jobs" / "bot.yaml").write_text(
            f'schedule: "0 * * * *"\nimage: us-docker.pkg.dev/p/r/b:1\n'
            f'notify:\n  webhook: {{secret: my-hook}}\n  ping: http://127.0.0.1:{port}/down/check\n')
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("SPOTCRON_SECRET_MY_HOOK", f"http://127.0.0.1:{port}/hook")
        result = CliRunner().invoke(cli, ["notify", "test", "bot"], catch_exceptions=False)
    finally:
        server.shutdown()
        server.server_close()
    assert result.exit_code == 1, result.output
    assert "sent a test message: webhook (secret my-hook) 127.0.0.1" in result.stdout
    assert "failed: ping" in result.stderr and "HTTP 500" in result.stderr
    assert [path for path, _ in got] == ["/hook", "/down/check/0"]
    assert json.loads(got[0][1])["event"] == "test"


def test_the_page_shows_the_schedule_health(bucket):
    from spotcron.engine.store import RunStore
    from spotcron.present.page import build_page

    fill(bucket)
    html, _ = build_page(RunStore(bucket.blobs), NOW, "us-central1", charts=False)
    assert '<h2 id="health">Schedule health</h2>' in html
    assert ('<td data-label="job">bot</td><td data-label="last success">2026-03-02 08:02 (3h58m ago)</td>'
            '<td class="num" data-label="failing">2</td><td class="num" data-label="missed 7d">1</td>'
            '<td class="num" data-label="late 7d">1</td>') in html.replace("\n", "")


def test_run_with_env_and_args_hands_the_overrides_to_the_stack(invoke, bucket, context, tmp_path):
    from tests.cli.test_results_cli import JOB_FILE, FakeStack

    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    stack = FakeStack(bucket, "succeeded")
    context.local_stack = lambda state_dir, limits=None: stack
    result = invoke("run", "bot", "--env", "LOG_LEVEL=debug", "--env", "X=1=2", "--args", "--dry-run --n 3")
    assert result.exit_code == 0, result.output
    assert stack.overrides.env == {"LOG_LEVEL": "debug", "X": "1=2"}
    assert stack.overrides.args == ("--dry-run", "--n", "3")
    bucket.blobs.delete("runs/bot/m20260302-120000-ab12/run.json")
    assert invoke("run", "bot").exit_code == 0 and stack.overrides is None  # none given: none passed
    bad = invoke("run", "bot", "--env", "NOVALUE")
    assert bad.exit_code == 2 and "--env 'NOVALUE': write NAME=VALUE" in bad.stderr
    bad = invoke("run", "bot", "--env", "1X=y")
    assert bad.exit_code == 2 and "not a valid environment variable name" in bad.stderr


def test_the_local_receiver_shows_each_notification():
    from spotcron.core.notify_spec import Notify
    from spotcron.engine.notifications import send_test
    from spotcron.local.receiver import Receiver
    from spotcron.runtime import webhooks

    shown: list[tuple[str, str, str]] = []
    receiver = Receiver(lambda *seen: shown.append(seen)).start()
    try:
        for fmt in ("generic", "slack", "discord"):
            assert send_test(Notify(webhook=receiver.url + fmt, format=fmt), "bot", webhooks.post, None) == \
                [("webhook 127.0.0.1", None)]
    finally:
        receiver.stop()
    assert [(path, note_id) for path, note_id, _ in shown] == [(f"/{f}", "bot/test/test")
                                                               for f in ("generic", "slack", "discord")]
    assert all(text.startswith("spotcron: bot test message (run test)") for _, _, text in shown)


def test_a_pause_shows_in_local_status_at_once_without_a_running_up(invoke, bucket, tmp_path):
    """The deployed spec is what the last `up` loaded; locally, the job file is what the next tick fires."""
    fill(bucket)
    (tmp_path / "jobs").mkdir()
    bot = tmp_path / "jobs" / "bot.yaml"
    bot.write_text('schedule: "0 * * * *"\nimage: us-docker.pkg.dev/p/r/b:1\npaused: true\n')  # `spotcron pause bot`
    row = next(line for line in invoke("status").stdout.splitlines() if line.startswith("bot "))
    assert "paused" in row and "13:00" not in row
    assert json.loads(invoke("status", "bot", "--json").stdout)[0]["paused"] is True
    bot.write_text('schedule: "0 * * * *"\nimage: us-docker.pkg.dev/p/r/b:1\n')  # `spotcron resume bot`
    assert json.loads(invoke("status", "bot", "--json").stdout)[0]["next_due"] == "2026-03-02T13:00:00+00:00"
    # The quiet job has no file here: its deployed spec stands (paused); a deployed stack's status reads the bucket.
    assert json.loads(invoke("status", "quiet", "--json").stdout)[0]["paused"] is True
