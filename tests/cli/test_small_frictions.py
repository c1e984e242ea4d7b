"""Small things a newcomer trips over, each fixed: words that say what happened, in full sentences."""

from __future__ import annotations

from tests.cli.conftest import NOW, make_record
from tests.cli.test_results_cli import JOB_FILE

RUN = "m20260302-120000-ab12"


class QueuedStack:
    """`spotcron run`'s local stack, whose run waits in the queue for a limit before it starts."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def run_now(self, spec):
        return [(spec.name, RUN)]

    def wait(self, runs, *, timeout, progress=None):
        [(job, run_id)] = runs
        progress([make_record(job, run_id, "scheduled", created=NOW)])  # start_job has not decided yet
        queued = make_record(job, run_id, "queued", created=NOW, reason="limits.max_vms: 1 VM live of 1")
        progress([queued])
        progress([queued])
        done = make_record(job, run_id, "succeeded", created=NOW, exit_code=0)
        progress([done])
        return [done]


def test_run_says_queued_for_a_queued_run_and_started_when_it_starts(invoke, bucket, context, tmp_path):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bot.yaml").write_text(JOB_FILE)
    context.local_stack = lambda state_dir, limits=None: QueuedStack()
    result = invoke("run", "bot")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if RUN in line]
    assert lines == [f"queued bot/{RUN}: limits.max_vms: 1 VM live of 1; it starts when there is room",
                     f"started bot/{RUN} (was queued)"], result.stderr
