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

    def run_now(self, spec, overrides=None):
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


def test_times_under_a_second_have_a_unit_that_reads():
    from spotcron.present.exports import format_seconds

    assert [format_seconds(v) for v in (4.78e-07, 1.2e-5, 0.0031, 0.5, 0.0009996, 2.345, 0)] == [
        "478ns", "12µs", "3.1ms", "500ms", "1ms", "2.35s", "0s"]


def test_a_size_a_series_lacks_suggests_the_sizes_around_it_not_the_nearest_spelling(tmp_path):
    from spotcron.core.errors import ConfigError
    from spotcron.core.loader import load_jobs

    (tmp_path / "a.yaml").write_text('schedule: "0 * * * *"\nimage: x\nmachine: {type: n1-standard-3}\n')
    try:
        load_jobs([tmp_path], grace=300, retention_days=90)
    except ConfigError as error:
        said = str(error)
    else:
        raise AssertionError("n1-standard-3 was accepted")
    assert "'n1-standard-3' is not a machine type; did you mean 'n1-standard-2' or 'n1-standard-4'? " \
           "n1-standard comes in sizes 1, 2, 4, 8" in said
    assert "n1-standard-32'?" not in said
