"""Local mode's bus on the Pub/Sub emulator (`spotcron up` with PUBSUB_EMULATOR_HOST set)."""

from __future__ import annotations

import contextlib
import os
import sys
import threading

import pytest

from spotcron.local.bus import EmulatorBus
from spotcron.testing.waiting import wait_until
from tests.gcp.fixtures import pubsub_host  # noqa: F401  (the shared Pub/Sub emulator)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts sockets through /proc")


def test_a_message_reaches_its_handler_and_close_releases_both_clients(pubsub_host, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PUBSUB_EMULATOR_HOST", pubsub_host)  # as `spotcron up` finds it: plain gRPC
    bus = EmulatorBus(pubsub_host)
    seen, arrived = [], threading.Event()

    def handler(topic, message) -> None:
        seen.append((topic, message))
        arrived.set()

    bus.subscribe("bus-test", handler)
    bus.publish("bus-test", b'{"job": "a"}', {"trigger": "manual"})
    assert arrived.wait(30), "the emulator did not deliver the message"
    assert seen[0][0] == "bus-test"
    bus.close()
    # Before: close() ended the streams and the subscriber but left the publisher's channel open,
    # a connection to the emulator for the life of the process.
    # gRPC closes its sockets on its own threads, just after close() returns.
    wait_until(lambda: connections_to(pubsub_host) == 0, "every connection to the emulator closed")


def connections_to(host: str) -> int:
    """This process's open TCP connections to `host` (Linux: /proc/net/tcp, by socket inode)."""
    port = int(host.rsplit(":", 1)[1])
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                mine.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                remote_port, state, inode = int(fields[2].rsplit(":", 1)[1], 16), fields[3], fields[9]
                if remote_port == port and state == "01" and inode in mine:  # 01: ESTABLISHED
                    count += 1
    return count
