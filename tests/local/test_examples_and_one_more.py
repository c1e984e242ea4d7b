"""`make run` with one more job beside the examples: the run over the stack limit waits its turn.

Before: the examples exactly filled the default `max_live_vms: 10`, so one more job made
`spotcron up --once` end that run `failed: refused by the stack limit max_live_vms`. Now the
default leaves room, and even under a tighter limit than the old one the runs over it are queued
and started as others end (how many wait depends on how fast the others end, so the test asks
for a limit that makes some wait whatever the timing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spotcron.engine.store import RunStore
from spotcron.local.blobs import open_local_bucket
from tests.examples import copy_examples

from .conftest import python_job, write_job

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)  # nine PyTorch training runs at once on a small machine
def test_the_examples_and_one_more_every_minute_job_all_succeed_under_a_tight_limit(tmp_path):
    jobs = copy_examples(tmp_path / "jobs")  # the examples only: jobs/ is the user's to add to
    write_job(jobs, "every-minute", python_job("print('one more job')").replace('"0 3 * * *"', '"* * * * *"'))
    stack = tmp_path / "stack.yaml"
    # 11 runs: 7 wait, of which at most 3 (t4) end at once. `up --once` starts every job as a
    # manual run; here they may take every slot (limits.manual_share, docs/security.md).
    stack.write_text("limits: {max_live_vms: 4, manual_share: 1}\n")
    env = {k: v for k, v in os.environ.items() if k != "PUBSUB_EMULATOR_HOST"}
    done = subprocess.run([sys.executable, "-c", "from spotcron.cli import main; main()", "up", "--once", "--jobs", str(jobs),
                           "--stack", str(stack), "--state-dir", str(tmp_path / "state")],
                          cwd=REPO, env={**env, "COLUMNS": "200"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with open_local_bucket(tmp_path / "state") as blobs:
        store = RunStore(blobs)
        records = [record for job in store.jobs() for record in store.records(job)]
    # A GPU entry runs only on a host with a GPU; without one it is skipped, never run on the CPU.
    on_gpu = [r for r in records if r.variant == "t4"]
    assert len(records) == 11 and {r.state for r in records if r not in on_gpu} == {"succeeded"}, \
        [(r.job, r.run_id, r.state, r.reason) for r in records]
    assert all(r.state == "succeeded" or (r.state == "skipped" and "not run on the CPU" in r.reason) for r in on_gpu)
    waited = [c.reason for r in records for c in r.history if c.state == "queued"]
    assert waited and all("max_live_vms" in why or "queued for room" in why for why in waited), waited
