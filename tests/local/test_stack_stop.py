"""Stopping local mode leaves nothing behind and nothing half-wired, whatever is in flight."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest

from spotcron.core.descriptor import METADATA_KEY, RunDescriptor
from spotcron.core.errors import Transient
from spotcron.core.runs import vm_labels
from spotcron.engine.ports import InstanceRequest
from spotcron.runtime import entrypoints
from spotcron.testing.waiting import wait_until

from .conftest import listening_here, spotcron_processes

pytestmark = pytest.mark.slow


def request_for(stack, name: str = "sc-late-20261122-1200-a2") -> InstanceRequest:
    descriptor = RunDescriptor(job="late", run_id="20261122-1200", attempt=2, image="spotcron/test:latest",
                               bucket="spotcron-local", prefix="runs/late/20261122-1200/",
                               job_done_url=stack.settings.job_done_url, timeout_s=60,
                               deadline=datetime.now(UTC) + timedelta(minutes=1),
                               local_command=["python3", "-c", "import time; time.sleep(60)"])
    return InstanceRequest(name=name, zone="local-zone1-a", machine_type="e2-small", spot=True,
                           max_run_duration_s=120, disk_gb=10, labels=vm_labels("late", "20261122-1200", 2),
                           metadata={METADATA_KEY: descriptor.to_metadata(), "user-data": ""},
                           service_account=stack.settings.vm_service_account_email)


def test_no_vm_is_created_once_local_compute_is_closed(make_stack, tmp_path):
    """Before: a job_done callback still being handled while the stack stopped could retry its
    run after compute.close() had deleted every VM, starting a runner that nothing deleted."""
    stack = make_stack()
    stack.compute.close()
    with pytest.raises(Transient, match="local compute is shut down; sc-late-20261122-1200-a2 was not created"):
        stack.compute.create_instance(request_for(stack))
    assert stack.compute.list_managed() == []
    assert spotcron_processes(tmp_path / "state") == []


def test_a_message_handled_while_stopping_still_sees_the_local_backends(make_stack):
    """Before: stop() unset the functions' backends first, while the bus and job_done were still
    serving: a message or callback handled then built Google's backends from the environment."""
    stack = make_stack()
    entered, release, seen = threading.Event(), threading.Event(), []

    def slow(topic, envelope) -> None:
        entered.set()
        release.wait(10)
        seen.append(entrypoints._deps is stack.deps)

    stack.bus.subscribe("slow", slow)
    stack.bus.publish("slow", b"{}")
    assert entered.wait(10)
    stopper = threading.Thread(target=stack.stop)
    stopper.start()
    # The bus, closed first, waits for this message: stop() has reached it once the bus is closing.
    wait_until(stack.bus._closing.is_set, "stop() to reach the bus")
    release.set()
    stopper.join(30)
    assert not stopper.is_alive() and seen == [True]
    assert entrypoints._deps is None


def test_stopping_closes_the_log_file(make_stack, tmp_path):
    stack = make_stack()
    log_file = str(tmp_path / "state" / "spotcron.log")

    def ours() -> list[logging.Handler]:
        return [h for h in logging.getLogger("spotcron").handlers if getattr(h, "baseFilename", None) == log_file]

    assert len(ours()) == 1
    stack.stop()
    assert ours() == []


def test_a_second_stack_on_the_same_state_dir_is_refused_until_the_first_stops(tmp_path):
    import os

    from spotcron.core.errors import SpotcronError
    from spotcron.local.stack import LocalStack

    first = LocalStack(tmp_path / "state", environ=dict(os.environ), cwd=tmp_path).start()
    try:
        with pytest.raises(SpotcronError) as refused:
            LocalStack(tmp_path / "state", environ=dict(os.environ), cwd=tmp_path).start()
        assert str(refused.value) == (
            f"another local stack (pid {os.getpid()}) is using {tmp_path / 'state'}/: stop that `spotcron up` or "
            "`spotcron run` first, or give this one its own --state-dir")
    finally:
        first.stop()
    second = LocalStack(tmp_path / "state", environ=dict(os.environ), cwd=tmp_path).start()
    second.stop()


# Another program listening on a port our stopped stack freed (any process may take it) is not
# a port our stack left open: the leftover check looks at this process's sockets, not the port.
LISTENER = """\
import socket, sys
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", int(sys.argv[1])))
server.listen()
print("listening", flush=True)
sys.stdin.read()
"""


def test_the_leftover_port_check_sees_our_servers_and_not_another_process_on_a_freed_port(make_stack):
    stack = make_stack()
    url = stack.bucket.url
    assert listening_here(url)
    stack.stop()
    assert not listening_here(url)
    port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)[1]
    with subprocess.Popen([sys.executable, "-c", LISTENER, port], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL, text=True) as other:
        try:
            other.stdout.readline()  # "listening", or nothing when yet another process took the port first
            assert not listening_here(url)
        finally:
            other.stdin.close()
