"""Notifications are owed run-end effects: once per failure streak, once on recovery, at least once
(same id on a retry) whatever crashes, and a failing receiver never holds the run's end."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from spotcron.core.notify_spec import Notify
from spotcron.engine.notifications import ID_HEADER, body, events_for, message, ping_url
from spotcron.runtime import webhooks
from spotcron.runtime.run_end import install
from spotcron.testing.harness import make_spec
from tests.reliability.crashes import Crash, crash_after_write

HOOK = "http://hooks.example/spotcron"


class Receiver:
    """A webhook receiver in memory: answers each POST with the next status of `statuses` (then 200)."""

    def __init__(self, statuses=(), crash_after: int | None = None):
        self.statuses = list(statuses)
        self.received: list[tuple[str, dict, dict]] = []
        self.crash_after = crash_after

    def __call__(self, url, data, headers):
        status = self.statuses.pop(0) if self.statuses else 200
        self.received.append((url, json.loads(data) if data else {}, dict(headers)))
        if self.crash_after is not None and len(self.received) == self.crash_after:
            raise Crash("the function instance dies right after the receiver took the message")
        return status

    def ids(self) -> list[str]:
        return [headers[ID_HEADER] for _, _, headers in self.received]


def notifying(h, receiver, **notify):
    install(h.deps, post=receiver, secrets=None)
    return make_spec(notify={"webhook": HOOK, **notify})


def run_tick(h, spec, run_id, *, exit_code):
    h.start(spec)
    h.clock.advance(60)
    h.upload("bot", run_id, exit_code=exit_code)
    assert h.callback("bot", run_id, exit_code=exit_code).status_code == 200
    return h.record("bot", run_id)


def test_first_failure_notifies_once_a_second_does_not_and_a_success_after_them_notifies_recovery(h):
    receiver = Receiver()
    spec = notifying(h, receiver)
    assert run_tick(h, spec, "20261122-1200", exit_code=1).state == "failed"
    h.clock.advance(4 * 3600 - 60)
    assert run_tick(h, spec, "20261122-1600", exit_code=3).state == "failed"
    h.clock.advance(4 * 3600 - 60)
    assert run_tick(h, spec, "20261122-2000", exit_code=0).state == "succeeded"
    assert receiver.ids() == ["bot/20261122-1200/failure", "bot/20261122-2000/recovered"]
    failure = receiver.received[0][1]
    assert failure["job"] == "bot" and failure["run"] == "20261122-1200" and failure["state"] == "failed"
    assert failure["exit_code"] == 1 and "exited with code 1" in failure["reason"]
    assert failure["log_tail"] == ["hello from the container"]
    assert "spotcron logs bot/20261122-1200" in failure["more"] and failure["duration_s"] is not None
    assert "cost_usd" in failure
    assert all(h.record("bot", r).owed == () for r in ("20261122-1200", "20261122-1600", "20261122-2000"))


def test_a_crash_right_after_the_terminal_write_still_sends_exactly_one_notification(h):
    receiver = Receiver()
    spec = notifying(h, receiver)
    h.start(spec)
    h.clock.advance(60)
    h.upload("bot", "20261122-1200", exit_code=1)
    restore = crash_after_write(h, lambda name, data: name.endswith("/run.json") and b'"failed"' in data)
    token = h.token("bot", "20261122-1200")
    with pytest.raises(Crash):
        h.callback("bot", "20261122-1200", exit_code=1, token=token)
    restore()
    assert receiver.received == [] and h.record("bot", "20261122-1200").state == "failed"
    assert h.callback("bot", "20261122-1200", exit_code=1, token=token).status_code == 200  # the runner's retry
    h.clock.advance(h.settings.sweep_interval)
    h.sweep()
    assert receiver.ids() == ["bot/20261122-1200/failure"]


def test_a_crash_after_the_receiver_took_it_sends_it_again_with_the_same_id(h):
    receiver = Receiver(crash_after=1)
    spec = notifying(h, receiver)
    h.start(spec)
    h.clock.advance(60)
    h.upload("bot", "20261122-1200", exit_code=1)
    with pytest.raises(Crash):
        h.callback("bot", "20261122-1200", exit_code=1)
    assert h.record("bot", "20261122-1200").owed  # the "done" was never written
    h.clock.advance(h.settings.sweep_interval)
    h.sweep()
    assert receiver.ids() == ["bot/20261122-1200/failure"] * 2, "a retry carries the id the receiver dedupes on"
    assert h.record("bot", "20261122-1200").owed == ()


def test_a_receiver_answering_500_is_retried_and_the_runs_end_is_not_blocked(h):
    receiver = Receiver(statuses=[500, 503])
    spec = notifying(h, receiver)
    record = run_tick(h, spec, "20261122-1200", exit_code=1)
    assert record.state == "failed" and record.owed == ("hook:notify",)
    assert len(h.events.of_type("run.finished")) == 1  # the rest of the end is done
    assert "HTTP 500" in record.effect_failures["hook:notify"].error
    for _ in range(2):
        h.clock.advance(h.settings.sweep_interval)
        assert h.sweep().status_code == 200
    record = h.record("bot", "20261122-1200")
    assert record.owed == () and record.effect_failures["hook:notify"].tries == 2
    assert receiver.ids() == ["bot/20261122-1200/failure"] * 3


def test_success_and_slow_are_sent_only_when_asked():
    config = Notify(webhook=HOOK, on=["success"], slow="30s")
    assert config.events == ("success", "slow")
    assert Notify(webhook=HOOK).events == ("failure", "recovered", "missed")


def test_bodies_for_slack_discord_and_generic(h):
    receiver = Receiver()
    spec = notifying(h, receiver)
    record = run_tick(h, spec, "20261122-1200", exit_code=2)
    note = message(record, "failure", ["boom"], "bkt")
    assert json.loads(body(note, "slack"))["text"].startswith("spotcron: bot failed (run 20261122-1200)")
    assert "exit code 2" in json.loads(body(note, "discord"))["content"]
    assert json.loads(body(note, "generic"))["id"] == "bot/20261122-1200/failure"
    assert Notify(webhook="https://hooks.slack.com/services/x").body_format("https://hooks.slack.com/services/x") == "slack"
    assert events_for(record, None, Notify(webhook=HOOK, on=["recovered"])) == []


def test_ping_urls_for_healthchecks_and_cronitor():
    assert ping_url("https://hc-ping.com/abc", "start", None) == "https://hc-ping.com/abc/start"
    assert ping_url("https://hc-ping.com/abc/", "end", 3) == "https://hc-ping.com/abc/3"
    assert ping_url("https://hc-ping.com/abc", "fail", None) == "https://hc-ping.com/abc/fail"
    assert ping_url("https://cronitor.link/p/k/bot", "end", 0) == "https://cronitor.link/p/k/bot?state=complete&status_code=0"


def test_the_ping_hook_pings_start_and_the_exit_code(h):
    receiver = Receiver()
    install(h.deps, post=receiver, secrets=None)
    spec = make_spec(notify={"ping": "https://hc-ping.com/abc"})
    run_tick(h, spec, "20261122-1200", exit_code=4)
    assert [url for url, _, _ in receiver.received] == ["https://hc-ping.com/abc/start", "https://hc-ping.com/abc/4"]


def test_a_secret_held_webhook_is_read_through_the_lookup(h):
    receiver = Receiver()
    install(h.deps, post=receiver, secrets={"team-hook": HOOK + "/secret"}.__getitem__)
    spec = make_spec(notify={"webhook": {"secret": "team-hook"}})
    run_tick(h, spec, "20261122-1200", exit_code=1)
    assert [url for url, _, _ in receiver.received] == [HOOK + "/secret"]
    assert HOOK not in h.record("bot", "20261122-1200").to_json().decode()  # the record names the secret only


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        length = int(self.headers.get("Content-Length") or 0)
        self.server.got.append((self.path, json.loads(self.rfile.read(length)), dict(self.headers)))
        self.send_response(self.server.status)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def loopback():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.got, server.status = [], 200
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_webhooks_are_really_sent_to_a_loopback_receiver(h, loopback):
    lines: list[str] = []
    install(h.deps, post=webhooks.post, secrets=None, announce=lines.append)
    url = f"http://127.0.0.1:{loopback.server_address[1]}/hook"
    spec = make_spec(notify={"webhook": url})
    loopback.status = 500
    run_tick(h, spec, "20261122-1200", exit_code=1)
    assert h.record("bot", "20261122-1200").owed == ("hook:notify",)  # 500: owed, not lost
    loopback.status = 200
    h.clock.advance(h.settings.sweep_interval)
    h.sweep()
    assert [path for path, _, _ in loopback.got] == ["/hook", "/hook"]
    path, payload, headers = loopback.got[-1]
    assert payload["event"] == "failure" and headers[ID_HEADER] == "bot/20261122-1200/failure"
    assert lines == ["notified failure of bot/20261122-1200 to 127.0.0.1 (id bot/20261122-1200/failure)"]
