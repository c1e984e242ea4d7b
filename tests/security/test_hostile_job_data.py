"""A job's container writes hostile files for the control plane to read.

Everything a job writes (metrics.json, its manifest) is read with a byte cap and parsed with depth
and number limits. What must hold, through the real job_done and sweep entry points: the run ends
with its real outcome and a readable problem on its record, never an exception that stops the
function, and the sweep goes on to every other run.
"""

from __future__ import annotations

import json

import pytest

from spotcron.core import layout
from spotcron.core.metrics import MAX_BYTES, METRICS_FILE
from spotcron.testing.harness import make_spec

RUN = "20261122-1200"
DEEP = b"[" * 50_000
HUGE_NUMBER = b'{"work": {"value": 1' + b"0" * 400 + b', "unit": "samples"}}'
BAD_UTF8 = b'{"work": {"value": 1, "unit": "\xff\xfe"}}'
HOSTILE = {"deep": (DEEP, "nested deeper than 64"), "huge number": (HUGE_NUMBER, "digits"),
           "bad utf-8": (BAD_UTF8, "UTF-8")}


def metrics_name(job: str, run_id: str, attempt: int = 1) -> str:
    return layout.results_prefix(job, run_id, attempt) + METRICS_FILE


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_job_done_records_the_real_outcome_and_the_problem_of_a_hostile_metrics_file(h, kind):
    data, words = HOSTILE[kind]
    h.start(make_spec())
    h.upload("bot", RUN)
    h.blobs.write(metrics_name("bot", RUN), data)
    answer = h.callback("bot", RUN)
    assert answer.status_code == 200, answer.get_data(as_text=True)
    record = h.record("bot", RUN)
    assert record.state == "succeeded"
    assert words in record.metrics_problem and "metrics.json" in record.metrics_problem
    assert h.live_vms() == []


def test_a_metrics_file_far_over_the_cap_is_never_read_whole(h):
    """A 160 MiB metrics.json is read up to the 1 MiB cap and no further, never whole."""
    h.start(make_spec())
    h.upload("bot", RUN)
    name = metrics_name("bot", RUN)
    h.blobs.write(name, b'{"work": {"value": 1, "unit": "s"}, "pad": "' + b"x" * (8 * MAX_BYTES) + b'"}')
    biggest = []
    read, read_range = h.blobs.read, h.blobs.read_range

    def counting_read(object_name):
        blob = read(object_name)
        if object_name == name and blob is not None:
            biggest.append(len(blob.data))
        return blob

    def counting_range(object_name, start, size):
        piece = read_range(object_name, start, size)
        if object_name == name and piece is not None:
            biggest.append(len(piece))
        return piece

    h.blobs.read, h.blobs.read_range = counting_read, counting_range
    assert h.callback("bot", RUN).status_code == 200
    record = h.record("bot", RUN)
    assert record.state == "succeeded" and "more than the" in record.metrics_problem
    assert biggest and max(biggest) <= MAX_BYTES + 1


def vanish(h, job: str, run_id: str) -> None:
    attempt = h.record(job, run_id).current_attempt
    h.compute.preempt(attempt.zone, attempt.vm_name)


@pytest.mark.parametrize("what", ["metrics", "manifest"])
def test_the_sweep_survives_a_hostile_file_and_goes_on_to_every_other_run(h, what):
    """One run's 50,000 `[` must not end a sweep pass at that run: a run listed after it (another
    job's preempted run) is still retried."""
    h.start(make_spec(name="aaa"))
    h.start(make_spec(name="zzz"))
    h.upload("aaa", RUN)
    if what == "metrics":
        h.blobs.write(metrics_name("aaa", RUN), DEEP)
    else:
        h.blobs.write(layout.manifest("aaa", RUN, 1), b'{"exit_code": ' + DEEP)
    vanish(h, "aaa", RUN)
    vanish(h, "zzz", RUN)
    h.clock.advance(5 * 60)
    assert h.sweep().status_code == 200
    hostile, other = h.record("aaa", RUN), h.record("zzz", RUN)
    assert other.state == "running" and other.current_attempt.number == 2
    if what == "metrics":
        assert hostile.state == "succeeded" and "nested deeper than 64" in hostile.metrics_problem
    else:
        assert hostile.state != "running" or hostile.current_attempt.number == 2


