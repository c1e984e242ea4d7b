"""`up --once` in a pipe: a line per change of state and a heartbeat while none comes, so a log
shows the wait is alive; and the example's local runs stay small enough for `make run`."""

from __future__ import annotations

import shlex
from datetime import timedelta

from spotcron.core.loader import load_job_file
from spotcron.present.progress import PipeProgress
from tests.cli.conftest import NOW, make_record
from tests.examples import example


def test_a_line_per_change_of_state_and_a_heartbeat_while_nothing_changes():
    progress = PipeProgress(NOW, heartbeat_s=15)
    running = make_record("bench", "r1", "running", created=NOW)
    queued = make_record("bench", "r2", "queued", created=NOW, reason="limits.max_live_vms")
    assert progress.lines([running, queued], NOW + timedelta(seconds=1)) == [
        "12:00:01 bench/r1 running", "12:00:01 bench/r2 queued: limits.max_live_vms"]
    assert progress.lines([running, queued], NOW + timedelta(seconds=10)) == []  # nothing new, not yet due
    assert progress.lines([running, queued], NOW + timedelta(seconds=16)) == [
        "12:00:16 waiting 16s: 1 queued, 1 running"]
    failed = make_record("bench", "r2", "failed", created=NOW, reason="the job exited with code 3", exit_code=3)
    assert progress.lines([running, failed], NOW + timedelta(seconds=20)) == [
        "12:00:20 bench/r2 failed in 1m00s: the job exited with code 3"]


def test_the_example_benchmark_runs_small_locally():
    """Nine local runs must fit in `make run`'s minute: small sizes and few steps on the CPU."""
    spec = load_job_file(example("dl-benchmark"))
    for variant in spec.variants():
        argv = list(variant.local.command)
        assert argv[argv.index("--size") + 1] == "small", shlex.join(argv)
        assert int(argv[argv.index("--steps") + 1]) <= 40, shlex.join(argv)
