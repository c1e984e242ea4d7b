"""Stopping the local stack ends every run in flight, and never leaves a request cut off mid-way."""

from __future__ import annotations

import threading
import time
import urllib.request

import pytest

from spotcron.core.runs import RunState
from spotcron.local.stack import _HttpServer

from .test_local_mode import job

pytestmark = pytest.mark.slow


def test_a_run_in_flight_ends_cancelled_when_the_stack_stops_and_the_next_start_runs(make_stack, tmp_path):
    """Before: the run stayed `running`; the next stack skipped the job's next trigger ("previous run
    is still running") and later finished the old run as `succeeded`, "VM vanished"."""
    stack = make_stack()
    spec = job(tmp_path, "sleeper", "import time; time.sleep(90)", extra="concurrency: forbid\n")
    [run] = stack.run_now(spec)
    deadline = time.monotonic() + 60
    while stack.deps.store.read(*run).state != RunState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.1)
    stack.stop(reason="spotcron up got SIGINT")
    again = make_stack()
    record = again.deps.store.read(*run)
    assert record.state == RunState.CANCELLED and record.reason == "spotcron up got SIGINT"
    assert record.current_attempt.outcome == "cancelled" and record.current_attempt.deleted_at is not None
    assert again.deps.store.live_runs() == []
    quick = job(tmp_path, "sleeper", "print('quick')", extra="concurrency: forbid\n")
    [after] = again.wait(again.run_now(quick), timeout=60)
    assert after.state == RunState.SUCCEEDED, after.reason


def test_stopping_the_callback_server_waits_for_a_request_in_flight():
    """Before: stop() returned while job_done was still ending a run; the request thread, a daemon,
    was cut off at interpreter exit, sometimes inside native code: exit code 134."""
    entered, finished = threading.Event(), threading.Event()

    def app(environ, start_response):
        entered.set()
        time.sleep(0.5)
        finished.set()
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    server = _HttpServer(app)
    caller = threading.Thread(target=lambda: urllib.request.urlopen(server.url, timeout=30).read())
    caller.start()
    assert entered.wait(30)
    server.stop()
    assert finished.is_set()
    caller.join(30)
