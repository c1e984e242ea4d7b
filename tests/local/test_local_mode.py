"""`spotcron up` end to end on this machine (the local-mode rows of tests/RELIABILITY.md)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import pytest

from spotcron.core import layout
from spotcron.core.loader import load_jobs

from .conftest import python_job, spotcron_processes, write_job

pytestmark = pytest.mark.slow

def job(tmp_path, name, code, timeout="2m", extra=""):
    write_job(tmp_path / "jobs", name, python_job(code, timeout=timeout, extra=extra))
    return next(s for s in load_jobs([tmp_path / "jobs"]) if s.name == name)


# How long a fire may take to become a run record: the start message is delivered on a thread
# and start_job starts the runner; on a loaded machine that took more than the 15 s once allowed.
FIRE_TO_RECORD = timedelta(minutes=2)

OK = ("import os, pathlib; d = pathlib.Path(os.environ['SPOTCRON_RESULTS_DIR']);"
      " (d / 'answer.json').write_text('{\\\"answer\\\": 42}'); print('hello from the job')")


def test_a_run_succeeds_with_results_logs_and_manifest_in_the_bucket(make_stack, tmp_path):
    stack = make_stack()
    spec = job(tmp_path, "writer", OK)
    runs = stack.run_now(spec)
    [record] = stack.wait(runs, timeout=60)
    assert record.state == "succeeded", record.reason
    job_name, run_id = runs[0]
    blobs = stack.deps.blobs
    prefix = layout.attempt_prefix(job_name, run_id, 1)
    assert blobs.read(prefix + "results/answer.json").json() == {"answer": 42}
    assert b"hello from the job" in blobs.read(prefix + "logs.txt").data
    manifest = blobs.read(prefix + "manifest.json").json()
    assert manifest["exit_code"] == 0
    assert {f["name"] for f in manifest["files"]} >= {"results/answer.json", "logs.txt"}
    assert record.current_attempt.vm_seconds is not None
    assert stack.compute.list_managed() == []
    stack.stop()  # waits for the deleted VMs to be reaped
    # The VM's work directory went with it, as a boot disk does: the bucket holds the one copy.
    assert list((tmp_path / "state" / "vms").iterdir()) == []


def test_a_run_end_draws_no_results_page(make_stack, tmp_path):
    """Listing every run and drawing charts inside job_done held up every run end; the page is
    drawn on demand by `spotcron page` instead."""
    stack = make_stack()
    [record] = stack.wait(stack.run_now(job(tmp_path, "paged", OK)), timeout=60)
    assert record.state == "succeeded", record.reason
    deadline = time.monotonic() + 60
    while stack.compute.list_managed() and time.monotonic() < deadline:
        time.sleep(0.1)  # job_done deletes the VM after the run's end hooks: they are done now

    assert stack.compute.list_managed() == []
    assert stack.deps.blobs.read(layout.INDEX_PAGE) is None


def test_a_nonzero_exit_fails_and_keeps_the_logs(make_stack, tmp_path):
    stack = make_stack()
    spec = job(tmp_path, "crasher", "import sys; print('about to fail'); sys.exit(3)")
    [record] = stack.wait(stack.run_now(spec), timeout=60)
    assert record.state == "failed" and record.exit_code == 3
    logs = stack.deps.blobs.read(layout.logs(record.job, record.run_id, 1))
    assert b"about to fail" in logs.data


def test_a_run_past_its_timeout_is_killed(make_stack, tmp_path):
    stack = make_stack()
    spec = job(tmp_path, "sleeper", "import time; time.sleep(120)", timeout="1s")
    [record] = stack.wait(stack.run_now(spec), timeout=60)  # the job alone would take 120 s
    assert record.state == "timed_out", record.reason


def test_a_runner_killed_mid_run_is_retried_by_the_sweep(make_stack, tmp_path):
    stack = make_stack()
    spec = job(tmp_path, "victim", "import time; time.sleep(3); print('done')",
               extra="retries: {preemption: 1}\n")
    runs = stack.run_now(spec)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        record = stack.deps.store.read(*runs[0])
        if record.state == "running":
            break
        time.sleep(0.1)
    attempt = record.current_attempt
    stack.compute.crash(attempt.zone, attempt.vm_name)  # no callback will ever come
    [record] = stack.wait(runs, timeout=60)
    assert [a.outcome for a in record.attempts] == ["lost", "exited"]
    assert record.state == "succeeded"


def test_two_jobs_at_once(make_stack, tmp_path):
    stack = make_stack()
    first = job(tmp_path, "first", OK)
    second = job(tmp_path, "second", OK)
    runs = stack.run_now(first) + stack.run_now(second)
    records = stack.wait(runs, timeout=90)
    assert sorted((r.job, r.state) for r in records) == [("first", "succeeded"), ("second", "succeeded")]


def test_results_survive_a_restart(make_stack, tmp_path):
    stack = make_stack()
    spec = job(tmp_path, "keeper", OK)
    runs = stack.run_now(spec)
    stack.wait(runs, timeout=60)
    stack.stop()
    assert spotcron_processes(tmp_path / "state") == []
    again = make_stack()
    [record] = again.deps.store.records("keeper")
    assert (record.job, record.run_id, record.state) == (*runs[0], "succeeded")


def test_the_scheduler_fires_at_cron_times(make_stack, tmp_path):
    stack = make_stack()
    job(tmp_path, "ticker", OK)
    (tmp_path / "jobs" / "ticker.yaml").write_text(
        (tmp_path / "jobs" / "ticker.yaml").read_text().replace('"0 3 * * *"', '"* * * * *"'))
    stack.schedule(lambda: load_jobs([tmp_path / "jobs"]), watch=[tmp_path / "jobs"])
    fire = stack.scheduler.upcoming()["ticker"]
    assert fire.second == 0
    run_id = fire.strftime("%Y%m%d-%H%M")
    # The fire is up to a minute away, and how soon its run is recorded after it depends on the
    # machine's load; meanwhile the next minute may fire too. So wait for this fire's own run,
    # for a bound counted from the fire (not from now), and let later minutes' runs be.
    while datetime.now(UTC) < fire + FIRE_TO_RECORD and run_id not in stack.deps.store.run_ids("ticker"):
        time.sleep(0.5)
    ids = stack.deps.store.run_ids("ticker")
    assert run_id in ids, f"no run {run_id} within {FIRE_TO_RECORD} of its fire; runs: {ids}"
    assert ids[0] == run_id, f"a run before the first fire at {fire}: {ids}"
    [record] = stack.wait([("ticker", run_id)], timeout=60)
    assert record.state == "succeeded" and record.trigger == "schedule"
    assert json.loads(stack.deps.blobs.read(layout.run_record("ticker", run_id)).data)["state"] == "succeeded"


def test_the_stack_files_limits_hold_locally_too(make_stack, tmp_path):
    """Before: local mode always used the default limits, while a refusal told the user to raise
    them in infra/stack.yaml, which `up` and `run` never read: a 12-entry matrix could not run."""
    from spotcron.core.settings import Limits

    entries = "".join(f"\n  - {{name: e{i}}}" for i in range(3))
    # A run now is a manual run; its share of the limits (limits.manual_share) is all of them here,
    # so what holds is the stack file's max_live_vms.
    stack = make_stack(limits=Limits(max_live_vms=2, manual_share=1.0))
    spec = job(tmp_path, "wide", "import time; time.sleep(3)", extra=f"matrix:{entries}\n")
    records = stack.wait(stack.run_now(spec), timeout=90)
    waited = [change.reason for r in records for change in r.history if change.state == "queued"]
    assert len(waited) == 1 and "max_live_vms" in waited[0] and "the limit is 2" in waited[0], \
        [(r.run_id, r.state, r.reason) for r in records]
    # The third entry waited for room instead of failing, and ran once one of the first two ended.
    assert [r.state for r in records] == ["succeeded"] * 3
