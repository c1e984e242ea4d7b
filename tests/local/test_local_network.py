"""A local job reaches the network only if its VM would: without `internet: true` it runs in a
network namespace of its own (nothing but a down loopback), so a bot that needs the internet
fails locally the way it would on its VM."""

from __future__ import annotations

import socket
import threading

import pytest

from spotcron.core import layout
from spotcron.core.loader import load_jobs
from spotcron.local.containment import network_statement

from .conftest import python_job, write_job

pytestmark = pytest.mark.slow

PROBE = ("import os, socket, pathlib; d = pathlib.Path(os.environ['SPOTCRON_RESULTS_DIR']);"
         " s = socket.socket(); s.settimeout(5)\n"
         "try:\n    s.connect(('127.0.0.1', int(os.environ['PORT']))); r = 'reached'\n"
         "except OSError as e:\n    r = 'unreachable'\n"
         "(d / 'net.txt').write_text(r)")


@pytest.fixture
def listener():
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=5)
    server.close()


@pytest.mark.skipif("without a network" not in network_statement(), reason=network_statement())
@pytest.mark.parametrize(("extra", "expected"), [("", "unreachable"), ("internet: true\n", "reached")])
def test_a_local_job_has_a_network_only_if_its_vm_would(make_stack, tmp_path, listener, extra, expected):
    stack = make_stack()
    write_job(tmp_path / "jobs", "bot", python_job(PROBE, extra=extra + f"env:\n  PORT: '{listener}'\n"))
    spec = load_jobs([tmp_path / "jobs"])[0]
    runs = stack.run_now(spec)
    [record] = stack.wait(runs, timeout=90)
    assert record.state == "succeeded", record.reason
    job, run_id = runs[0]
    seen = stack.deps.blobs.read(layout.attempt_prefix(job, run_id, 1) + "results/net.txt").data.decode()
    assert seen == expected


def test_up_says_when_a_job_keeps_a_network_it_would_not_have():
    assert "run without a network" in network_statement(probe=lambda argv: True, which=lambda name: "/usr/bin/unshare")
    fallback = network_statement(platform="darwin")
    assert fallback.startswith("warning:") and "internet: true" in fallback
    assert "unshare --net failed" in network_statement(probe=lambda argv: False, which=lambda name: "/x")