def test_a_manifest_is_read_with_a_cap_too(h):
    h.start(make_spec())
    h.upload("bot", RUN)
    name = layout.manifest("bot", RUN, 1)
    h.blobs.write(name, json.dumps({"exit_code": 0, "files": [], "pad": "x" * (4 * MAX_BYTES)}).encode())
    sizes = []
    read = h.blobs.read

    def counting_read(object_name):
        blob = read(object_name)
        if object_name == name and blob is not None:
            sizes.append(len(blob.data))
        return blob

    h.blobs.read = counting_read
    vanish(h, "bot", RUN)
    h.clock.advance(5 * 60)
    h.sweep()
    assert sizes == []  # only ranged reads of the manifest
    assert h.record("bot", RUN).state in ("failed", "running", "lost")


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_the_report_shows_the_problem_of_a_hostile_file_instead_of_crashing(kind):
    from datetime import UTC, datetime

    from spotcron.cli.report import with_metrics
    from spotcron.core.runs import Attempt, RunRecord

    at = datetime(2026, 11, 22, 12, tzinfo=UTC)
    record = RunRecord(job="bot", run_id=RUN, state="succeeded", created_at=at, updated_at=at,
                       attempts=(Attempt(number=1, vm_name="sc-bot-a1", machine_type="e2-small"),))
    data, words = HOSTILE[kind]
    [checked] = with_metrics([record], lambda name: data)
    assert checked.metrics is None and words in checked.metrics_problem


class Surprise(Exception):
    """No kind of error the sweep knows: what a bug, or input nobody thought of, raises."""


@pytest.mark.parametrize("where", ["reading the record", "looking up the VM", "reading the manifest"])
@pytest.mark.parametrize("victim", [0, 1, 2])
def test_the_sweep_handles_every_other_run_whatever_one_run_raises(h, where, victim):
    """Any exception while handling one run is logged with that run's id and the pass goes on."""
    jobs = ["aaa", "mmm", "zzz"]
    for job in jobs:
        h.start(make_spec(name=job))
        vanish(h, job, RUN)
    h.clock.advance(5 * 60)
    bad = jobs[victim]
    read, get = h.blobs.read, h.compute.get_instance
    read_range = h.blobs.read_range

    def hostile_read(name):
        if where == "reading the record" and name == layout.run_record(bad, RUN):
            raise Surprise("boom")
        return read(name)

    def hostile_range(name, start, size):
        if where == "reading the manifest" and name == layout.manifest(bad, RUN, 1):
            raise Surprise("boom")
        return read_range(name, start, size)

    def hostile_get(zone, name):
        if where == "looking up the VM" and name.startswith(f"sc-{bad}-"):
            raise Surprise("boom")
        return get(zone, name)

    h.blobs.read, h.blobs.read_range, h.compute.get_instance = hostile_read, hostile_range, hostile_get
    assert h.sweep().status_code == 200
    h.blobs.read, h.blobs.read_range, h.compute.get_instance = read, read_range, get
    for job in jobs:
        record = h.record(job, RUN)
        if job != bad:
            assert record.current_attempt.number == 2 and record.state == "running", (job, record.state)


def test_spotcron_results_names_a_hostile_manifest_instead_of_crashing():
    from spotcron.core.errors import SpotcronError
    from spotcron.present.views import manifest_files

    with pytest.raises(SpotcronError, match="nested deeper than 64"):
        manifest_files(b'{"files": ' + DEEP, "runs/bot/r/attempt-1/manifest.json")
