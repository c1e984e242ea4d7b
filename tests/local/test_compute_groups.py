"""A deleted local VM is gone when its whole process group is, not when its runner is."""

from __future__ import annotations

import os
import signal
import subprocess

from spotcron.local.compute import _group_alive, _wait_group_gone


def test_a_group_outlives_its_leader_until_its_last_process_ends():
    # The leader starts a child in its group and prints its pid; killing the leader alone leaves
    # the child in the group, as a job still exiting outlives the runner that started it.
    leader = subprocess.Popen(["sh", "-c", "sleep 120 & echo $!; wait"], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    assert leader.stdout.readline().strip().isdigit()  # the child is running
    try:
        leader.kill()
        leader.wait()
        assert _group_alive(leader.pid)
        assert not _wait_group_gone(leader.pid, 0.3)
    finally:
        os.killpg(leader.pid, signal.SIGKILL)
        leader.stdout.close()
    # The child, now a zombie until its adopter reaps it, no longer counts.
    assert _wait_group_gone(leader.pid, 10)
    assert not _group_alive(leader.pid)
